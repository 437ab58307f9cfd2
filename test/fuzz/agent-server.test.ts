// Fuzzing the workspace agent's HTTP server, in process: each request is written to the server as
// bytes on an in-memory connection, as a socket would carry it. Every request gets exactly the
// answer its shape calls for: 401 without the secret, 404 off the routes, 413 over a size limit,
// 400 for a body or query the protocol refuses, 422 for a path outside the checkout or a file
// refused; a well-formed one reads, lists, writes or cancels what it names. Commands never run:
// an exec that reaches its command has a working directory outside the checkout.
import assert from "node:assert/strict";
import {
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  realpath,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { duplexPair } from "node:stream";
import fc from "fast-check";
import { afterAll, beforeAll, describe, it } from "vitest";
import { agentError, MAX_FILE_BYTES, MAX_JSON_BYTES } from "../../src/workspace/agent/protocol.ts";
import { createAgentServer } from "../../src/workspace/agent/server.ts";
import { type Field, type Message, message, specs } from "./agent-messages.ts";
import { runs } from "./params.ts";
import { untrustedText } from "./text.ts";

const SECRET = "s".repeat(32);
const CONTENT = "hello, agent\n";

/** What the server must answer; `kind` for an error, `body` for what a success carries. */
interface Answer {
  status: number;
  kind?: string;
  reason?: string;
  body?: string;
  /** For a write: the file (in the checkout) that must now hold the body. */
  wrote?: string;
}

const outOfCheckout: Answer = { status: 422, kind: "escape" };
const failed: Answer = { status: 500, kind: "failed" };
const malformed: Answer = { status: 400, kind: "bad_request" };
const tooLarge: Answer = { status: 413, kind: "bad_request" };

interface Place {
  read: (maxBytes: number) => Answer;
  list: Answer;
}
const file: Place = {
  read: (maxBytes) =>
    maxBytes >= CONTENT.length
      ? { status: 200, body: CONTENT }
      : { status: 422, kind: "refused", reason: "too_large" },
  list: failed,
};
const directory = (entries: string[]): Place => ({
  read: () => ({ status: 422, kind: "refused", reason: "directory" }),
  list: { status: 200, body: JSON.stringify({ entries }) },
});
const escaping: Place = { read: () => outOfCheckout, list: outOfCheckout };

/** Paths in the checkout made in beforeAll, and what reading and listing each must answer. */
const PATHS: Record<string, Place> = {
  "src/a.txt": file,
  "src/deep/up/a.txt": file,
  src: directory(["a.txt", "deep/"]),
  ".": directory(["out-link", "src/", "w/"]),
  "missing.txt": { read: () => failed, list: failed },
  "../outside": escaping,
  "out-link": escaping,
  "out-link/x": escaping,
  "/etc": escaping,
  "src/a.txt\0": escaping,
};
const ESCAPES = Object.keys(PATHS).filter((path) => PATHS[path] === escaping);

interface Call {
  method: string;
  target: string;
  auth: string | undefined;
  body: string;
  /** A Content-Length sent instead of the body's own, with no body after it. */
  claimed?: number;
  /** The answer to this request with the secret, as a POST. */
  answer: Answer;
}

/** A JSON body from `spec`'s messages, or not JSON at all, or claiming more than the limit. */
function jsonCall(
  target: string,
  messages: fc.Arbitrary<Message>,
  answer: (value: Record<string, unknown>) => Answer,
): fc.Arbitrary<Omit<Call, "method" | "auth">> {
  return fc.oneof(
    {
      weight: 8,
      arbitrary: messages.map(({ value, broken }) => ({
        target,
        body: JSON.stringify(value),
        answer: broken.length > 0 ? malformed : answer(value as Record<string, unknown>),
      })),
    },
    {
      weight: 1,
      arbitrary: fc.string().map((text) => ({ target, body: `${text}{`, answer: malformed })),
    },
    {
      weight: 1,
      arbitrary: fc.nat().map((over) => ({
        target,
        body: "",
        claimed: MAX_JSON_BYTES + 1 + over,
        answer: tooLarge,
      })),
    },
  );
}

const known = (field: Field, paths: string[]): Field => ({
  ...field,
  allowed: fc.constantFrom(...paths),
});

const exec = jsonCall(
  "/v1/exec",
  // Its directory is always outside: an exec that passed the checks would run its command.
  message({ ...specs.execRequest, cwd: known(specs.execRequest.cwd, ESCAPES) }).filter(
    ({ value }) =>
      typeof value !== "object" || value === null || Array.isArray(value) || "cwd" in value,
  ),
  () => outOfCheckout,
);
const read = jsonCall(
  "/v1/read",
  message({ ...specs.readRequest, path: known(specs.readRequest.path, Object.keys(PATHS)) }),
  ({ path, maxBytes }) => PATHS[path as string]?.read(maxBytes as number) as Answer,
);
const list = jsonCall(
  "/v1/list",
  message({ ...specs.listRequest, path: known(specs.listRequest.path, Object.keys(PATHS)) }),
  ({ path }) => PATHS[path as string]?.list as Answer,
);
const cancel = jsonCall("/v1/cancel", message(specs.cancelRequest), () => ({
  status: 204,
  body: "",
}));

const write = fc.oneof(
  fc
    .record({
      file: fc.constantFrom("w/a.txt", "w/b/c.txt", "w/new"),
      body: untrustedText,
    })
    .map(({ file, body }) => ({
      target: `/v1/write?path=${encodeURIComponent(file)}`,
      body,
      answer: { status: 204, body: "", wrote: file },
    })),
  fc.constantFrom(...ESCAPES).map((file) => ({
    target: `/v1/write?path=${encodeURIComponent(file)}`,
    body: "x",
    answer: outOfCheckout,
  })),
  fc.constantFrom("/v1/write", "/v1/write?path=", "/v1/write?file=w/a.txt").map((target) => ({
    target,
    body: "x",
    answer: malformed,
  })),
  fc.constant({
    target: "/v1/write?path=w/a.txt",
    body: "",
    claimed: MAX_FILE_BYTES + 1,
    answer: tooLarge,
  }),
);

// One query parameter a checkout refuses, the others as a checkout takes them (or left out).
const CHECKOUT: Record<string, { allowed: string[]; refused: string[] }> = {
  branch: { allowed: ["vmpilot/fix-1"], refused: ["", "-x", "a..b", "a b", "x".repeat(201)] },
  origin: { allowed: ["", "https://github.com/o/r.git"], refused: ["a\nb", "é"] },
  proxy: { allowed: ["http://u:p@10.0.0.1:3128"], refused: ["", "ftp://x", "http://a b"] },
  shallow: { allowed: ["a".repeat(40)], refused: ["", "zz", `${"a".repeat(40)},`] },
};
const checkout = fc
  .record({
    bad: fc.constantFrom(...Object.keys(CHECKOUT)),
    picks: fc.tuple(...Object.keys(CHECKOUT).map(() => fc.nat())),
    absent: fc.tuple(...Object.keys(CHECKOUT).map(() => fc.boolean())),
  })
  .map(({ bad, picks, absent }) => {
    const query = new URLSearchParams();
    Object.entries(CHECKOUT).forEach(([name, values], at) => {
      const choices = name === bad ? values.refused : values.allowed;
      const skip = name !== bad && name !== "branch" && absent[at];
      if (!skip) query.set(name, choices[(picks[at] as number) % choices.length] as string);
    });
    return { target: `/v1/checkout?${query}`, body: "", answer: malformed };
  });

const offRoute = fc
  .constantFrom("/", "/v1", "/v1/nope", "/v1/read/", "/V1/READ", "/health")
  .map((target) => ({ target, body: "{}", answer: { status: 404, kind: "bad_request" } }));

const calls: fc.Arbitrary<Call> = fc
  .record({
    call: fc.oneof(exec, read, list, cancel, write, checkout, offRoute),
    method: fc.oneof({ weight: 8, arbitrary: fc.constant("POST") }, fc.constantFrom("GET", "PUT")),
    auth: fc.oneof(
      { weight: 8, arbitrary: fc.constant(`Bearer ${SECRET}`) },
      fc.constantFrom(
        undefined,
        "",
        `bearer ${SECRET}`,
        `Bearer  ${SECRET}`,
        `Bearer ${SECRET}x`,
        SECRET,
      ),
    ),
  })
  .map(({ call, method, auth }) => ({ ...call, method, auth }));

/** What the server must answer `call` with, the secret and method considered. */
function expected(call: Call): Answer {
  const path = new URL(call.target, "http://agent.invalid").pathname;
  if (call.method === "GET" && path === "/health") return { status: 200, body: '{"ok":true}' };
  if (call.auth !== `Bearer ${SECRET}`) return { status: 401, kind: "unauthorized" };
  if (call.method !== "POST") return { status: 404, kind: "bad_request" };
  return call.answer;
}

/** The status and body of the server's answer to `call`, on a connection of its own. */
function send(server: Server, call: Call): Promise<{ status: number; body: Buffer }> {
  const body = Buffer.from(call.body);
  const head = [
    `${call.method} ${call.target} HTTP/1.1`,
    "host: agent",
    "connection: close",
    `content-length: ${call.claimed ?? body.length}`,
    ...(call.auth === undefined ? [] : [`authorization: ${call.auth}`]),
  ];
  const [client, side] = duplexPair();
  server.emit("connection", side);
  const chunks: Buffer[] = [];
  client.on("data", (chunk: Buffer) => chunks.push(chunk));
  client.write(`${head.join("\r\n")}\r\n\r\n`);
  if (call.claimed === undefined) client.write(body);
  return new Promise((resolve, reject) => {
    client.on("error", reject);
    client.on("end", () => resolve(parseAnswer(Buffer.concat(chunks))));
  });
}

function parseAnswer(raw: Buffer): { status: number; body: Buffer } {
  const end = raw.indexOf("\r\n\r\n");
  const head = raw.subarray(0, end).toString("latin1");
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
  let rest = raw.subarray(end + 4);
  if (!/^transfer-encoding: chunked$/im.test(head)) return { status, body: rest };
  const parts: Buffer[] = [];
  for (;;) {
    const line = rest.indexOf("\r\n");
    const size = Number.parseInt(rest.subarray(0, line).toString("latin1"), 16);
    if (!size) return { status, body: Buffer.concat(parts) };
    parts.push(rest.subarray(line + 2, line + 2 + size));
    rest = rest.subarray(line + 2 + size + 2);
  }
}

let root: string;
let outside: string;

beforeAll(async () => {
  const base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-fuzz-agent-")));
  root = join(base, "root");
  outside = join(base, "outside");
  await mkdir(join(root, "src", "deep"), { recursive: true });
  await mkdir(join(root, "w"));
  await mkdir(outside);
  await writeFile(join(root, "src", "a.txt"), CONTENT);
  await symlink(outside, join(root, "out-link"));
  await symlink("../../src", join(root, "src", "deep", "up"));
});
afterAll(async () => {
  if (root) await rm(join(root, ".."), { recursive: true, force: true });
});

describe("the workspace agent's server", () => {
  it("answers each request as its shape calls for, and does what a well-formed one asks", async () => {
    const server = createAgentServer({ root, secret: SECRET, env: {}, log: () => {} });
    try {
      await fc.assert(
        fc.asyncProperty(calls, async (call) => {
          const want = expected(call);
          const got = await send(server, call);
          assert.equal(got.status, want.status, got.body.toString());
          if (want.kind !== undefined) {
            const { error } = agentError.parse(JSON.parse(got.body.toString()));
            assert.equal(error.kind, want.kind);
            assert.equal(error.reason, want.reason);
          } else assert.equal(got.body.toString(), want.body);
          if (want.wrote)
            assert.deepEqual(await readFile(join(root, want.wrote)), Buffer.from(call.body));
        }),
        runs(10_000),
      );
    } finally {
      server.emit("close");
    }
    assert.deepEqual(await readdir(outside), []);
    assert.deepEqual((await readdir(root)).sort(), ["out-link", "src", "w"]);
    assert.equal(await readFile(join(root, "src", "a.txt"), "utf8"), CONTENT);
  });
});
