// A model provider scripted in memory, for the loop's tests that do not depend on any wire format:
// each call takes the next scripted reply and records the request as the loop made it.
import type {
  ModelProvider,
  ModelReply,
  ModelRequest,
  ReplyBlock,
} from "../../src/agent/providers/types.ts";

export interface RecordedCall {
  system: string;
  messages: ModelRequest["messages"];
  tools: string[];
  noTools: boolean;
}

export type ScriptedReply = Partial<ModelReply> & { content: ReplyBlock[] };
export type ScriptedStep = ScriptedReply | Error | ((call: RecordedCall) => ScriptedReply);

export interface ScriptedProvider extends ModelProvider {
  calls: RecordedCall[];
  push(...steps: ScriptedStep[]): void;
  pending(): number;
}

export function scriptedProvider(...script: ScriptedStep[]): ScriptedProvider {
  const queue = [...script];
  const calls: RecordedCall[] = [];
  return {
    label: "scripted model",
    maxRetries: 0,
    calls,
    push: (...steps) => queue.push(...steps),
    pending: () => queue.length,
    async call(request) {
      const call: RecordedCall = {
        system: request.system,
        // A copy: the loop's history goes on changing after the call.
        messages: structuredClone([...request.messages]),
        tools: request.tools.map((t) => t.name),
        noTools: request.noTools === true,
      };
      calls.push(call);
      const step = queue.shift();
      if (!step) throw new Error(`no scripted reply for call #${calls.length}`);
      if (step instanceof Error) throw step;
      const reply = typeof step === "function" ? step(call) : step;
      const calling = reply.content.some((b) => b.type === "tool_use");
      return {
        stopReason: calling ? "tool_use" : "end_turn",
        usage: {
          inputTokens: 100,
          outputTokens: 10,
          cacheCreationInputTokens: 0,
          cacheReadInputTokens: 0,
        },
        usageReported: true,
        ...reply,
      };
    },
    describeError: () => undefined,
  };
}

export function say(value: string): ReplyBlock {
  return { type: "text", text: value };
}

let ids = 0;
export function call(name: string, input: unknown): ReplyBlock {
  return { type: "tool_use", id: `call_${++ids}`, name, input };
}
