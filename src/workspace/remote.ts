// A Workspace whose commands and files live behind a workspace agent (agent/server.ts): in a VM,
// a pod, or a local sandbox standing in for one. Same contract as the local providers; the
// worker's secrets never travel, only the per-workspace secret that authenticates the worker.
import { randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { request } from "node:http";
import type { z } from "zod";
import {
  agentError,
  checkoutResult,
  execResult,
  listResult,
  MAX_FILE_BYTES,
} from "./agent/protocol.ts";
import { DEFAULT_TIMEOUT_MS } from "./exec.ts";
import { PathEscapeError } from "./paths.ts";
import { FileRefusedError } from "./read-capped.ts";
import type { BlockedConnection, ProviderName, Workspace } from "./types.ts";

/** Where the agent listens: a unix socket (local) or an http://host:port base (a VM's address). */
export type AgentEndpoint = { socketPath: string } | { baseUrl: string };

export interface RemoteWorkspaceOptions {
  provider: ProviderName;
  /** The checkout's path as the agent sees it; shown to the model. */
  root: string;
  endpoint: AgentEndpoint;
  secret: string;
  /** Tears down what runs the agent (the VM, the pod, the local sandbox). */
  release(): Promise<void>;
  blockedConnections?: () => readonly BlockedConnection[];
}

/** How long after a command's own timeout the agent has to answer before it is given up on. */
const ANSWER_GRACE_MS = 30_000;
/** How long after an abort: killing a process group is quick. */
const ABORT_GRACE_MS = 2_000;

// Uncapped output is kept for the job log; the agent's own capture bounds it.
const MAX_RESPONSE_BYTES = MAX_FILE_BYTES + 1024 * 1024;

class AgentError extends Error {
  override name = "AgentError";
}

interface Answer {
  status: number;
  body: Buffer;
}

/** A request body: bytes, or a file streamed from disk (a checkout's bundle). */
type Body = Buffer | { file: string; size: number };

function call(
  options: Pick<RemoteWorkspaceOptions, "endpoint" | "secret">,
  path: string,
  body: Body,
  type: string,
  signal?: AbortSignal,
): Promise<Answer> {
  const { endpoint } = options;
  const target =
    "socketPath" in endpoint
      ? { socketPath: endpoint.socketPath, path }
      : { ...hostOf(endpoint.baseUrl), path };
  return new Promise((resolve, reject) => {
    const req = request(
      {
        ...target,
        method: "POST",
        signal,
        headers: {
          authorization: `Bearer ${options.secret}`,
          "content-type": type,
          "content-length": Buffer.isBuffer(body) ? body.length : body.size,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            res.destroy(new AgentError("the workspace agent's answer is too large"));
            return;
          }
          chunks.push(chunk);
        });
        res.on("error", reject);
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      },
    );
    req.on("error", (error) =>
      reject(
        signal?.aborted
          ? error
          : new AgentError(`the workspace agent is unreachable: ${error.message}`),
      ),
    );
    if (Buffer.isBuffer(body)) req.end(body);
    else createReadStream(body.file).on("error", reject).pipe(req);
  });
}

