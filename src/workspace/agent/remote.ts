// A Workspace whose commands and files live behind a workspace agent (agent/server.ts): in a VM,
// a pod, or a local sandbox standing in for one. Same contract as the local workspaces; the
// worker's secrets never travel, only the per-workspace secret that authenticates the worker.
import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { rm, stat } from "node:fs/promises";
import { type IncomingMessage, request } from "node:http";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { z } from "zod";
import { readCapped } from "../../http/capped-body.ts";
import type { WorkspaceChoice } from "../isolation.ts";
import { PathEscapeError } from "../paths.ts";
import { DEFAULT_TIMEOUT_MS } from "../process/run.ts";
import { FileRefusedError } from "../read-capped.ts";
import type {
  BlockedConnection,
  ProcessEnd,
  SpawnOptions,
  Workspace,
  WorkspaceProcess,
} from "../types.ts";
import {
  ANSWER_ENVELOPE_BYTES,
  agentError,
  checkoutResult,
  execResult,
  listResult,
  MAX_EXEC_ANSWER_BYTES,
  MAX_FILE_BYTES,
  MAX_FRAME_BYTES,
  MAX_LIST_ANSWER_BYTES,
  spawnFrame,
} from "./protocol.ts";

/**
 * Where the agent listens: a unix socket (local) or an http://host:port base (a VM's address).
 * `headers` go on every request: through a Fly Flycast address, fly-force-instance-id is what
 * routes a request to its own Machine.
 */
export type AgentEndpoint =
  | { socketPath: string }
  | { baseUrl: string; headers?: Readonly<Record<string, string>> };

/** The endpoint's own headers; the protocol's headers come after them and win. */
const endpointHeaders = (endpoint: AgentEndpoint) =>
  "headers" in endpoint ? (endpoint.headers ?? {}) : {};

export interface RemoteWorkspaceOptions extends WorkspaceChoice {
  /** The checkout's path as the agent sees it; shown to the model. */
  root: string;
  endpoint: AgentEndpoint;
  secret: string;
  /** Tears down what runs the agent (the VM, the pod, the local sandbox). */
  release(): Promise<void>;
  blockedConnections?: () => readonly BlockedConnection[];
  /** The job's abort: every call ends with it (a command is killed at the agent first). */
  signal?: AbortSignal;
  /** Default AbortSignal.timeout. */
  deadline?: Deadline;
}

/** How long after a command's own timeout the agent has to answer before it is given up on. */
const ANSWER_GRACE_MS = 30_000;
/** How long after an abort: killing a process group is quick. */
const ABORT_GRACE_MS = 2_000;
/** How long a file call (read, write, list, cancel) may take in full. */
const FILE_CALL_MS = 120_000;
/** The checkout: the agent writes the bundle and runs git init, fetch and reset (30 min each). */
const SEED_MS = 60 * 60_000;

/** What a command killed before it could answer reports. */
const KILLED = {
  stdout: "",
  stderr: "",
  exitCode: null,
  timedOut: false,
  truncated: false,
  fullStdout: "",
  fullStderr: "",
};

class AgentError extends Error {
  override name = "AgentError";
}

interface Answer {
  status: number;
  body: Buffer;
}

/** A request body: bytes, or a file streamed from disk (a checkout's bundle). */
type Body = Buffer | { file: string; size: number };

/** A signal that aborts after `ms`; tests pass their own, fired by hand. */
export type Deadline = (ms: number) => AbortSignal;

interface Call {
  path: string;
  body: Body;
  type: string;
  /** Names the call in errors: "reading a.txt". */
  what: string;
  /** Bytes the answer may have; a longer one is refused as it arrives, never held whole. */
  limit: number;
  /** The agent has this long to answer in full, or is given up on. */
  ms: number;
  /** The caller's abort: the call ends at once with its reason. */
  signal?: AbortSignal;
  /** A new file a successful answer is streamed to, instead of being held (its body is empty). */
  sink?: string;
}

type Agent = Pick<RemoteWorkspaceOptions, "endpoint" | "secret" | "deadline">;

/** A POST to the agent at `path`, with the workspace's secret and the endpoint's headers. */
function postTo(agent: Agent, path: string, type: string, length: number) {
  const { endpoint } = agent;
  const target =
    "socketPath" in endpoint
      ? { socketPath: endpoint.socketPath, path }
      : { ...hostOf(endpoint.baseUrl), path };
  return request({
    ...target,
    method: "POST",
    headers: {
      ...endpointHeaders(endpoint),
      authorization: `Bearer ${agent.secret}`,
      "content-type": type,
      "content-length": length,
    },
  });
}

