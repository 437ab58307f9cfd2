// The agent's spans as an OTLP collector receives them (the SDK started as a server starts it):
// a tool call's command by its length and exit code only, unless the operator asks for its text
// and output, which are redacted then.
import { afterAll, beforeAll, expect, it } from "vitest";
import { runAgent } from "../../src/agent/loop.ts";
import { silentLogger } from "../../src/log/logger.ts";
import { traceToolContent } from "../../src/log/trace.ts";
import { startTracing } from "../../src/roles/tracing.ts";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  startOtlpReceiver,
} from "../helpers/otlp-receiver.ts";
import { say, scriptedProvider } from "../helpers/scripted-provider.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

// A token gitleaks' rules know: redacted wherever it turns up.
const TOKEN = `ghp_${"A1b2C3d4E5".repeat(3)}abcdef`;
const COMMAND = `echo ${TOKEN}; exit 3`;

let receiver: OtlpReceiver;
let stop: (() => Promise<void>) | undefined;
let repo: TestRepo;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  repo = await makeRepo({ "README.md": "# Demo\n" });
  const tracing = { url: `${receiver.url}/v1/traces`, headers: {}, serviceName: "vmpilot" };
  stop = startTracing({ ...tracing, toolContent: false }, "worker", silentLogger);
});

afterAll(async () => {
  await stop?.();
  traceToolContent(false);
  await repo?.cleanup();
  await receiver?.close();
});

async function runBash(callId: string): Promise<void> {
  const model = scriptedProvider(
    { content: [{ type: "tool_use", id: callId, name: "bash", input: { command: COMMAND } }] },
    { content: [say("Done.")] },
  );
  const result = await runAgent({
    workspace: repo.workspace,
    system: "You are a test agent.",
    model: "claude-sonnet-4-6",
    instruction: "Run it.",
    provider: model,
  });
  expect(result.reason).toBe("end_turn");
}

const toolSpan = (callId: string) =>
  receiver.spans.find((span) => span.attributes["gen_ai.tool.call.id"] === callId) as ReceivedSpan;

it("a tool call's span has its command's length and exit code; its text and output only when asked for, redacted", async () => {
  await runBash("toolu_plain");
  traceToolContent(true);
  await runBash("toolu_content");
  await stop?.();
  stop = undefined;

  expect(receiver.problems).toEqual([]);
  const plain = toolSpan("toolu_plain");
  expect(plain).toMatchObject({
    name: "execute_tool bash",
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "bash",
      "vmpilot.tool.command.length": COMMAND.length,
      "process.exit.code": 3,
      "error.type": "tool_error",
    },
  });
  expect(plain.attributes["gen_ai.tool.call.arguments"]).toBeUndefined();
  expect(plain.attributes["gen_ai.tool.call.result"]).toBeUndefined();

  const content = toolSpan("toolu_content");
  expect(content.attributes).toMatchObject({
    "vmpilot.tool.command.length": COMMAND.length,
    "process.exit.code": 3,
    "gen_ai.tool.call.arguments": JSON.stringify({ command: "echo [REDACTED]; exit 3" }),
  });
  expect(content.attributes["gen_ai.tool.call.result"]).toBe("[REDACTED]\nExit code: 3");

  // The model requests beside them, with the scripted usage and what it cost.
  const requests = receiver.spans.filter((span) => span.name === "chat claude-sonnet-4-6");
  expect(requests).toHaveLength(4);
  for (const span of requests) {
    expect(span.attributes).toMatchObject({
      "gen_ai.provider.name": "anthropic",
      "gen_ai.usage.input_tokens": 100,
      "gen_ai.usage.output_tokens": 10,
    });
    expect(span.attributes["vmpilot.cost_usd"]).toBeGreaterThan(0);
  }
  expect(receiver.bodies.join("\n")).not.toContain(TOKEN);
});
