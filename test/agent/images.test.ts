// Images in the conversation: OpenAI-compatible models marked vision-capable get them as image
// parts, the others a line saying one was left out; the prompt estimate counts an image by what
// the APIs bill for it, not by the length of its base64 text.
import type Anthropic from "@anthropic-ai/sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { estimateTokens } from "../../src/agent/compaction.ts";
import { runAgent } from "../../src/agent/loop.ts";
import { IMAGE_LEFT_OUT } from "../../src/agent/providers/openai-messages.ts";
import type { AgentTool } from "../../src/agent/tools/types.ts";
import { loadProviders } from "../../src/config/providers.ts";
import { text, toolUse } from "../helpers/anthropic-fake.ts";
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

describe("images a tool answers with (an MCP server's)", () => {
  // A tool that answers with an image, as an MCP server's get-tiny-image does.
  const screenshot: AgentTool = {
    name: "mcp__ui__screenshot",
    definition: { name: "mcp__ui__screenshot", input_schema: { type: "object" } },
    input: z.object({}),
    run: async () => ({
      content: "[Image 1 follows this result.]",
      isError: false,
      images: [{ mediaType: "image/png", data: PNG }],
    }),
  };
  const mcp = {
    offered: async () => [screenshot],
    find: (name: string) => (name === screenshot.name ? screenshot : undefined),
  };

  async function afterTheCall(vision: boolean | undefined) {
    fake.push({ content: [toolUse("mcp__ui__screenshot", {})] });
    fake.push({ content: [text("A dialog.")] });
    const result = await runAgent({
      workspace: repo.workspace,
      system: "You are a test agent.",
      model: "gpu/some-model",
      instruction: "Look at the screen.",
      mcp,
      providers: new Map([
        ["gpu", { name: "gpu", baseUrl: fake.url, prices: {}, stream: true, vision }],
      ]),
      compatible: { maxRetries: 0 },
    });
    expect(result.reason).toBe("end_turn");
    return fake.requests[1]?.body.messages.slice(3);
  }

  it("come after the tool's result, as image parts, to a model marked vision-capable", async () => {
    const [result, images] = await afterTheCall(true);
    expect(result).toMatchObject({ role: "tool", content: "[Image 1 follows this result.]" });
    expect(images).toEqual({
      role: "user",
      content: [
        { type: "text", text: "Image 1 of the result of mcp__ui__screenshot:" },
        {
          type: "image_url",
          image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` },
        },
      ],
    });
  });

  it("become a line saying an image was left out for any other model", async () => {
    const [, images] = await afterTheCall(undefined);
    expect(images).toEqual({
      role: "user",
      content: `Image 1 of the result of mcp__ui__screenshot:\n${IMAGE_LEFT_OUT}`,
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
