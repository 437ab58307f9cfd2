import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingHttpHeaders, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { defaults } from "../../src/config/repo-config.ts";
import { listJobEvents } from "../../src/store/job-events.ts";
import { listMessages } from "../../src/store/messages.ts";
import { toolUse } from "../helpers/anthropic-fake.ts";
import { HOSTILE, startEverythingHttp } from "../helpers/mcp-servers.ts";
import {
  captureComment,
  fixScript,
  mockNewPr,
  mockRequester,
  mockStart,
  run,
  runQueued,
  type Seeded,
  sh,
  toolResults,
  usePipelineHarness,
} from "./pipeline-harness.ts";

const h = usePipelineHarness();

const TOKEN = "tracker-token-5f1e9a0c7b";
const FIX = "Changed value.txt to fixed.\n\nSummary: Make value.txt say fixed";

/** The repository gets an MCP server of its own: tools/mcp.mjs on its default branch. */
async function addServer(seeded: Seeded): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), "vmpilot-mcp-repo-"));
  onTestFinished(() => rm(work, { recursive: true, force: true }));
  sh(work, `git clone -q ${seeded.remote} repo && mkdir repo/tools`);
  await copyFile(HOSTILE, join(work, "repo", "tools", "mcp.mjs"));
  sh(join(work, "repo"), "git add -A && git commit -qm 'An MCP server' && git push -q origin main");
}

/** The names of the tools a recorded request offered. */
// biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
const offered = (body: any): string[] =>
  (body.tools ?? []).map((tool: { name: string }) => tool.name);

async function eventTypes(jobId: number): Promise<string[]> {
  return (await listJobEvents(h.db.pool, jobId)).map((event) => event.type);
}

describe("a stdio MCP server of vmpilot.yml", () => {
  it("runs in the job's sandbox, and its tool's answer is in the model's next request", async () => {
    const seeded = await h.seedRepo();
    await addServer(seeded);
    const job = await h.seedJob(seeded);
    mockStart(seeded, [], "mcp:\n  docs:\n    command: [node, tools/mcp.mjs]\n    tools: [echo]\n");
    mockRequester();
    captureComment(seeded.repo, job.commentId);
    mockNewPr(seeded);
    h.fake.push(
      { content: [toolUse("mcp__docs__echo", { text: "ping-4711" })] },
      ...fixScript(FIX),
    );

    expect(await runQueued(run(job.job.id), h.deps())).toBe("succeeded");
    const [first, second] = h.fake.requests;
    // Offered before it started: the tool that starts it; the call by name started it.
    expect(offered(first?.body)).toContain("mcp__docs");
    expect(offered(first?.body)).not.toContain("mcp__docs__echo");
    expect(toolResults(second?.body).join("\n")).toContain("echo: ping-4711");
    expect(offered(second?.body)).toContain("mcp__docs__echo");
    expect(offered(second?.body)).not.toContain("mcp__docs");
    // The call is in the job's log, as a command is, with the server's start.
    const events = await listJobEvents(h.db.pool, job.job.id);
    const started = events.find((event) => event.type === "mcp_server");
    expect(started?.data).toMatchObject({
      server: "docs",
      state: "started",
      message: expect.stringMatching(/^MCP server docs started in \d+ ms: 1 of its \d+ tools/),
    });
    expect(events.filter((event) => event.type === "tool_call")[0]?.data).toMatchObject({
      name: "mcp__docs__echo",
      input: { text: "ping-4711" },
    });
  });

  it("starts no server in a job whose model calls no MCP tool", async () => {
    const seeded = await h.seedRepo();
    await addServer(seeded);
    const job = await h.seedJob(seeded);
    mockStart(seeded, [], "mcp:\n  docs:\n    command: [node, tools/mcp.mjs]\n");
    mockRequester();
    captureComment(seeded.repo, job.commentId);
    mockNewPr(seeded);
    h.fake.push(...fixScript(FIX));

    expect(await runQueued(run(job.job.id), h.deps())).toBe("succeeded");
    for (const { body } of h.fake.requests) expect(offered(body)).toContain("mcp__docs");
    expect(await eventTypes(job.job.id)).not.toContain("mcp_server");
  });
});

describe("a streamable HTTP MCP server (server-everything)", () => {
  let server: Awaited<ReturnType<typeof startEverythingHttp>>;
  let front: ReturnType<typeof createServer>;
  let url: string;
  const seen: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    // server-everything on a loopback port, behind a recorder of the headers it is sent.
    server = await startEverythingHttp();
    const { port } = server;
    front = createServer((req, res) => {
      seen.push(req.headers);
      const upstream = request(
        { host: "127.0.0.1", port, path: req.url, method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(front.address() as AddressInfo).port}/mcp`;
  });

  afterAll(async () => {
    server?.close();
    front?.closeAllConnections();
    await new Promise((resolve) => front?.close(resolve));
  });

  it("is reached from the worker with the operator's secret, which never reaches the model or the log", async () => {
    const seeded = await h.seedRepo();
    const job = await h.seedJob(seeded);
    mockStart(seeded);
    mockRequester();
    captureComment(seeded.repo, job.commentId);
    mockNewPr(seeded);
    h.fake.push(
      { content: [toolUse("mcp__everything__echo", { message: "over http" })] },
      ...fixScript(FIX),
    );
    const everything = {
      url,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: MCP_SERVERS's syntax.
      headers: { Authorization: "Bearer ${secrets.TRACKER_TOKEN}" },
      tools: ["echo"],
      from: "operator" as const,
    };
    const deps = h.deps({
      defaults: { ...defaults, mcp: { everything } },
      mcpSecrets: [{ name: "TRACKER_TOKEN", value: TOKEN }],
      // The tests' server is on loopback, over http: production takes neither.
      mcpEgress: { protocols: ["http:"], refuseAddress: () => undefined },
    });

    expect(await runQueued(run(job.job.id), deps)).toBe("succeeded");
    expect(toolResults(h.fake.requests[1]?.body).join("\n")).toContain("Echo: over http");
    expect(seen.length).toBeGreaterThan(0);
    for (const headers of seen) expect(headers.authorization).toBe(`Bearer ${TOKEN}`);
    const everywhere = JSON.stringify([
      h.fake.requests.map((request) => request.body),
      await listJobEvents(h.db.pool, job.job.id),
      await listMessages(h.db.pool, seeded.conversationId),
    ]);
    expect(everywhere).not.toContain(TOKEN);
  });
});