/** True once the agent answers its health check. */
export function agentHealthy(endpoint: AgentEndpoint): Promise<boolean> {
  const target =
    "socketPath" in endpoint ? { socketPath: endpoint.socketPath } : hostOf(endpoint.baseUrl);
  return new Promise((resolve) => {
    const req = request({ ...target, path: "/health", method: "GET", timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end();
  });
}

/** Polls the agent's health with backoff until it answers; throws after `timeoutMs`. */
export async function waitForAgent(
  endpoint: AgentEndpoint,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let wait = 20;
  while (!(await agentHealthy(endpoint))) {
    signal?.throwIfAborted();
    if (Date.now() > deadline) throw new AgentError("the workspace agent did not answer");
    await new Promise((resolve) => setTimeout(resolve, wait));
    wait = Math.min(wait * 2, 1000);
  }
}

export interface SeedRequest {
  branch: string;
  origin: string;
  /** The worker's egress proxy for the commands, when there is one. */
  proxy?: string;
  /** The branch's git bundle; null for a repository without commits yet. */
  bundle: string | null;
  /** Where the bundle's history stops (a shallow one's boundary); empty for the whole history. */
  shallow: readonly string[];
}

/** Sends the checkout to a fresh agent; resolves to the checkout's path as the agent sees it. */
export async function seedRemoteCheckout(
  agent: Pick<RemoteWorkspaceOptions, "endpoint" | "secret">,
  seed: SeedRequest,
  signal?: AbortSignal,
): Promise<string> {
  const query = new URLSearchParams({ branch: seed.branch, origin: seed.origin });
  if (seed.proxy) query.set("proxy", seed.proxy);
  if (seed.shallow.length > 0) query.set("shallow", seed.shallow.join(","));
  const body = seed.bundle
    ? { file: seed.bundle, size: (await stat(seed.bundle)).size }
    : Buffer.alloc(0);
  const answer = await call(
    agent,
    `/v1/checkout?${query}`,
    body,
    "application/x-git-bundle",
    signal,
  );
  check(answer, ".", "the checkout");
  return parse(checkoutResult, answer, "the checkout").root;
}

function hostOf(baseUrl: string) {
  const url = new URL(baseUrl);
  return { host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || 80) };
}

function parse<T extends z.ZodType>(schema: T, answer: Answer, what: string): z.output<T> {
  let value: unknown;
  try {
    value = JSON.parse(answer.body.toString("utf8"));
  } catch {
    throw new AgentError(`the workspace agent's answer to ${what} is not JSON`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new AgentError(`the workspace agent's answer to ${what} is malformed`);
  return parsed.data;
}

/** Throws the error the agent reported, as the local providers would have thrown it. */
function check(answer: Answer, path: string, what: string): void {
  if (answer.status >= 200 && answer.status < 300) return;
  const { error } = parse(agentError, answer, what);
  if (error.kind === "refused" && error.reason) {
    throw new FileRefusedError(path, error.reason, error.message.slice(path.length + 1));
  }
  if (error.kind === "escape") {
    throw new PathEscapeError(path, error.message.replace(/^.*outside the workspace: /, ""));
  }
  throw new AgentError(`the workspace agent refused ${what} (${answer.status}): ${error.message}`);
}

export function createRemoteWorkspace(options: RemoteWorkspaceOptions): Workspace {
  const lifetime = new AbortController();
  const post = (path: string, value: unknown, signal?: AbortSignal) =>
    call(
      options,
      path,
      Buffer.from(JSON.stringify(value)),
      "application/json",
      signal ? AbortSignal.any([signal, lifetime.signal]) : lifetime.signal,
    );
  return {
    provider: options.provider,
    root: options.root,
    async exec(command, opts = {}) {
      if (lifetime.signal.aborted) throw new Error("The workspace was disposed");
      // An abort kills the command at the agent, which then answers as the local providers do.
      // An agent that does not answer (a frozen VM) is given up on: after the command's own
      // timeout plus a grace period, or shortly after an abort.
      const id = randomUUID();
      const gaveUp = new AbortController();
      const giveUp = () =>
        gaveUp.abort(new AgentError("the workspace agent stopped answering; its VM is given up"));
      const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
      const deadline = setTimeout(giveUp, timeoutMs + ANSWER_GRACE_MS);
      let grace: NodeJS.Timeout | undefined;
      const onAbort = () => {
        void post("/v1/cancel", { id }, AbortSignal.timeout(ABORT_GRACE_MS)).catch(() => undefined);
        grace = setTimeout(giveUp, ABORT_GRACE_MS);
      };
      if (opts.signal?.aborted) onAbort();
      else opts.signal?.addEventListener("abort", onAbort, { once: true });
      try {
        const answer = await post(
          "/v1/exec",
          { id, command, cwd: opts.cwd, env: opts.env, timeoutMs: opts.timeoutMs },
          gaveUp.signal,
        );
        check(answer, opts.cwd ?? ".", "a command");
        return parse(execResult, answer, "a command");
      } catch (error) {
        throw gaveUp.signal.aborted ? gaveUp.signal.reason : error;
      } finally {
        clearTimeout(deadline);
        clearTimeout(grace);
        opts.signal?.removeEventListener("abort", onAbort);
      }
    },
    async readFile(path, maxBytes) {
      const answer = await post("/v1/read", { path, maxBytes });
      check(answer, path, `reading ${path}`);
      return answer.body;
    },
    async writeFile(path, data) {
      const bytes = typeof data === "string" ? Buffer.from(data) : data;
      const answer = await call(
        options,
        `/v1/write?path=${encodeURIComponent(path)}`,
        bytes,
        "application/octet-stream",
        lifetime.signal,
      );
      check(answer, path, `writing ${path}`);
    },
    async listDir(path) {
      const answer = await post("/v1/list", { path });
      check(answer, path, `listing ${path}`);
      return parse(listResult, answer, `listing ${path}`).entries;
    },
    blockedConnections: () => options.blockedConnections?.() ?? [],
    async dispose() {
      if (lifetime.signal.aborted) return;
      lifetime.abort();
      await options.release();
    },
  };
}
