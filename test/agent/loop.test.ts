import { access } from "node:fs/promises";
import { join } from "node:path";
import type Anthropic from "@anthropic-ai/sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/agent/events.ts";
import { type RunAgentOptions, runAgent } from "../../src/agent/loop.ts";
import {
  type AnthropicFake,
  countBreakpoints,
  type FakeStep,
  overloaded,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let repo: TestRepo;
let fake: AnthropicFake;
let events: AgentEvent[];

beforeEach(async () => {
  repo = await makeRepo({ "README.md": "# Demo\n", "src/a.txt": "alpha\n" });
  events = [];
});

afterEach(async () => {
  await fake?.close();
  await repo.cleanup();
});

async function start(...script: FakeStep[]) {
  fake = await startAnthropicFake(script);
}

function options(extra: Partial<RunAgentOptions> = {}): RunAgentOptions {
  return {
    workspace: repo.workspace,
    system: "You are a test agent.",
    model: "claude-sonnet-4-6",
    instruction: "Do the task.",
    client: { apiKey: "test-key", baseURL: fake.url, maxRetries: 2 },
    streamRetryDelayMs: 1,
    onEvent: (e) => events.push(e),
    ...extra,
  };
}

/** Usage with no caching, so prompt sizes are exactly what the test says. */
function uncached(input: number, output?: number) {
  return {
    input_tokens: input,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    ...(output !== undefined && { output_tokens: output }),
  };
}

function lastMessage(request: number): Anthropic.MessageParam {
  return fake.requests[request]?.body.messages.at(-1);
}

function expectScriptUsed() {
  expect(fake.problems).toEqual([]);
  expect(fake.pending()).toBe(0);
}

describe("agent loop", () => {
  it("runs bash in the workspace and sends the real output back as the tool result", async () => {
    await start(
      {
        content: [
          text("Let me look."),
          toolUse("bash", { command: "echo hello && cat README.md" }, "toolu_1"),
        ],
      },
      { content: [text("All done. ✅ Ünïcödé survives chunking 🚀")] },
    );
    const result = await runAgent(options());

    expectScriptUsed();
    expect(result.reason).toBe("end_turn");
    expect(result.finalText).toBe("All done. ✅ Ünïcödé survives chunking 🚀");
    expect(lastMessage(1)).toEqual({
      role: "user",
      content: [
        {
          type: "tool_result",
          tool_use_id: "toolu_1",
          content: "hello\n# Demo",
          cache_control: { type: "ephemeral" },
        },
      ],
    });
    // The tool call streamed as input_json_delta chunks arrives whole.
    expect(fake.requests[1]?.body.messages[1].content[1]).toMatchObject({
      type: "tool_use",
      id: "toolu_1",
      name: "bash",
      input: { command: "echo hello && cat README.md" },
    });
    expect(events.map((e) => e.type)).toEqual([
      "step_started",
      "usage",
      "text",
      "tool_call",
      "tool_result",
      "step_started",
      "usage",
      "text",
      "finished",
    ]);
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({
      isError: false,
      output: "hello\n# Demo",
    });
  });

  it("honours ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY like the SDK when no client options are given", async () => {
    await start({ content: [text("ok")] });
    const saved = { url: process.env.ANTHROPIC_BASE_URL, key: process.env.ANTHROPIC_API_KEY };
    process.env.ANTHROPIC_BASE_URL = fake.url;
    process.env.ANTHROPIC_API_KEY = "key-from-env";
    try {
      const result = await runAgent(options({ client: undefined }));
      expect(result.reason).toBe("end_turn");
      expect(fake.requests[0]?.headers.authorization).toBe("Bearer key-from-env");
    } finally {
      for (const [name, value] of [
        ["ANTHROPIC_BASE_URL", saved.url],
        ["ANTHROPIC_API_KEY", saved.key],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it("offers the native tools with their exact types", async () => {
    await start({ content: [text("ok")] });
    await runAgent(options());
    const tools = fake.requests[0]?.body.tools;
    expect(tools.map((t: { type?: string; name: string }) => [t.type, t.name])).toEqual([
      ["bash_20250124", "bash"],
      ["text_editor_20250728", "str_replace_based_edit_tool"],
    ]);
    expect(tools[1].max_characters).toBe(30_000);
  });

  it("places cache breakpoints on tools, system and the latest turns, at most 4, without touching history", async () => {
    await start(
      { content: [toolUse("bash", { command: "true" })] },
      { content: [toolUse("bash", { command: "true" })] },
      { content: [toolUse("bash", { command: "true" })] },
      { content: [text("done")] },
    );
    const earlier: Anthropic.MessageParam[] = [
      // A marker left in stored history must not add up with the new ones.
      {
        role: "user",
        content: [{ type: "text", text: "old", cache_control: { type: "ephemeral" } }],
      },
      { role: "assistant", content: "old reply" },
    ];
    const snapshot = structuredClone(earlier);
    const result = await runAgent(options({ messages: earlier }));

    expectScriptUsed();
    for (const { body } of fake.requests) {
      expect(countBreakpoints(body)).toBeLessThanOrEqual(4);
      expect(body.tools.at(-1).cache_control).toEqual({ type: "ephemeral" });
      expect(body.tools.slice(0, -1).every((t: object) => !("cache_control" in t))).toBe(true);
      expect(body.system).toEqual([
        { type: "text", text: "You are a test agent.", cache_control: { type: "ephemeral" } },
      ]);
      const users = body.messages
        .map((m: Anthropic.MessageParam, i: number) => [m, i] as const)
        .filter(([m]: readonly [Anthropic.MessageParam]) => m.role === "user");
      const marked = body.messages.flatMap((m: { content: unknown }, i: number) =>
        Array.isArray(m.content) && m.content.some((b: object) => "cache_control" in b) ? [i] : [],
      );
      // The last block of the two latest user turns, nothing else.
      expect(marked).toEqual(users.slice(-2).map(([, i]: readonly [unknown, number]) => i));
      for (const i of marked)
        expect(body.messages[i].content.at(-1).cache_control).toEqual({ type: "ephemeral" });
    }
    expect(earlier).toEqual(snapshot);
    expect(JSON.stringify(result.messages.slice(2))).not.toContain("cache_control");
  });

  it("accumulates usage per step and prices it from the table", async () => {
    await start(
      {
        content: [toolUse("bash", { command: "true" })],
        usage: {
          input_tokens: 100,
          output_tokens: 50,
          cache_creation_input_tokens: 1000,
          cache_read_input_tokens: 0,
        },
      },
      {
        content: [text("done")],
        usage: {
          input_tokens: 20,
          output_tokens: 10,
          cache_creation_input_tokens: 200,
          cache_read_input_tokens: 1000,
        },
      },
    );
    const result = await runAgent(options());

    // Sonnet 4.6: $3 in, $15 out, $3.75 cache write, $0.30 cache read per MTok.
    const first = (100 * 3 + 50 * 15 + 1000 * 3.75) / 1e6;
    const second = (20 * 3 + 10 * 15 + 200 * 3.75 + 1000 * 0.3) / 1e6;
    expect(result.usage).toMatchObject({
      inputTokens: 120,
      outputTokens: 60,
      cacheCreationInputTokens: 1200,
      cacheReadInputTokens: 1000,
    });
    expect(result.usage.costUsd).toBeCloseTo(first + second, 10);
    expect(result.priceKnown).toBe(true);
    const usage = events.filter((e) => e.type === "usage");
    expect(usage.map((e) => e.request.costUsd)).toEqual([
      expect.closeTo(first, 10),
      expect.closeTo(second, 10),
    ]);
    expect(usage[1]?.totals.costUsd).toBeCloseTo(first + second, 10);
  });

  it("flags cost from fallback prices for a model missing from the table", async () => {
    await start({ content: [text("done")], usage: uncached(1000, 100) });
    const result = await runAgent(options({ model: "claude-unknown-9" }));
    expect(result.priceKnown).toBe(false);
    expect(events.find((e) => e.type === "usage")).toMatchObject({ priceKnown: false });
    expect(fake.requests[0]?.body.model).toBe("claude-unknown-9");
  });

  it("continues an earlier conversation: the first request carries it, and only new messages are reported", async () => {
    await start({ content: [text("Added the test.")] });
    const earlier: Anthropic.MessageParam[] = [
      { role: "user", content: "Fix the bug." },
      { role: "assistant", content: [{ type: "text", text: "Fixed it." }] },
    ];
    const seen: Anthropic.MessageParam[] = [];
    const result = await runAgent(
      options({
        messages: earlier,
        instruction: "Also add a test.",
        onMessage: (m) => void seen.push(m),
      }),
    );

    expect(fake.requests[0]?.body.messages.map((m: { role: string }) => m.role)).toEqual([
      "user",
      "assistant",
      "user",
    ]);
    // Both user turns are among the two latest, so both carry a breakpoint in the request.
    expect(fake.requests[0]?.body.messages[0].content).toEqual([
      { type: "text", text: "Fix the bug.", cache_control: { type: "ephemeral" } },
    ]);
    expect(fake.requests[0]?.body.messages[1].content).toEqual([
      { type: "text", text: "Fixed it." },
    ]);
    expect(fake.requests[0]?.body.messages[2].content).toEqual([
      { type: "text", text: "Also add a test.", cache_control: { type: "ephemeral" } },
    ]);
    expect(result.newMessages).toEqual([
      { role: "user", content: "Also add a test." },
      { role: "assistant", content: [{ type: "text", text: "Added the test." }] },
    ]);
    expect(seen).toEqual(result.newMessages);
    expect(result.messages).toEqual([...earlier, ...result.newMessages]);
  });

  it("awaits onMessage before going on, so each message can be stored first", async () => {
    await start({ content: [toolUse("bash", { command: "true" })] }, { content: [text("done")] });
    const order: string[] = [];
    await runAgent(
      options({
        onMessage: async (m) => {
          await new Promise<void>((resolve) => setImmediate(resolve));
          order.push(`stored ${m.role}`);
        },
        onEvent: (e) => {
          if (e.type === "step_started") order.push(`step ${e.step}`);
        },
      }),
    );
    expect(order).toEqual([
      "stored user",
      "step 1",
      "stored assistant",
      "stored user",
      "step 2",
      "stored assistant",
    ]);
  });

  it("sends pause_turn content straight back and continues", async () => {
    await start(
      { content: [text("Still searching...")], stopReason: "pause_turn" },
      { content: [text("Found it.")] },
    );
    const result = await runAgent(options());
    expectScriptUsed();
    expect(lastMessage(1)).toEqual({
      role: "assistant",
      content: [{ type: "text", text: "Still searching..." }],
    });
    expect(result.reason).toBe("end_turn");
    expect(result.finalText).toBe("Found it.");
  });

  it("asks the model to continue a reply cut off by max_tokens", async () => {
    await start(
      { content: [text("Part one")], stopReason: "max_tokens" },
      { content: [text("Part two")] },
    );
    const result = await runAgent(options({ maxTokens: 500 }));
    expectScriptUsed();
    expect(result.reason).toBe("end_turn");
    const continuation = lastMessage(1).content as Anthropic.TextBlockParam[];
    expect(continuation[0]?.text).toContain("cut off by max_tokens = 500");
  });

  it("does not run a tool call cut off by max_tokens and says why", async () => {
    await start(
      {
        content: [
          toolUse(
            "str_replace_based_edit_tool",
            { command: "create", path: "big.txt", file_text: "partial" },
            "toolu_cut",
          ),
        ],
        stopReason: "max_tokens",
      },
      { content: [text("Will write it in parts.")] },
    );
    const result = await runAgent(options());
    expectScriptUsed();
    expect(result.reason).toBe("end_turn");
    const [reply] = lastMessage(1).content as Anthropic.ToolResultBlockParam[];
    expect(reply).toMatchObject({ tool_use_id: "toolu_cut", is_error: true });
    expect(reply?.content).toContain("cut off");
    await expect(access(join(repo.root, "big.txt"))).rejects.toThrow();
  });

  it("fails clearly when replies keep getting cut off", async () => {
    await start(
      ...Array.from({ length: 4 }, () => ({ content: [text("...")], stopReason: "max_tokens" })),
    );
    const result = await runAgent(options());
    expect(result.reason).toBe("error");
    expect(result.error?.code).toBe("output_cut_off");
    expect(result.error?.message).toContain("raise maxTokens");
    expect(events.at(-1)).toMatchObject({ type: "failed", code: "output_cut_off" });
  });

  it("stops on refusal and does not keep the refused turn", async () => {
    await start({ content: [text("I can't help with that.")], stopReason: "refusal" });
    const result = await runAgent(options());
    expect(result.reason).toBe("refusal");
    expect(result.detail).toContain("declined");
    expect(result.newMessages).toEqual([{ role: "user", content: "Do the task." }]);
    expect(events.at(-1)).toMatchObject({ type: "finished", reason: "refusal" });
  });

  it("resumes a run that stopped on its own tool results by merging the user turns", async () => {
    await start(
      { content: [toolUse("bash", { command: "echo 1" }, "toolu_a")] },
      { content: [text("ok")] },
    );
    const first = await runAgent(options({ limits: { maxSteps: 1 } }));
    expect(first.reason).toBe("max_steps");
    await runAgent(options({ messages: first.messages, instruction: "Carry on." }));
    expectScriptUsed();
    const sent = fake.requests[1]?.body.messages;
    expect(sent.map((m: { role: string }) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(sent[2].content).toEqual([
      { type: "tool_result", tool_use_id: "toolu_a", content: "1" },
      { type: "text", text: "Carry on.", cache_control: { type: "ephemeral" } },
    ]);
  });

  it("lets the SDK retry 529 and surfaces a clear error when retries run out", async () => {
    await start(overloaded(), overloaded(), overloaded());
    const result = await runAgent(options());
    expectScriptUsed();
    expect(fake.requests).toHaveLength(3);
    expect(result.reason).toBe("error");
    expect(result.error).toEqual({
      code: "api_overloaded",
      message: "Anthropic API overloaded (529) after 2 retries: Overloaded",
    });
    expect(events.at(-1)).toMatchObject({ type: "failed", code: "api_overloaded" });
  });

  it("recovers when a retry succeeds", async () => {
    await start(overloaded(), { content: [text("done")] });
    const result = await runAgent(options());
    expectScriptUsed();
    expect(result.reason).toBe("end_turn");
  });

  it("retries a stream that fails midway", async () => {
    await start(
      {
        content: [text("partial")],
        streamError: { type: "overloaded_error", message: "Overloaded" },
      },
      { content: [text("done")] },
    );
    const result = await runAgent(options());
    expectScriptUsed();
    expect(result.reason).toBe("end_turn");
    expect(result.finalText).toBe("done");
  });

  it("reports a rejected request without retrying it", async () => {
    await start({
      status: 400,
      error: { type: "invalid_request_error", message: "max_tokens: too large" },
    });
    const result = await runAgent(options());
    expect(fake.requests).toHaveLength(1);
    expect(result.error).toEqual({
      code: "api_request",
      message: "Anthropic API rejected the request (400): max_tokens: too large",
    });
  });

  it("limits the tools to the allow-list and rejects names no plugin provides", async () => {
    await start(
      { content: [toolUse("str_replace_based_edit_tool", { command: "view", path: "README.md" })] },
      { content: [text("ok")] },
    );
    await runAgent(options({ tools: ["bash"] }));
    expect(fake.requests[0]?.body.tools.map((t: { name: string }) => t.name)).toEqual(["bash"]);
    expect(lastMessage(1).content).toEqual([
      expect.objectContaining({
        is_error: true,
        content: "Unknown tool str_replace_based_edit_tool.",
      }),
    ]);
    await expect(runAgent(options({ tools: ["deploy"] }))).rejects.toThrow(/deploy/);
  });
});
