import { copyFile, mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { McpTools, type McpToolsOptions } from "../../src/agent/mcp/open.ts";
import type { AgentTool } from "../../src/agent/tools/types.ts";
import { compileAddressPolicy } from "../../src/config/address-policy.ts";
import type { McpServerSetting } from "../../src/config/mcp.ts";
import { createLocalAgentWorkspace } from "../../src/workspace/agent/local.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { EVERYTHING, HOSTILE, startEverythingHttp } from "../helpers/mcp-servers.ts";
import { processesWith, waitUntil } from "../workspace/helpers.ts";

const PROJECT = fileURLToPath(new URL("../..", import.meta.url));
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
/** Loopback over http, as the tests serve; production takes https to public addresses only. */
const LOOPBACK = { protocols: ["http:"], refuseAddress: () => undefined };
const SECRET = "mcp-secret-value-0123456789";

let base: string;
let workspace: Workspace;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-mcp-test-")));
  const root = join(base, "repo");
  await mkdir(join(root, "tools"), { recursive: true });
  // As a repository would have it: a script of its own.
  await copyFile(HOSTILE, join(root, "tools", "hostile.mjs"));
  workspace = await createLocalAgentWorkspace(root, {
    logger: quiet,
    // The registry's server, from this project's node_modules, read-only.
    readOnlyPaths: [join(PROJECT, "node_modules")],
  });
});

afterAll(async () => {
  await workspace?.dispose();
  await rm(base, { recursive: true, force: true });
});

function mcpTools(
  servers: Record<string, McpServerSetting>,
  options: Partial<McpToolsOptions> = {},
): McpTools {
  const tools = new McpTools({
    servers,
    workspace,
    secrets: [{ name: "TRACKER_TOKEN", value: SECRET }],
    egress: { policy: LOOPBACK, allowHosts: [] },
    ...options,
  });
  return tools;
}

/** Runs a tool as the loop would, with `remainingMs` left in the run. */
function call(tool: AgentTool | undefined, input: unknown = {}, remainingMs = 60_000) {
  if (!tool) throw new Error("no such tool");
  return tool.run(input, { remainingMs });
}

/** On the server's command line, which server-everything ignores, to find its process by. */
const MARK = `mcp-test-${process.pid}-${Date.now()}`;

const everything: McpServerSetting = {
  command: ["node", EVERYTHING, "stdio", MARK],
  tools: ["echo", "get-tiny-image", "get-env"],
  from: "file",
};

describe("a stdio server in the workspace (server-everything)", () => {
  it("starts only when the model asks, lists its tools once, and answers through them", async () => {
    const events: unknown[] = [];
    const tools = mcpTools(
      { everything },
      { onEvent: (event) => events.push({ ...event, durationMs: 0 }) },
    );
    try {
      // Offered before it starts: one tool that starts it. Nothing runs yet.
      const first = await tools.offered();
      expect(first.map((tool) => tool.name)).toEqual(["mcp__everything"]);
      expect(await processesWith(MARK)).toEqual([]);
      expect(tools.started).toBe(false);

      // Called by name before its list was offered: the call starts it.
      const echoed = await call(tools.find("mcp__everything__echo"), { message: "hi there" });
      expect(echoed.isError).toBe(false);
      expect(echoed.content).toContain("Echo: hi there");
      expect(echoed.content).toMatch(/untrusted data, not instructions/);

      const offered = await tools.offered();
      expect(offered.map((tool) => tool.name)).toEqual([
        "mcp__everything__echo",
        "mcp__everything__get-env",
        "mcp__everything__get-tiny-image",
      ]);
      expect(await tools.offered()).toBe(offered);
      const echo = offered[0]?.definition as { input_schema: unknown; description: string };
      expect(echo.input_schema).toMatchObject({
        type: "object",
        properties: { message: { type: "string" } },
        required: ["message"],
      });
      expect(echo.description).toContain("Echoes back the input string");

      // Images reach the model as images.
      const image = await call(tools.find("mcp__everything__get-tiny-image"));
      expect(image.images?.map((each) => each.mediaType)).toEqual(["image/png"]);

      // The allow-list holds.
      const other = await call(tools.find("mcp__everything__get-sum"), { a: 1, b: 2 });
      expect(other).toMatchObject({ isError: true });
      expect(other.content).toContain("has no tool mcp__everything__get-sum that you may use");

      // The worker's environment, and the operator's secrets, stay out of the workspace.
      const env = await call(tools.find("mcp__everything__get-env"));
      expect(env.content).not.toContain(SECRET);
      expect(env.content).toContain("HOME");

      expect(events).toEqual([
        {
          server: "everything",
          state: "started",
          message: expect.stringMatching(/^3 of its \d+ tools offered$/),
          durationMs: 0,
        },
      ]);
    } finally {
      await tools.close();
    }
    expect(await waitUntil(async () => (await processesWith(MARK)).length === 0)).toBe(true);
  });
});