/** A call whose body is `value` as JSON. */
function postJson(
  agent: Agent,
  path: string,
  value: unknown,
  spec: Pick<Call, "what" | "limit" | "ms" | "signal">,
): Promise<Answer> {
  const body = Buffer.from(JSON.stringify(value));
  return call(agent, { path, body, type: "application/json", ...spec });
}

function call(agent: Agent, spec: Call): Promise<Answer> {
  const late = (agent.deadline ?? AbortSignal.timeout)(spec.ms);
  const signal = spec.signal ? AbortSignal.any([late, spec.signal]) : late;
  const reason = () =>
    late.aborted
      ? new AgentError(
          `the workspace agent stopped answering (${spec.what}: no answer within ${spec.ms / 1000} s)`,
        )
      : signal.reason;
  if (signal.aborted) return Promise.reject(reason());
  return new Promise((resolve, reject) => {
    const length = Buffer.isBuffer(spec.body) ? spec.body.length : spec.body.size;
    const req = postTo(agent, spec.path, spec.type, length);
    const settle = (error: unknown, answer?: Answer) => {
      signal.removeEventListener("abort", onAbort);
      if (answer) return resolve(answer);
      reject(error);
      req.destroy();
    };
    const onAbort = () => settle(reason());
    signal.addEventListener("abort", onAbort, { once: true });
    const tooLarge = () =>
      settle(
        new AgentError(`the workspace agent's answer to ${spec.what} is over ${spec.limit} bytes`),
      );
    req.on("response", (res) => {
      if (Number(res.headers["content-length"] ?? 0) > spec.limit) return tooLarge();
      const status = res.statusCode ?? 0;
      const body =
        spec.sink && status >= 200 && status < 300
          ? streamCapped(res, spec.sink, spec.limit)
          : readCapped(res, spec.limit);
      body.then((read) => (read ? settle(null, { status, body: read }) : tooLarge()), settle);
    });
    req.on("error", (error) =>
      settle(new AgentError(`the workspace agent is unreachable: ${error.message}`)),
    );
    if (Buffer.isBuffer(spec.body)) req.end(spec.body);
    else createReadStream(spec.body.file).on("error", settle).pipe(req);
  });
}

/** Streams an answer to the new file `dest`; undefined once it passed `limit` bytes. */
async function streamCapped(
  res: IncomingMessage,
  dest: string,
  limit: number,
): Promise<Buffer | undefined> {
  let size = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _encoding, next) {
      size += chunk.length;
      next(size > limit ? new AnswerTooLarge() : null, chunk);
    },
  });
  try {
    await pipeline(res, cap, createWriteStream(dest, { flags: "wx", mode: 0o600 }));
    return Buffer.alloc(0);
  } catch (error) {
    await rm(dest, { force: true });
    if (error instanceof AnswerTooLarge) return undefined;
    throw error;
  }
}

class AnswerTooLarge extends Error {}

/** How long a health check may take in full. */
const HEALTH_MS = 2000;

/**
 * Starts a command at the agent that keeps running (/v1/spawn) and follows its answer, a JSON line
 * per frame, as it comes. The answer has FILE_CALL_MS to begin, then no deadline: the command
 * ends when it exits, is killed, or the caller's signal (the workspace's end, the job's) aborts.
 */
