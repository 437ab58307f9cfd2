// The loop on an OpenAI-compatible server, against the fake at its HTTP edge: the wire format,
// the servers' differences, errors, compaction, and conversations moving between providers.
import type Anthropic from "@anthropic-ai/sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/agent/events.ts";
import { type RunAgentOptions, runAgent } from "../../src/agent/loop.ts";
import type { OpenAiCompatible } from "../../src/config/providers.ts";
import {
  type AnthropicFake,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { type OpenAiFake, startOpenAiFake } from "../helpers/openai-fake.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let repo: TestRepo;
let fake: OpenAiFake;
let events: AgentEvent[];

beforeEach(async () => {
  repo = await makeRepo({ "README.md": "# Demo\n", "src/a.txt": "alpha\n" });
  fake = await startOpenAiFake();
  events = [];
});

afterEach(async () => {
  expect(fake.pending(), "scripted replies left over").toBe(0);
  await fake.close();
  await repo.cleanup();
});

function provider(extra: Partial<OpenAiCompatible> = {}): OpenAiCompatible {
  return {
    name: "gpu",
    baseUrl: fake.url,
    prices: { "qwen3-coder:30b": { input: 1, output: 2, cachedInput: 0.5 } },
    stream: true,
    ...extra,
  };
}

function options(extra: Partial<RunAgentOptions> = {}, settings = provider()): RunAgentOptions {
  return {
    workspace: repo.workspace,
    system: "You are a test agent.",
    model: "gpu/qwen3-coder:30b",
    instruction: "Do the task.",
    providers: new Map([["gpu", settings]]),
    compatible: { maxRetries: 1 },
    onEvent: (e) => events.push(e),
    ...extra,
  };
}

// biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
function messagesOf(request: number): any[] {
  return fake.requests[request]?.body.messages;
}

describe("the openai provider", () => {
  it("runs tools from streamed calls, in order, answers each, and prices usage with cached tokens", async () => {
    fake.push(
      {
        content: [
          text("Looking first."),
          toolUse("bash", { command: "cat src/a.txt" }),
          toolUse("str_replace_based_edit_tool", {
            command: "str_replace",
            path: "src/a.txt",
            old_str: "alpha",
            new_str: "beta",
          }),
        ],
        reasoning: "SECRET-CHAIN-OF-THOUGHT",
        usage: { input_tokens: 2000, output_tokens: 100, cache_read_input_tokens: 1024 },
      },
      { content: [text("Done: alpha is beta now.")], reasoning: "more private thinking" },
    );
    const result = await runAgent(options());
    expect(result.reason).toBe("end_turn");
    expect(fake.problems).toEqual([]);
    expect(await repo.git("diff", "--stat")).toContain("src/a.txt");

    const first = fake.requests[0]?.body;
    expect(first.stream).toBe(true);
    expect(first.stream_options).toEqual({ include_usage: true });
    expect(first.max_tokens).toBe(16_000);
    expect(first.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual([
      "bash",
      "str_replace_based_edit_tool",
    ]);
    expect(first.tools[1].function.parameters.required).toEqual(["command", "path"]);
    expect(messagesOf(0)[0]).toEqual({ role: "system", content: "You are a test agent." });

    // Both calls went back as tool messages right after the assistant's, in order.
    const second = messagesOf(1);
    const calls = second[2].tool_calls;
    expect(second[2]).toMatchObject({ role: "assistant", content: "Looking first." });
    expect(calls).toHaveLength(2);
    expect(second[3]).toEqual({ role: "tool", tool_call_id: calls[0].id, content: "alpha" });
    expect(second[4]).toMatchObject({ role: "tool", tool_call_id: calls[1].id });
    expect(second[4].content).toContain("src/a.txt");

    // Reasoning never reaches the text a PR body is made of.
    expect(result.finalText).toBe("Done: alpha is beta now.");
    expect(JSON.stringify(result.messages)).not.toContain("SECRET-CHAIN-OF-THOUGHT");
    // 976 uncached at $1, 1024 cached at $0.50, 100 out at $2 per million.
    const firstUsage = events.find((e) => e.type === "usage");
    expect(firstUsage).toMatchObject({
      request: { inputTokens: 976, cacheReadInputTokens: 1024, outputTokens: 100 },
      priceKnown: true,
    });
    expect(firstUsage?.type === "usage" && firstUsage.request.costUsd).toBeCloseTo(
      (976 * 1 + 1024 * 0.5 + 100 * 2) / 1e6,
      12,
    );
  });

  it("answers tool calls whose arguments are not JSON with an error, and goes on", async () => {
    fake.push(
      {
        content: [toolUse("bash", { command: "true" }), toolUse("bash", { command: "echo ok" })],
        rawArguments: { 0: '{"command": "ls"' },
      },
      { content: [text("Recovered.")] },
    );
    const result = await runAgent(options());
    expect(result.reason).toBe("end_turn");
    const answers = messagesOf(1).filter((m) => m.role === "tool");
    expect(answers[0].content).toMatch(
      /^Error: The arguments of this bash call were not a valid JSON object \(.+\), so it was not run/,
    );
    expect(answers[1].content).toBe("ok");
  });

  it("estimates usage when the server sends none, so cost limits still apply", async () => {
    fake.push({ content: [text("No usage from me.")], noUsage: true });
    const result = await runAgent(options());
    expect(result.reason).toBe("end_turn");
    expect(result.usage.inputTokens).toBeGreaterThan(100);
    expect(result.usage.outputTokens).toBeGreaterThan(0);
    expect(result.usage.costUsd).toBeGreaterThan(0);
  });

  it("works with a server that cannot stream (stream: false)", async () => {
    fake.push(
      { content: [toolUse("bash", { command: "echo whole" })] },
      { content: [text("Whole replies work.")] },
    );
    const result = await runAgent(options({}, provider({ stream: false })));
    expect(result.finalText).toBe("Whole replies work.");
    expect(fake.requests[0]?.body.stream).toBe(false);
    expect(messagesOf(1).at(-1)).toMatchObject({ role: "tool", content: "whole" });
  });

  it("sends reasoning_effort when the provider sets it, and prices an unknown model as unknown", async () => {
    fake.push({ content: [text("ok")] });
    const result = await runAgent(
      options({ model: "gpu/mystery-model" }, provider({ reasoningEffort: "high" })),
    );
    expect(fake.requests[0]?.body.reasoning_effort).toBe("high");
    expect(result.priceKnown).toBe(false);
    expect(result.usage.costUsd).toBeGreaterThan(0);
  });

  it.each([
    [
      "a model without tool support",
      {
        status: 400,
        error: {
          type: "api_error",
          message: "registry.ollama.ai/library/gemma3:1b does not support tools",
        },
      },
      "model_without_tools",
      /^The model qwen3-coder:30b at the OpenAI-compatible API "gpu" \(http:\/\/127\.0\.0\.1:\d+\/v1\) does not support tool calls, which vmpilot needs/,
    ],
    [
      "a bad key",
      {
        status: 401,
        error: { type: "invalid_request_error", message: "Incorrect API key provided" },
      },
      "api_auth",
      /refused the credentials \(401\): Incorrect API key provided\. Check its apiKey\.$/,
    ],
    [
      "an unknown model",
      {
        status: 404,
        error: { type: "invalid_request_error", message: "model 'qwen3-coder:30b' not found" },
      },
      "api_request",
      /has no model qwen3-coder:30b \(404\): model 'qwen3-coder:30b' not found$/,
    ],
  ])("fails at once, clearly, on %s", async (_name, reply, code, message) => {
    fake.push(reply);
    const result = await runAgent(options());
    expect(result.reason).toBe("error");
    expect(result.error?.code).toBe(code);
    expect(result.error?.message).toMatch(message);
    expect(fake.requests).toHaveLength(1);
  });

  it("retries 429 and 5xx as the server's Retry-After says, then fails with the status", async () => {
    const limited = {
      status: 429,
      error: { type: "rate_limit", message: "slow down" },
      headers: { "retry-after": "0.001" },
    };
    fake.push(limited, { content: [text("after the wait")] });
    expect((await runAgent(options())).finalText).toBe("after the wait");
    expect(fake.requests).toHaveLength(2);

    const down = {
      status: 503,
      error: { type: "server_error", message: "overloaded" },
      headers: { "retry-after": "0.001" },
    };
    fake.push(down, down);
    const failed = await runAgent(options());
    expect(failed.error).toEqual({
      code: "api_server_error",
      message: expect.stringMatching(/server error \(503\) after 1 retry: overloaded$/),
    });
  });

  it("compacts and asks again once when the prompt is too long, then fails clearly", async () => {
    const tooLong = {
      status: 400,
      code: "context_length_exceeded",
      error: {
        type: "invalid_request_error",
        message: "This model's maximum context length is 8192 tokens.",
      },
    };
    const earlier: Anthropic.MessageParam[] = [
      { role: "user", content: "Read it." },
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "t1", name: "bash", input: { command: "cat big" } }],
      },
      {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "t1", content: "x".repeat(4000) }],
      },
    ];
    fake.push(tooLong, { content: [text("Fits now.")] });
    const compacting = options({ messages: earlier, compaction: { keepToolResults: 0 } });
    const result = await runAgent(compacting);
    expect(result.finalText).toBe("Fits now.");
    expect(events.some((e) => e.type === "compacted")).toBe(true);
    expect(JSON.stringify(messagesOf(1))).not.toContain("x".repeat(4000));

    fake.push(tooLong, tooLong);
    const failed = await runAgent(compacting);
    expect(failed.error?.code).toBe("context_overflow");
    expect(failed.error?.message).toMatch(
      /does not fit the model's context window, even compacted/,
    );
  });

  it("refuses a model whose provider is not configured, naming the configured ones", async () => {
    const result = await runAgent(options({ model: "ollama/qwen3-coder:30b" }));
    expect(result.error).toEqual({
      code: "model_unavailable",
      message: expect.stringContaining(
        'the model ollama/qwen3-coder:30b is served by "ollama", which is not configured (configured: anthropic, gpu)',
      ),
    });
  });
});

