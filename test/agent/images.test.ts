// Images in the conversation: OpenAI-compatible models marked vision-capable get them as image
// parts, the others a line saying one was left out; the prompt estimate counts an image by what
// the APIs bill for it, not by the length of its base64 text.
import type Anthropic from "@anthropic-ai/sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { estimateTokens } from "../../src/agent/compaction.ts";
import { runAgent } from "../../src/agent/loop.ts";
import { IMAGE_LEFT_OUT } from "../../src/agent/providers/openai-messages.ts";
import { loadProviders } from "../../src/config/providers.ts";
import { text } from "../helpers/anthropic-fake.ts";
import { PNG } from "../helpers/asset-server.ts";
import { type OpenAiFake, startOpenAiFake } from "../helpers/openai-fake.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let repo: TestRepo;
let fake: OpenAiFake;

beforeEach(async () => {
  repo = await makeRepo({ "README.md": "# Demo\n" });
  fake = await startOpenAiFake();
});

afterEach(async () => {
  expect(fake.pending(), "scripted replies left over").toBe(0);
  await fake.close();
  await repo.cleanup();
});

const instruction: Anthropic.ContentBlockParam[] = [
  { type: "text", text: "What does the screenshot show?" },
  {
    type: "image",
    source: { type: "base64", media_type: "image/png", data: PNG.toString("base64") },
  },
];

async function userMessage(vision: boolean | undefined) {
  fake.push({ content: [text("A dialog.")] });
  const result = await runAgent({
    workspace: repo.workspace,
    system: "You are a test agent.",
    model: "gpu/some-model",
    instruction,
    providers: new Map([
      ["gpu", { name: "gpu", baseUrl: fake.url, prices: {}, stream: true, vision }],
    ]),
    compatible: { maxRetries: 0 },
  });
  expect(result.reason).toBe("end_turn");
  return fake.requests[0]?.body.messages[1];
}

describe("images on an OpenAI-compatible server", () => {
  it("go as image_url parts (data: URLs) to a model marked vision-capable", async () => {
    expect(await userMessage(true)).toEqual({
      role: "user",
      content: [
        { type: "text", text: "What does the screenshot show?" },
        {
          type: "image_url",
          image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` },
        },
      ],
    });
  });

  it("become a line saying an image was left out for any other model", async () => {
    expect(await userMessage(undefined)).toEqual({
      role: "user",
      content: `What does the screenshot show?\n${IMAGE_LEFT_OUT}`,
    });
  });
});

describe("images in the prompt estimate and the provider table", () => {
  it("counts an image at a flat 1,600 tokens, whatever its size in base64", () => {
    const data = Buffer.alloc(3 * 1024 * 1024).toString("base64");
    const message = {
      role: "user",
      content: [{ type: "image", source: { type: "base64", media_type: "image/png", data } }],
    };
    // The block stands as `null` in the measured JSON: a token or two of its own.
    const withoutImage = estimateTokens({ role: "user", content: [] });
    const image = estimateTokens(message) - withoutImage;
    expect([image >= 1_600, image <= 1_602]).toEqual([true, true]);
    const part = { type: "image_url", image_url: { url: `data:image/png;base64,${data}` } };
    const two = estimateTokens([part, part]);
    expect([two >= 3_200, two <= 3_204]).toEqual([true, true]);
  });

  it("marks OpenAI's models vision-capable, OpenRouter's and Ollama's not, unless VMPILOT_PROVIDERS says so", () => {
    const loaded = loadProviders({
      OPENAI_API_KEY: "sk-test",
      OPENROUTER_API_KEY: "or-test",
      OLLAMA_BASE_URL: "http://gpu-box:11434/v1",
      VMPILOT_PROVIDERS: JSON.stringify({
        vllm: { baseUrl: "http://vllm:8000/v1", vision: true },
        plain: { baseUrl: "http://plain:8000/v1" },
      }),
    });
    if (!("providers" in loaded)) throw new Error(loaded.problems.join("; "));
    const vision = Object.fromEntries(
      [...loaded.providers].map(([name, p]) => [name, p.vision ?? false]),
    );
    expect(vision).toEqual({
      openai: true,
      openrouter: false,
      ollama: false,
      vllm: true,
      plain: false,
    });
  });
});
