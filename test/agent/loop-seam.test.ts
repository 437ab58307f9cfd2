// The loop's own behaviour at the provider seam, with no wire format involved: tool answers,
// limits, cancellation, compaction, and what a provider reports (unreadable tool calls, a prompt
// too long). Each provider's wire format is tested on its own (loop.test.ts, openai-provider.test.ts).
import { watch } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CLEARED_PLACEHOLDER } from "../../src/agent/compaction.ts";
import type { AgentEvent } from "../../src/agent/events.ts";
import { type RunAgentOptions, runAgent } from "../../src/agent/loop.ts";
import { discoverPlugins, selectPlugins } from "../../src/agent/plugins.ts";
import { ContextTooLongError } from "../../src/agent/providers/types.ts";
import { changedSince, headOf } from "../../src/workspace/git/commit.ts";
import {
  call,
  type ScriptedProvider,
  type ScriptedStep,
  say,
  scriptedProvider,
} from "../helpers/scripted-provider.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let repo: TestRepo;
let model: ScriptedProvider;
let events: AgentEvent[];

beforeEach(async () => {
  repo = await makeRepo({ "README.md": "# Demo\n" });
  events = [];
});

afterEach(async () => {
  expect(model.pending(), "scripted replies left over").toBe(0);
  await repo.cleanup();
});

function options(extra: Partial<RunAgentOptions> = {}): RunAgentOptions {
  return {
    workspace: repo.workspace,
    system: "You are a test agent.",
    // Prices only: the scripted provider answers.
    model: "claude-sonnet-4-6",
    provider: model,
    instruction: "Do the task.",
    onEvent: (e) => events.push(e),
    ...extra,
  };
}

function script(...steps: ScriptedStep[]) {
  model = scriptedProvider(...steps);
}

/** Usage with no caching, so prompt sizes are exactly what the test says. */
function prompt(tokens: number, output = 10) {
  return {
    inputTokens: tokens,
    outputTokens: output,
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: 0,
  };
}