describe("a conversation moving between providers", () => {
  let anthropic: AnthropicFake;
  beforeEach(async () => {
    anthropic = await startAnthropicFake();
  });
  afterEach(async () => {
    expect(anthropic.problems).toEqual([]);
    expect(anthropic.pending()).toBe(0);
    await anthropic.close();
  });
  const onAnthropic = (): Partial<RunAgentOptions> => ({
    model: "claude-sonnet-4-6",
    client: { apiKey: "test-key", baseURL: anthropic.url, maxRetries: 0 },
  });

  it("continues on the openai provider a conversation stored by the anthropic one, and back", async () => {
    anthropic.push(
      {
        content: [
          { type: "thinking", thinking: "hmm", signature: "sig" },
          toolUse("bash", { command: "cat README.md" }, "toolu_first"),
        ],
      },
      { content: [text("It is a demo.")] },
    );
    const first = await runAgent(options(onAnthropic()));
    expect(first.reason).toBe("end_turn");

    fake.push(
      { content: [toolUse("bash", { command: "echo second" })] },
      { content: [text("Second turn done.")] },
    );
    const second = await runAgent(
      options({ messages: first.messages, instruction: "Now on OpenAI." }),
    );
    expect(second.reason).toBe("end_turn");
    const sent = messagesOf(0);
    expect(sent[2]).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id: "toolu_first",
          type: "function",
          function: { name: "bash", arguments: '{"command":"cat README.md"}' },
        },
      ],
    });
    expect(sent[3]).toEqual({ role: "tool", tool_call_id: "toolu_first", content: "# Demo" });
    expect(sent.at(-1)).toEqual({ role: "user", content: "Now on OpenAI." });

    anthropic.push({ content: [text("Back on Anthropic.")] });
    const third = await runAgent(
      options({ ...onAnthropic(), messages: second.messages, instruction: "And back." }),
    );
    expect(third.finalText).toBe("Back on Anthropic.");
    const back = JSON.stringify(anthropic.requests.at(-1)?.body.messages);
    expect(back).toContain('"name":"bash","input":{"command":"echo second"}');
    expect(back).toContain('"content":"second"');
  });
});
