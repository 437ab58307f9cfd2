// The workspace agent: runs inside a VM or pod (or, on the `local` engine and in tests, inside a
// bubblewrap sandbox standing in for one) and does what a Workspace does, for the worker that
// created it: commands with the sandbox's semantics (environment allow-list, cwd inside the
// checkout, timeout, capped output, the whole process group killed), and file operations behind
// the same containment checks. Every request but /health carries the per-workspace secret.
import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { readCapped as readBody } from "../../http/capped-body.ts";
import { fileOps } from "../files.ts";
import { PathEscapeError, resolveInside } from "../paths.ts";
import { proxyEnv, withExtraEnv } from "../process/env.ts";
import type { Exit, Launched } from "../process/launcher.ts";
import { FileRefusedError } from "../read-capped.ts";
import type { Owner } from "../sandbox/owner.ts";
import {
  cancelRequest,
  checkoutBranch,
  checkoutOrigin,
  checkoutProxy,
  checkoutShallow,
  execRequest,
  FRAME_OUTPUT_BYTES,
  inputRequest,
  listRequest,
  MAX_FILE_BYTES,
  MAX_JSON_BYTES,
  readRequest,
  spawnRequest,
} from "./protocol.ts";
import { SeedRefused, seedCheckout } from "./seed.ts";
import { createWarmShell } from "./warm-shell.ts";

export interface AgentOptions {
  /** The checkout: commands run and files are read and written only below it. */
  root: string;
  secret: string;
  /** What every command's environment starts from (env.ts's allow-list, plus any proxy). */
  env: Record<string, string>;
  /** One line per refused request (never its body). */
  log(line: Record<string, unknown>): void;
  /** Called once the checkout is in place: a job has started. */
  onCheckout?(): void;
  /** Who commands (and git's checkout) run as (agent/identity.ts); default the agent's own uid. */
  commandUser?: Owner;
  /** What each command starts under (bwrap.ts, commandSandbox), which drops to commandUser. */
  commandSandbox?: readonly string[];
}

class BadRequest extends Error {}

/** What a spawned command's answer may hold unsent before the command is stopped. */
const MAX_UNREAD_BYTES = 16 * 1024 * 1024;
const FLOODED = `it wrote over ${MAX_UNREAD_BYTES / 1024 / 1024} MB faster than it was read, and was stopped`;

const digest = (text: string) => createHash("sha256").update(text).digest();

function authorized(req: IncomingMessage, secret: string): boolean {
  const header = req.headers.authorization ?? "";
  const sent = header.startsWith("Bearer ") ? header.slice(7) : "";
  return sent !== "" && timingSafeEqual(digest(sent), digest(secret));
}

function json(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(value));
}

function fail(res: ServerResponse, status: number, kind: string, message: string): void {
  json(res, status, { error: { kind, message } });
}

async function body(req: IncomingMessage, limit: number): Promise<Buffer> {
  if (Number(req.headers["content-length"] ?? 0) > limit) throw new BadRequest("body too large");
  const read = await readBody(req, limit);
  if (read === undefined) throw new BadRequest("body too large");
  return read;
}

async function jsonBody<T>(req: IncomingMessage, schema: { parse(v: unknown): T }): Promise<T> {
  const text = (await body(req, MAX_JSON_BYTES)).toString("utf8");
  try {
    return schema.parse(JSON.parse(text));
  } catch {
    throw new BadRequest("malformed request");
  }
}