describe("the loop at the provider seam", () => {
  it("stops at the step limit with every tool call answered", async () => {
    script(
      { content: [call("bash", { command: "echo 1" })] },
      { content: [call("bash", { command: "echo 2" })] },
    );
    const result = await runAgent(options({ limits: { maxSteps: 2 } }));
    expect(result.reason).toBe("max_steps");
    expect(result.detail).toBe("Stopped after 2 steps (limit 2).");
    expect(result.messages.at(-1)).toMatchObject({
      role: "user",
      content: [{ type: "tool_result", content: "2" }],
    });
    expect(events.at(-1)).toMatchObject({ type: "finished", reason: "max_steps", steps: 2 });
  });

  it("stops at the cost limit", async () => {
    script({ content: [call("bash", { command: "true" })], usage: prompt(10, 10_000) });
    const result = await runAgent(options({ limits: { maxCostUsd: 0.1 } }));
    expect(result.reason).toBe("max_cost");
    expect(result.usage.costUsd).toBeCloseTo((10 * 3 + 10_000 * 15) / 1e6, 10);
    expect(result.detail).toContain("over the $0.10 limit");
  });

  it("cuts a command at the wall-time limit and stops", async () => {
    script({ content: [call("bash", { command: "sleep 20" })] });
    const result = await runAgent(options({ limits: { maxWallTimeMs: 400 } }));
    expect(result.reason).toBe("max_wall_time");
    const toolResult = events.find((e) => e.type === "tool_result");
    expect(toolResult).toMatchObject({ isError: true });
    expect(toolResult?.type === "tool_result" && toolResult.output).toMatch(/timed out|Not run/);
  });

  it("is cancelled through its signal, killing the running command", async () => {
    script({ content: [call("bash", { command: "touch started && sleep 20" })] });
    const controller = new AbortController();
    const result = await runAgent(
      options({
        signal: controller.signal,
        onEvent: (e) => {
          events.push(e);
          if (e.type !== "tool_call") return;
          // Abort once the command is really running: when it creates its marker file.
          const watcher = watch(repo.root, (_, name) => {
            if (name !== "started") return;
            watcher.close();
            controller.abort();
          });
        },
      }),
    );
    expect(result.reason).toBe("cancelled");
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({
      isError: true,
      output: "Command was killed.",
    });
    expect(events.at(-1)).toMatchObject({ type: "finished", reason: "cancelled" });
  });

  it("answers the calls a provider could not read with its error, and runs the others", async () => {
    const broken = call("bash", {});
    script(
      {
        content: [broken, call("bash", { command: "echo fine" })],
        invalidToolInput: {
          [broken.type === "tool_use" ? broken.id : ""]: "Those arguments were not JSON.",
        },
      },
      { content: [say("ok")] },
    );
    const result = await runAgent(options());
    expect(result.reason).toBe("end_turn");
    expect(model.calls[1]?.messages.at(-1)).toMatchObject({
      content: [
        { type: "tool_result", content: "Those arguments were not JSON.", is_error: true },
        { type: "tool_result", content: "fine" },
      ],
    });
  });

  it("compacts and asks again once when the provider says the prompt is too long, then fails", async () => {
    const tooLong = new ContextTooLongError("the prompt is too long");
    const earlier = [
      { role: "user" as const, content: "Read it." },
      {
        role: "assistant" as const,
        content: [{ type: "tool_use" as const, id: "t1", name: "bash", input: {} }],
      },
      {
        role: "user" as const,
        content: [{ type: "tool_result" as const, tool_use_id: "t1", content: "x".repeat(4000) }],
      },
    ];
    const compacting = () => options({ messages: earlier, compaction: { keepToolResults: 0 } });
    script(tooLong, { content: [say("Fits now.")] });
    expect((await runAgent(compacting())).finalText).toBe("Fits now.");
    expect(JSON.stringify(model.calls[1]?.messages)).toContain(CLEARED_PLACEHOLDER);

    script(tooLong, tooLong);
    const failed = await runAgent(compacting());
    expect(failed.error).toEqual({
      code: "context_overflow",
      message:
        "The conversation does not fit the model's context window, even compacted: the prompt is too long",
    });
  });
});

describe("compaction", () => {
  const big = "head -c 40000 /dev/zero | tr '\\0' x";

  it("clears old tool results to a placeholder when the context nears the window", async () => {
    script(
      { content: [call("bash", { command: big })], usage: prompt(1000) },
      { content: [call("bash", { command: big })], usage: prompt(9000) },
      { content: [call("bash", { command: "echo small" })], usage: prompt(27_000) },
      { content: [say("done")] },
    );
    const result = await runAgent(
      options({
        maxTokens: 1000,
        compaction: { contextWindow: 50_000, threshold: 0.5, keepToolResults: 1 },
      }),
    );
    const results = (model.calls[3]?.messages ?? [])
      .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .flatMap((b) => (b.type === "tool_result" ? [b.content] : []));
    expect(results).toEqual([CLEARED_PLACEHOLDER, CLEARED_PLACEHOLDER, "small"]);
    const compacted = events.find((e) => e.type === "compacted");
    expect(compacted).toMatchObject({ clearedToolResults: 2, summarizedMessages: 0 });
    if (compacted?.type !== "compacted") throw new Error("no compacted event");
    expect(compacted.tokensAfter).toBeLessThan(25_000);
    expect(compacted.tokensBefore).toBeGreaterThan(27_000);
    expect(result.messages).toEqual(
      compacted.messages.concat(result.messages.slice(compacted.messages.length)),
    );
  });

  it("summarises old turns when clearing is not enough, with tools offered but not callable", async () => {
    script(
      { content: [call("bash", { command: "echo one" })], usage: prompt(1000) },
      { content: [call("bash", { command: "echo two" })], usage: prompt(2000) },
      { content: [call("bash", { command: "echo three" })], usage: prompt(45_000) },
      (request) => {
        expect(request.noTools).toBe(true);
        // The same tools as every request, so the prompt prefix stays the same.
        expect(request.tools).toEqual(["bash", "str_replace_based_edit_tool"]);
        expect(JSON.stringify(request.messages.at(-1))).toContain("summary");
        return { content: [say("Ran one, two and three.")], usage: prompt(45_000, 20) };
      },
      (request) => {
        expect(request.noTools).toBe(false);
        return { content: [say("done")] };
      },
    );
    const result = await runAgent(
      options({
        maxTokens: 1000,
        compaction: { contextWindow: 50_000, threshold: 0.5, keepToolResults: 1, keepMessages: 2 },
      }),
    );
    expect(result.reason).toBe("end_turn");
    const sent = model.calls[4]?.messages ?? [];
    expect(JSON.stringify(sent[0])).toContain("Ran one, two and three.");
    expect(sent[1]?.role).toBe("assistant");
    expect(sent.length).toBeLessThan((model.calls[2]?.messages.length ?? 0) + 1);
    expect(events.find((e) => e.type === "compacted")).toMatchObject({ summarizedMessages: 5 });
    // The summary request is paid for like any other.
    expect(events.filter((e) => e.type === "usage")).toHaveLength(5);
  });
});

