// Images in chat requests (OpenAI's image_url parts): a data: URL or an https URL, held to the
// limits of an issue's images, reaches the model as an image block after the message's text, and
// stays in the conversation; one that cannot be used refuses the request, saying which and why.
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { readRequestImages } from "../../src/chat/images.ts";
import type { RunningServer } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { type AnthropicFake, startAnthropicFake, text } from "../helpers/anthropic-fake.ts";
import { APP_SLUG, startTestServer, testConfig } from "../helpers/app.ts";
import {
  type AssetServer,
  LOOPBACK_POLICY,
  PNG,
  SVG,
  startAssetServer,
} from "../helpers/asset-server.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { expectGitHubDone, mockApp, useGitHubMock } from "../helpers/github-mock.ts";

useGitHubMock();

const OPERATOR_KEY = `op-${"i".repeat(40)}`;

let base: string;
let db: Database;
let fake: AnthropicFake;
let server: RunningServer;
let operator: OpenAI;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-chat-images-")));
  fake = await startAnthropicFake();
  db = await openTestDatabase();
  mockApp(APP_SLUG);
  server = await startTestServer(db, {
    config: testConfig({ apiKey: OPERATOR_KEY }),
    chat: { pollIntervalMs: 20 },
    work: {
      anthropic: { apiKey: `sk-ant-api03-${"i".repeat(40)}`, baseURL: fake.url, maxRetries: 0 },
      dataDir: join(base, "data"),
      streamRetryDelayMs: 1,
    },
  });
  expectGitHubDone();
  operator = new OpenAI({ apiKey: OPERATOR_KEY, baseURL: `${server.url}/v1`, maxRetries: 0 });
});

afterEach(() => {
  expect(fake.problems, "requests the Anthropic fake refused").toEqual([]);
  expect(fake.pending(), "scripted model replies left over").toBe(0);
});

afterAll(async () => {
  await server?.close();
  await db?.close();
  await fake?.close();
  await rm(base, { recursive: true, force: true });
});

const dataUrl = (bytes: Buffer, type = "image/png") =>
  `data:${type};base64,${bytes.toString("base64")}`;

const withImages = (words: string, ...urls: string[]): OpenAI.ChatCompletionUserMessageParam => ({
  role: "user",
  content: [
    { type: "text", text: words },
    ...urls.map((url) => ({ type: "image_url" as const, image_url: { url } })),
  ],
});

const PNG_BLOCK = {
  type: "image",
  source: { type: "base64", media_type: "image/png", data: PNG.toString("base64") },
};

// biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
const blocksOf = (message: any): unknown[] =>
  // biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
  message.content.map(({ cache_control: _, ...block }: any) => block);