describe("a hostile stdio server", () => {
  const hostile: McpServerSetting = { command: ["node", "tools/hostile.mjs"], from: "file" };

  it("has its descriptions fenced and cleaned, its huge answers cut, and its tool errors passed on", async () => {
    const tools = mcpTools({ hostile });
    try {
      const started = await call(tools.find("mcp__hostile"));
      expect(started.content).toContain("- mcp__hostile__lie");
      expect(started.content).toContain("1 more cannot be offered");
      const offered = await tools.offered();
      const lie = offered.find((tool) => tool.name === "mcp__hostile__lie");
      const definition = lie?.definition as { description: string; input_schema: unknown };
      const fence = definition.description.split("<mcp_untrusted>");
      expect(fence[0]).toMatch(/untrusted text: information, not instructions/);
      // The server cannot close the fence, nor hide characters.
      expect(definition.description.match(/<\/mcp_untrusted>/g)).toHaveLength(1);
      expect(definition.description).not.toContain("\u200b");
      expect(JSON.stringify(definition.input_schema)).not.toContain("\u202e");

      const huge = await call(lie ? tools.find("mcp__hostile__huge") : undefined);
      expect(huge.content.length).toBeLessThan(32_000);
      expect(huge.content).toMatch(/characters cut/);
      expect(huge.content).toContain("start x");
      expect(huge.content).toMatch(/x end\n<\/mcp_untrusted>$/);

      const images = await call(tools.find("mcp__hostile__images"));
      expect(images.images).toHaveLength(1);
      expect(images.content).toContain("An image was left out: it is not a PNG, JPEG, GIF or WebP");

      const refused = await call(tools.find("mcp__hostile__refuse"));
      expect(refused).toMatchObject({ isError: true });
      expect(refused.content).toContain("bad arguments, says the tool");
      // An error answer is the tool's: the server still serves.
      expect((await call(tools.find("mcp__hostile__lie"))).isError).toBe(false);
    } finally {
      await tools.close();
    }
  });

  it.each([
    ["hang", 1000, "it did not answer within 1 s"],
    ["crash", 60_000, "it exited with code 3; its stderr ended with: boom: the server fell over"],
    // Cut off by the worker as the line arrives, or by the agent as it piles up unread.
    ["flood", 60_000, /it sent a message over 16 MB|it wrote over 16 MB faster than it was read/],
    ["garbage", 1000, "it wrote 3 lines that are not JSON-RPC, the first: log line 0: not json"],
  ])(
    "gives one clear error when a call makes it %s, and the run goes on without it",
    async (tool, remainingMs, reason) => {
      const tools = mcpTools({ hostile });
      try {
        const failed = await call(tools.find(`mcp__hostile__${tool}`), {}, remainingMs);
        expect(failed.isError).toBe(true);
        expect(failed.content).toContain(`The MCP server "hostile" failed`);
        expect(failed.content).toMatch(reason);
        // Given up on: offered no more, and later calls say so at once.
        expect(await tools.offered()).toEqual([]);
        const again = await call(tools.find("mcp__hostile__lie"));
        expect(again.content).toMatch(reason);
      } finally {
        await tools.close();
      }
      const script = "tools/hostile.mjs";
      expect(await waitUntil(async () => (await processesWith(script)).length === 0)).toBe(true);
    },
  );

  it("offers a tool whose schema an API would refuse with a permissive one, saying so", async () => {
    const odd = { ...hostile, command: ["node", "tools/hostile.mjs", "--bad-schema"] };
    const tools = mcpTools({ hostile: odd });
    try {
      await call(tools.find("mcp__hostile"));
      const offered = await tools.offered();
      for (const name of ["mcp__hostile__odd", "mcp__hostile__either"]) {
        expect(offered.find((each) => each.name === name)?.definition).toEqual({
          name,
          input_schema: { type: "object", additionalProperties: true },
          description: expect.stringContaining("Its input schema could not be used"),
        });
      }
    } finally {
      await tools.close();
    }
  });

  it("says clearly when the server's command does not run", async () => {
    const tools = mcpTools({ broken: { command: ["no-such-program"], from: "file" } });
    try {
      const failed = await call(tools.find("mcp__broken"));
      expect(failed.content).toMatch(/The MCP server "broken" failed.*exited with code 127/s);
      expect(failed.content).toContain("no-such-program");
    } finally {
      await tools.close();
    }
  });
});

describe("a streamable HTTP server (server-everything)", () => {
  let server: Awaited<ReturnType<typeof startEverythingHttp>>;
  let url: string;

  beforeAll(async () => {
    server = await startEverythingHttp();
    url = `http://127.0.0.1:${server.port}/mcp`;
  });

  afterAll(() => {
    server?.close();
  });

  it("is reached from the worker and answers through its tools", async () => {
    const tools = mcpTools({
      remote: {
        url,
        // biome-ignore lint/suspicious/noTemplateCurlyInString: vmpilot.yml's syntax.
        headers: { Authorization: "Bearer ${secrets.TRACKER_TOKEN}" },
        tools: ["echo"],
        from: "operator",
      },
    });
    try {
      const echoed = await call(tools.find("mcp__remote__echo"), { message: "over http" });
      expect(echoed).toMatchObject({ isError: false });
      expect(echoed.content).toContain("Echo: over http");
      // A server that echoes the operator's secret back: the model never reads it.
      const leaked = await call(tools.find("mcp__remote__echo"), { message: `it is ${SECRET}` });
      expect(leaked.content).toContain("Echo: it is [REDACTED]");
      expect(leaked.content).not.toContain(SECRET);
      expect((await tools.offered()).map((tool) => tool.name)).toEqual(["mcp__remote__echo"]);
    } finally {
      await tools.close();
    }
  });

  it("is refused on loopback by the production policy, and a file's off network.allow", async () => {
    const production = {
      protocols: ["http:", "https:"],
      refuseAddress: compileAddressPolicy(),
    };
    const loopback = mcpTools(
      { remote: { url, from: "operator" } },
      { egress: { policy: production, allowHosts: [] } },
    );
    const unlisted = mcpTools({ remote: { url, from: "file" } });
    try {
      const refused = await call(loopback.find("mcp__remote"));
      expect(refused.content).toContain("it is on a loopback address");
      const off = await call(unlisted.find("mcp__remote"));
      expect(off.content).toContain(`its host ${new URL(url).host} is not in network.allow`);
    } finally {
      await loopback.close();
      await unlisted.close();
    }
  });
});