function spawnAt(
  agent: Agent,
  command: string,
  options: SpawnOptions & { signal: AbortSignal },
): Promise<WorkspaceProcess> {
  const id = randomUUID();
  const body = Buffer.from(JSON.stringify({ id, command }));
  const late = (agent.deadline ?? AbortSignal.timeout)(FILE_CALL_MS);
  const post = (path: string, value: unknown, what: string, ms: number, signal?: AbortSignal) =>
    postJson(agent, path, value, { what, limit: ANSWER_ENVELOPE_BYTES, ms, signal });
  return new Promise((resolve, reject) => {
    let ended: (end: ProcessEnd) => void = () => {};
    const exited = new Promise<ProcessEnd>((settle) => {
      ended = settle;
    });
    const req = postTo(agent, "/v1/spawn", "application/json", body.length);
    // Killed at the agent, which then answers its end; one that does not is given up on.
    let killed = false;
    const kill = () => {
      if (killed) return;
      killed = true;
      void post("/v1/cancel", { id }, "a cancel", ABORT_GRACE_MS).catch(() => undefined);
      const grace = (agent.deadline ?? AbortSignal.timeout)(ABORT_GRACE_MS);
      grace.addEventListener("abort", () => req.destroy(), { once: true });
    };
    const stop = () => {
      late.removeEventListener("abort", onLate);
      options.signal.removeEventListener("abort", kill);
    };
    const fail = (error: Error) => {
      stop();
      reject(error);
      ended({ code: null, error: error.message });
      req.destroy();
    };
    const onLate = () =>
      fail(new AgentError("the workspace agent stopped answering (starting a command)"));
    late.addEventListener("abort", onLate, { once: true });
    options.signal.addEventListener("abort", kill, { once: true });
    if (options.signal.aborted) return fail(new Error("The workspace was disposed"));
    req.on("error", (error) =>
      fail(new AgentError(`the workspace agent is unreachable: ${error.message}`)),
    );
    req.on("response", (res) => {
      late.removeEventListener("abort", onLate);
      if (res.statusCode !== 200) {
        readCapped(res, ANSWER_ENVELOPE_BYTES).then((read) => {
          try {
            check({ status: res.statusCode ?? 0, body: read ?? Buffer.alloc(0) }, ".", "a command");
            fail(new AgentError("the workspace agent's answer to a command is malformed"));
          } catch (error) {
            fail(error as Error);
          }
        }, fail);
        return;
      }
      resolve({
        write: async (data) => {
          const what = "input to a command";
          const answer = await post("/v1/input", { id, data }, what, FILE_CALL_MS, options.signal);
          check(answer, ".", "input to a command");
        },
        kill,
        exited,
      });
      followFrames(res, options.onOutput).then(ended, (error: Error) =>
        ended(killed ? { code: null } : { code: null, error: error.message }),
      );
      void exited.then(stop);
    });
    req.end(body);
  });
}

/** Hands each output frame on until the end frame; a line past MAX_FRAME_BYTES is refused. */
async function followFrames(
  res: IncomingMessage,
  onOutput: SpawnOptions["onOutput"],
): Promise<ProcessEnd> {
  let pending = "";
  for await (const chunk of res.setEncoding("utf8")) {
    pending += chunk as string;
    for (let newline = pending.indexOf("\n"); newline >= 0; newline = pending.indexOf("\n")) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      let frame: z.output<typeof spawnFrame>;
      try {
        frame = spawnFrame.parse(JSON.parse(line));
      } catch {
        res.destroy();
        throw new AgentError("the workspace agent's answer to a command is malformed");
      }
      if ("exit" in frame) {
        res.destroy();
        return frame.error === undefined
          ? { code: frame.exit }
          : { code: null, error: frame.error };
      }
      const [stream, data] =
        "stdout" in frame ? ["stdout", frame.stdout] : ["stderr", frame.stderr];
      onOutput(stream as "stdout" | "stderr", Buffer.from(data, "base64"));
    }
    if (pending.length > MAX_FRAME_BYTES) {
      res.destroy();
      throw new AgentError(`the workspace agent sent a frame over ${MAX_FRAME_BYTES} bytes`);
    }
  }
  return { code: null, error: "the workspace agent's answer ended before the command did" };
}