describe("finish checks", () => {
  /** The testing plugin, and the workspace's changes since the run began as the loop asks them. */
  async function checked() {
    const start = await headOf(repo.workspace);
    const asked: boolean[] = [];
    const changed = async () => {
      const answer = await changedSince(repo.workspace, start);
      asked.push(answer);
      return answer;
    };
    const plugins = selectPlugins(await discoverPlugins(), ["testing"]);
    return { asked, options: options({ plugins, changed }) };
  }

  const notRunReport = call("report_tests", { outcome: "not_run", explanation: "No tests." });

  it("does not ask a run that changed nothing for tests: one call, its answer the final text", async () => {
    script({ content: [say("The README is a title and nothing else.")] });
    const { asked, options } = await checked();
    const result = await runAgent(options);
    expect(result).toMatchObject({ reason: "end_turn", reports: {} });
    expect(result.detail).toBeUndefined();
    expect(model.calls).toHaveLength(1);
    expect(result.finalText).toBe("The README is a title and nothing else.");
    expect(asked).toEqual([false]);
  });

  it("asks a run that committed a change itself for tests, as before", async () => {
    const commit =
      "echo x > new.txt && git add -A && git -c user.name=a -c user.email=a@example.com commit -qm x";
    script(
      { content: [call("bash", { command: commit })] },
      { content: [say("Committed new.txt.")] },
      (request) => {
        expect(JSON.stringify(request.messages.at(-1))).toContain("call report_tests");
        return { content: [notRunReport] };
      },
      { content: [say("Committed new.txt.")] },
    );
    const { asked, options } = await checked();
    const result = await runAgent(options);
    expect(result.detail).toBeUndefined();
    expect(result.reports.tests).toMatchObject({ outcome: "not_run" });
    expect(asked).toEqual([true, true]);
    expect(result.finalText).toBe("Committed new.txt.");
  });

  it("keeps the answer the model gave before it was sent back for tests", async () => {
    script(
      { content: [call("bash", { command: "echo draft > notes.txt" })] },
      { content: [say("The project has one README; notes.txt holds a draft.")] },
      { content: [say("Reporting."), notRunReport] },
      { content: [say("Reported: there are no tests.")] },
    );
    const { asked, options } = await checked();
    const result = await runAgent(options);
    const answer =
      "The project has one README; notes.txt holds a draft.\n\nReported: there are no tests.";
    expect(result.finalText).toBe(answer);
    expect(events.at(-1)).toMatchObject({ type: "finished", finalText: answer });
    expect(asked).toEqual([true, true]);
  });
});