describe("images in a chat request", () => {
  it("reach the model as an image block after the text, and stay in the conversation and its branches", async () => {
    const ask = (messages: OpenAI.ChatCompletionMessageParam[]) =>
      operator.chat.completions.create({ model: "vmpilot", messages });
    const first = withImages("what does this show?", dataUrl(PNG));
    fake.push({ content: [text("A single pixel.")] });
    const reply = (await ask([first])).choices[0]?.message.content ?? "";
    expect(reply).toContain("A single pixel.");
    expect(blocksOf(fake.requests[0]?.body.messages.at(-1))).toEqual([
      { type: "text", text: "what does this show?" },
      PNG_BLOCK,
    ]);
    const { rows } = await db.pool.query("SELECT media_type FROM conversation_images");
    expect(rows).toEqual([{ media_type: "image/png" }]);

    // The client sends the history back, images and all: the image is the conversation's already,
    // shown from the store, and the new message has none. A regenerate then branches the
    // conversation.
    const history: OpenAI.ChatCompletionMessageParam[] = [
      first,
      { role: "assistant", content: reply },
      { role: "user", content: "what colour is it?" },
    ];
    for (const answer of ["Black.", "Still black."]) {
      fake.push({ content: [text(answer)] });
      expect((await ask(history)).choices[0]?.message.content).toContain(answer);
      const messages = fake.requests.at(-1)?.body.messages;
      expect(blocksOf(messages[0])).toEqual([
        { type: "text", text: "what does this show?" },
        PNG_BLOCK,
      ]);
      expect(JSON.stringify(messages.at(-1))).not.toContain('"image"');
    }
    const conversations = await db.pool.query(
      "SELECT DISTINCT conversation_id FROM conversation_images",
    );
    expect(conversations.rows).toHaveLength(2);
  });

  it("refuses an SVG, an oversize image and an address on loopback or not over https, saying which and why", async () => {
    const oversize = Buffer.concat([PNG, Buffer.alloc(5 * 1024 * 1024)]);
    const asked = fake.requests.length;
    const refusal = async (...urls: string[]) => {
      const error = await operator.chat.completions
        .create({ model: "vmpilot", messages: [withImages("look", ...urls)] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      return (error as InstanceType<typeof OpenAI.BadRequestError>).message;
    };
    expect(await refusal(dataUrl(PNG), dataUrl(SVG, "image/svg+xml"))).toBe(
      "400 vmpilot cannot use the message's images: image 2: it is not a PNG, JPEG, GIF or WebP image.",
    );
    expect(await refusal(dataUrl(oversize))).toBe(
      "400 vmpilot cannot use the message's images: image 1: it is 5 MB, over the 5 MB limit.",
    );
    expect(await refusal("http://127.0.0.1:9/shot.png", "https://127.0.0.1:9/shot.png?sig=x")).toBe(
      "400 vmpilot cannot use the message's images: image 1 (http://127.0.0.1:9/shot.png): it is not served over https; image 2 (https://127.0.0.1:9/shot.png): it is on a loopback address.",
    );
    expect(fake.requests.length).toBe(asked);
  });
});

describe("readRequestImages", () => {
  let assets: AssetServer;
  beforeAll(async () => {
    assets = await startAssetServer({ "/shot.png": { body: PNG } });
  });
  afterAll(() => assets.close());

  it("fetches URLs with the issue images' fetcher, in order, and takes at most 10", async () => {
    const options = { policy: LOOPBACK_POLICY };
    const images = await readRequestImages(
      [`${assets.url}/shot.png`, dataUrl(PNG, "image/jpeg")],
      options,
    );
    expect(images.map((image) => image.mediaType)).toEqual(["image/png", "image/png"]);
    expect(assets.requests[0]?.headers.authorization).toBeUndefined();
    await expect(readRequestImages([`${assets.url}/missing.png`], options)).rejects.toThrow(
      `image 1 (${assets.url}/missing.png): the server answered 404`,
    );
    await expect(readRequestImages(Array(11).fill(dataUrl(PNG)), options)).rejects.toThrow(
      "A message may have at most 10 images; this one has 11.",
    );
  });
});

describe("images on GitHub Enterprise Server", () => {
  let ghes: AssetServer;
  let enterprise: RunningServer;
  beforeAll(async () => {
    // GHE_HOST=127.0.0.1:<port> with GHE_PROTOCOL=http: the app's API and the attachments.
    const app = { id: 1, slug: APP_SLUG, name: APP_SLUG, owner: { login: "acme" } };
    ghes = await startAssetServer({
      "/api/v3/app": { body: Buffer.from(JSON.stringify(app)), type: "application/json" },
      "/storage/user/1/shot.png": { body: PNG },
    });
    const baseUrl = `${ghes.url}/api/v3`;
    enterprise = await startTestServer(db, {
      config: testConfig({ apiKey: OPERATOR_KEY, baseUrl, githubWebUrl: ghes.url }),
      chat: { pollIntervalMs: 20 },
      work: {
        anthropic: { apiKey: `sk-ant-api03-${"i".repeat(40)}`, baseURL: fake.url, maxRetries: 0 },
        dataDir: join(base, "data-ghes"),
        streamRetryDelayMs: 1,
      },
    });
  });
  afterAll(async () => {
    await enterprise?.close();
    await ghes?.close();
  });

  it("are fetched from the Enterprise host over http on loopback, and from no other private host", async () => {
    const client = new OpenAI({
      apiKey: OPERATOR_KEY,
      baseURL: `${enterprise.url}/v1`,
      maxRetries: 0,
    });
    const ask = (url: string) =>
      client.chat.completions.create({ model: "vmpilot", messages: [withImages("look", url)] });
    fake.push({ content: [text("A single pixel.")] });
    await ask(`${ghes.url}/storage/user/1/shot.png?token=x`);
    expect(blocksOf(fake.requests.at(-1)?.body.messages.at(-1))).toEqual([
      { type: "text", text: "look" },
      PNG_BLOCK,
    ]);
    const other = `http://localhost:${new URL(ghes.url).port}/storage/user/1/shot.png`;
    await expect(ask(other)).rejects.toThrow(
      `400 vmpilot cannot use the message's images: image 1 (${other}): it is not served over https.`,
    );
    expect(ghes.requests.map((r) => r.path.split("?")[0])).toEqual([
      "/api/v3/app",
      "/storage/user/1/shot.png",
    ]);
  });
});