export function createAgentServer(options: AgentOptions): Server {
  const files = fileOps(options.root);
  // The checkout may add the worker's egress proxy for this job's commands (agent/protocol.ts).
  let env = options.env;
  const shell = createWarmShell(options.commandUser, options.commandSandbox);
  shell.warm(env);
  const running = new Map<string, AbortController>();
  /** Cancels that arrived before their command (both are sent at once on an early abort). */
  const early = new Set<string>();

  async function runCommand(req: IncomingMessage, res: ServerResponse) {
    const request = await jsonBody(req, execRequest);
    const cwd =
      request.cwd === undefined ? options.root : await resolveInside(options.root, request.cwd);
    const commandEnv = withExtraEnv(env, request.env);
    // The worker going away (its abort, its crash) kills the command.
    const gone = new AbortController();
    if (running.has(request.id)) throw new BadRequest("a command with this id is running");
    running.set(request.id, gone);
    res.once("close", () => gone.abort());
    if (early.delete(request.id)) gone.abort();
    try {
      const result = await shell.run(request.command, cwd, commandEnv, {
        timeoutMs: request.timeoutMs,
        signal: gone.signal,
      });
      json(res, 200, result);
    } finally {
      running.delete(request.id);
    }
  }

  /** Spawned commands by id, for /v1/input. */
  const spawned = new Map<string, Launched>();

  async function spawn(req: IncomingMessage, res: ServerResponse) {
    const request = await jsonBody(req, spawnRequest);
    if (running.has(request.id)) throw new BadRequest("a command with this id is running");
    const gone = new AbortController();
    running.set(request.id, gone);
    res.once("close", () => gone.abort());
    if (early.delete(request.id)) gone.abort();
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    // The worker waits for the answer to begin before it writes: a command that says nothing
    // until spoken to must not hold the headers back.
    res.flushHeaders();
    let flooded = false;
    const frame = (value: object) => {
      res.write(`${JSON.stringify(value)}\n`);
      // Output faster than the worker reads it: the command is stopped rather than buffered.
      if (res.writableLength > MAX_UNREAD_BYTES && !flooded) {
        flooded = true;
        gone.abort();
      }
    };
    try {
      const started = await shell.spawn(request.command, options.root, env, (stream, chunk) => {
        for (let at = 0; at < chunk.length; at += FRAME_OUTPUT_BYTES) {
          frame({ [stream]: chunk.subarray(at, at + FRAME_OUTPUT_BYTES).toString("base64") });
        }
      });
      spawned.set(request.id, started);
      const kill = () => started.kill();
      gone.signal.addEventListener("abort", kill, { once: true });
      if (gone.signal.aborted) kill();
      const exit: Exit | Error = await started.done.catch((error: Error) => error);
      if (exit instanceof Error)
        frame({ exit: null, error: `it could not start: ${exit.message}` });
      else if (flooded) frame({ exit: null, error: FLOODED });
      else frame({ exit: exit.code });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      frame({ exit: null, error: `it could not start: ${message}` });
    } finally {
      spawned.delete(request.id);
      running.delete(request.id);
      res.end();
    }
  }

  async function input(req: IncomingMessage, res: ServerResponse) {
    const request = await jsonBody(req, inputRequest);
    const started = spawned.get(request.id);
    if (!started) throw new BadRequest("no such command is running");
    started.write(request.data);
    res.writeHead(204).end();
  }

  async function cancel(req: IncomingMessage, res: ServerResponse) {
    const request = await jsonBody(req, cancelRequest);
    const command = running.get(request.id);
    if (command) command.abort();
    else if (early.size < 1000) early.add(request.id);
    res.writeHead(204).end();
  }

  async function read(req: IncomingMessage, res: ServerResponse) {
    const request = await jsonBody(req, readRequest);
    const data = await files.readFile(request.path, Math.min(request.maxBytes, MAX_FILE_BYTES));
    res.writeHead(200, { "content-type": "application/octet-stream" });
    res.end(data);
  }

  async function write(req: IncomingMessage, res: ServerResponse, url: URL) {
    const path = url.searchParams.get("path");
    if (!path) throw new BadRequest("missing path");
    await files.writeFile(path, await body(req, MAX_FILE_BYTES));
    res.writeHead(204).end();
  }

  async function list(req: IncomingMessage, res: ServerResponse) {
    const request = await jsonBody(req, listRequest);
    json(res, 200, { entries: await files.listDir(request.path) });
  }

  async function checkout(req: IncomingMessage, res: ServerResponse, url: URL) {
    const branch = checkoutBranch.safeParse(url.searchParams.get("branch"));
    const origin = checkoutOrigin.safeParse(url.searchParams.get("origin") ?? "");
    const proxy = checkoutProxy.safeParse(url.searchParams.get("proxy") ?? undefined);
    const shallow = checkoutShallow.safeParse(url.searchParams.get("shallow") ?? undefined);
    if (!branch.success || !origin.success || !proxy.success || !shallow.success) {
      throw new BadRequest("malformed request");
    }
    try {
      await seedCheckout(req, {
        root: options.root,
        env,
        branch: branch.data,
        origin: origin.data,
        shallow: shallow.data ?? [],
        user: options.commandUser,
      });
    } catch (error) {
      if (error instanceof SeedRefused) throw new BadRequest(error.message);
      throw error;
    }
    if (proxy.data) env = { ...env, ...proxyEnv(proxy.data) };
    shell.warm(env);
    options.onCheckout?.();
    json(res, 200, { root: options.root });
  }

  const routes: Record<
    string,
    (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void>
  > = {
    "/v1/exec": runCommand,
    "/v1/read": read,
    "/v1/write": write,
    "/v1/list": list,
    "/v1/cancel": cancel,
    "/v1/spawn": spawn,
    "/v1/input": input,
    "/v1/checkout": checkout,
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://agent.invalid");
    if (req.method === "GET" && url.pathname === "/health") {
      json(res, 200, { ok: true });
      return;
    }
    const route = req.method === "POST" ? routes[url.pathname] : undefined;
    if (!authorized(req, options.secret)) {
      options.log({
        msg: "refused a request without the workspace's secret",
        path: url.pathname.slice(0, 100),
      });
      // Not read: the connection closes with the answer.
      res.writeHead(401, { "content-type": "application/json", connection: "close" });
      res.end(JSON.stringify({ error: { kind: "unauthorized", message: "unauthorized" } }));
      return;
    }
    if (!route) {
      fail(res, 404, "bad_request", "no such endpoint");
      return;
    }
    try {
      await route(req, res, url);
    } catch (error) {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const message = error instanceof Error ? error.message : String(error);
      if (error instanceof BadRequest) {
        options.log({ msg: "refused a malformed request", path: url.pathname, reason: message });
        res.setHeader("connection", "close");
        fail(res, error.message === "body too large" ? 413 : 400, "bad_request", message);
      } else if (error instanceof FileRefusedError) {
        json(res, 422, { error: { kind: "refused", message, reason: error.reason } });
      } else if (error instanceof PathEscapeError) {
        options.log({ msg: "refused a path outside the checkout", path: url.pathname });
        fail(res, 422, "escape", message);
      } else fail(res, 500, "failed", message);
    }
  });
  server.on("close", () => {
    shell.close();
    for (const command of running.values()) command.abort();
  });
  return server;
}
