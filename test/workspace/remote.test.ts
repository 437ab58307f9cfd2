// The worker's side of the workspace agent, against an agent that does not play fair: every call
// has a deadline and the job's abort, and every answer is read through a cap as it arrives.
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_EXEC_ANSWER_BYTES } from "../../src/workspace/agent/protocol.ts";
import { createRemoteWorkspace } from "../../src/workspace/agent/remote.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import {
  type Answer,
  type HostileAgent,
  startHostileAgent,
  stream,
} from "../helpers/hostile-agent.ts";
import { handDeadlines } from "./helpers.ts";

/** What the kernel's socket buffers may hold beyond what the worker read. */
const IN_FLIGHT = 1024 * 1024;
const MB = 1024 * 1024;

let agent: HostileAgent | undefined;
afterEach(async () => {
  await agent?.close();
  agent = undefined;
});

async function remote(
  answer: Answer,
  extra: { signal?: AbortSignal; deadline?: (ms: number) => AbortSignal } = {},
): Promise<Workspace> {
  agent = await startHostileAgent(answer);
  return createRemoteWorkspace({
    isolation: "vm",
    engine: "fly",
    root: "/workspace",
    endpoint: { socketPath: agent.socketPath },
    secret: "s".repeat(43),
    release: async () => {},
    ...extra,
  });
}

describe("a workspace agent that never answers", () => {
  it("fails each call at its deadline", async () => {
    const clock = handDeadlines();
    const workspace = await remote(() => {}, { deadline: clock.deadline });
    const calls = {
      "/v1/read": workspace.readFile("a.txt", 100),
      "/v1/list": workspace.listDir("."),
      "/v1/write": workspace.writeFile("a.txt", "new"),
      "/v1/exec": workspace.exec("true", { timeoutMs: 1000 }),
    };
    for (const [path, pending] of Object.entries(calls)) {
      pending.catch(() => undefined);
      await agent?.arrived(path);
    }
    expect(clock.given().sort((a, b) => a - b)).toEqual([31_000, 120_000, 120_000, 120_000]);
    clock.fire(120_000);
    await expect(calls["/v1/read"]).rejects.toThrow(
      "the workspace agent stopped answering (reading a.txt: no answer within 120 s)",
    );
    await expect(calls["/v1/list"]).rejects.toThrow(/stopped answering \(listing \./);
    await expect(calls["/v1/write"]).rejects.toThrow(/stopped answering \(writing a\.txt/);
    clock.fire(31_000);
    await expect(calls["/v1/exec"]).rejects.toThrow(/stopped answering \(a command/);
  });

  it("ends every call at once when the job is aborted", async () => {
    const job = new AbortController();
    const clock = handDeadlines();
    const workspace = await remote(() => {}, { signal: job.signal, deadline: clock.deadline });
    const read = workspace.readFile("a.txt", 100);
    const list = workspace.listDir(".");
    const write = workspace.writeFile("a.txt", "new");
    const exec = workspace.exec("sleep 100");
    for (const pending of [read, list, write, exec]) pending.catch(() => undefined);
    await Promise.all(
      ["/v1/read", "/v1/list", "/v1/write", "/v1/exec"].map((p) => agent?.arrived(p)),
    );
    job.abort();
    for (const pending of [read, list, write]) {
      await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    }
    // A command is cancelled at the agent first, which gets a short grace to answer.
    await agent?.arrived("/v1/cancel");
    clock.fire(2000);
    await expect(exec).rejects.toThrow(/stopped answering; its VM is given up/);
    await expect(workspace.readFile("a.txt", 100)).rejects.toMatchObject({ name: "AbortError" });
  });
});

describe("a workspace agent that answers too much", () => {
  it("refuses a 60 MB answer to a 5 MB read as it arrives, and one byte over the cap", async () => {
    const workspace = await remote((_req, res) => {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      stream(res, 60 * MB);
    });
    await expect(workspace.readFile("big", 5 * MB)).rejects.toThrow(
      /answer to reading big is over \d+ bytes/,
    );
    await agent?.idle();
    expect(agent?.sent()).toBeLessThan(5 * MB + IN_FLIGHT);
  });

  it("refuses a read answered with one byte more than asked for, and a declared length over the cap unread", async () => {
    let declared = false;
    const workspace = await remote((_req, res) => {
      if (declared) {
        res.writeHead(200, { "content-length": 60 * MB });
        res.flushHeaders();
        return;
      }
      res.writeHead(200);
      res.end(Buffer.alloc(101, "x"));
    });
    await expect(workspace.readFile("a", 100)).rejects.toThrow(
      "the workspace agent's answer to reading a is over 100 bytes",
    );
    declared = true;
    await expect(workspace.readFile("b", 100)).rejects.toThrow(/reading b is over \d+ bytes/);
    await agent?.idle();
    expect(agent?.sent()).toBeLessThan(1000);
  });

  it("refuses a 95 MB exec answer as it streams", async () => {
    const workspace = await remote((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      stream(res, 95 * MB, " ");
    });
    await expect(workspace.exec("yes")).rejects.toThrow(/answer to a command is over \d+ bytes/);
    await agent?.idle();
    expect(agent?.sent()).toBeLessThan(MAX_EXEC_ANSWER_BYTES + IN_FLIGHT);
    expect(MAX_EXEC_ANSWER_BYTES).toBeLessThan(50 * MB);
  });

  it("refuses an answer that is not what the protocol says", async () => {
    const workspace = await remote((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ stdout: 1, entries: [2] }));
    });
    await expect(workspace.exec("true")).rejects.toThrow(/answer to a command is malformed/);
    await expect(workspace.listDir(".")).rejects.toThrow(/answer to listing \. is malformed/);
  });

  it("streams a copied file to disk within its cap, and leaves nothing of one over it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "vmpilot-copy-"));
    try {
      let size = 3 * MB;
      const workspace = await remote((_req, res) => {
        res.writeHead(200, { "content-type": "application/octet-stream" });
        stream(res, size);
      });
      await workspace.copyOut("bundle", join(dir, "ok"), 4 * MB);
      expect((await stat(join(dir, "ok"))).size).toBe(3 * MB);
      size = 60 * MB;
      await expect(workspace.copyOut("bundle", join(dir, "big"), 4 * MB)).rejects.toThrow(
        /answer to copying bundle is over \d+ bytes/,
      );
      await agent?.idle();
      expect(agent?.sent()).toBeLessThan(3 * MB + 4 * MB + IN_FLIGHT);
      expect(await readdir(dir)).toEqual(["ok"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