/** True once the agent answers its health check. */
export function agentHealthy(
  endpoint: AgentEndpoint,
  deadline: Deadline = AbortSignal.timeout,
): Promise<boolean> {
  const target =
    "socketPath" in endpoint ? { socketPath: endpoint.socketPath } : hostOf(endpoint.baseUrl);
  return new Promise((resolve) => {
    const headers = endpointHeaders(endpoint);
    const req = request(
      { ...target, path: "/health", method: "GET", signal: deadline(HEALTH_MS), headers },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
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
  agent: Agent,
  seed: SeedRequest,
  signal?: AbortSignal,
): Promise<string> {
  const query = new URLSearchParams({ branch: seed.branch, origin: seed.origin });
  if (seed.proxy) query.set("proxy", seed.proxy);
  if (seed.shallow.length > 0) query.set("shallow", seed.shallow.join(","));
  const body = seed.bundle
    ? { file: seed.bundle, size: (await stat(seed.bundle)).size }
    : Buffer.alloc(0);
  const answer = await call(agent, {
    path: `/v1/checkout?${query}`,
    body,
    type: "application/x-git-bundle",
    what: "the checkout",
    limit: ANSWER_ENVELOPE_BYTES,
    ms: SEED_MS,
    signal,
  });
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

/** Throws the error the agent reported, as the local workspaces would have thrown it. */
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
  /** Ends with the workspace or the job, whichever first. */
  const ended = AbortSignal.any(
    options.signal ? [lifetime.signal, options.signal] : [lifetime.signal],
  );
  const post = (
    path: string,
    value: unknown,
    spec: Pick<Call, "what" | "limit" | "ms" | "signal">,
  ) => postJson(options, path, value, spec);
  const deadline = options.deadline ?? AbortSignal.timeout;
  return {
    isolation: options.isolation,
    engine: options.engine,
    root: options.root,
    async exec(command, opts = {}) {
      if (lifetime.signal.aborted) throw new Error("The workspace was disposed");
      // An abort (the command's or the job's) kills the command at the agent, which then answers
      // as the local workspaces do. An agent that does not answer (a frozen VM) is given up on:
      // after the command's own timeout plus a grace period, or shortly after an abort.
      const id = randomUUID();
      const gaveUp = new AbortController();
      const stops = [opts.signal, options.signal].filter((each) => each !== undefined);
      const stop = AbortSignal.any(stops);
      const onAbort = () => {
        void post(
          "/v1/cancel",
          { id },
          {
            what: "a cancel",
            limit: ANSWER_ENVELOPE_BYTES,
            ms: ABORT_GRACE_MS,
            signal: lifetime.signal,
          },
        ).catch(() => undefined);
        deadline(ABORT_GRACE_MS).addEventListener("abort", () =>
          gaveUp.abort(new AgentError("the workspace agent stopped answering; its VM is given up")),
        );
      };
      if (stop.aborted) onAbort();
      else stop.addEventListener("abort", onAbort, { once: true });
      const started = performance.now();
      try {
        const answer = await post(
          "/v1/exec",
          { id, command, cwd: opts.cwd, env: opts.env, timeoutMs: opts.timeoutMs },
          {
            what: "a command",
            limit: MAX_EXEC_ANSWER_BYTES,
            ms: (opts.timeoutMs ?? DEFAULT_TIMEOUT_MS) + ANSWER_GRACE_MS,
            signal: AbortSignal.any([gaveUp.signal, lifetime.signal]),
          },
        );
        check(answer, opts.cwd ?? ".", "a command");
        return parse(execResult, answer, "a command");
      } catch (error) {
        // Disposing the workspace ends what runs in it: killed, as the local workspaces say.
        if (!lifetime.signal.aborted) throw error;
        return { ...KILLED, durationMs: performance.now() - started };
      } finally {
        stop.removeEventListener("abort", onAbort);
      }
    },
    async readFile(path, maxBytes) {
      const cap = Math.min(maxBytes, MAX_FILE_BYTES);
      const what = `reading ${path}`;
      const answer = await post(
        "/v1/read",
        { path, maxBytes: cap },
        { what, limit: cap + ANSWER_ENVELOPE_BYTES, ms: FILE_CALL_MS, signal: ended },
      );
      check(answer, path, what);
      if (answer.body.length > cap) {
        throw new AgentError(`the workspace agent's answer to ${what} is over ${cap} bytes`);
      }
      return answer.body;
    },
    async copyOut(path, dest, maxBytes) {
      const cap = Math.min(maxBytes, MAX_FILE_BYTES);
      const what = `copying ${path}`;
      const answer = await call(options, {
        path: "/v1/read",
        body: Buffer.from(JSON.stringify({ path, maxBytes: cap })),
        type: "application/json",
        what,
        limit: cap,
        ms: FILE_CALL_MS,
        signal: ended,
        sink: dest,
      });
      check(answer, path, what);
    },
    async writeFile(path, data) {
      const bytes = typeof data === "string" ? Buffer.from(data) : data;
      const answer = await call(options, {
        path: `/v1/write?path=${encodeURIComponent(path)}`,
        body: bytes,
        type: "application/octet-stream",
        what: `writing ${path}`,
        limit: ANSWER_ENVELOPE_BYTES,
        ms: FILE_CALL_MS,
        signal: ended,
      });
      check(answer, path, `writing ${path}`);
    },
    async listDir(path) {
      const what = `listing ${path}`;
      const answer = await post(
        "/v1/list",
        { path },
        { what, limit: MAX_LIST_ANSWER_BYTES, ms: FILE_CALL_MS, signal: ended },
      );
      check(answer, path, what);
      return parse(listResult, answer, what).entries;
    },
    async spawn(command, opts) {
      if (lifetime.signal.aborted) throw new Error("The workspace was disposed");
      const signal = opts.signal ? AbortSignal.any([ended, opts.signal]) : ended;
      return spawnAt(options, command, { ...opts, signal });
    },
    blockedConnections: () => options.blockedConnections?.() ?? [],
    async dispose() {
      if (lifetime.signal.aborted) return;
      lifetime.abort();
      await options.release();
    },
  };
}
