// Chat images take the store and memory only within bounds (issue 30): a turn that never runs keeps
// none of its images, a conversation and an owner's day hold only so many, old ones are deleted,
// and only so many are read at once, per person and per process. The real web role without a
// worker, so a turn stays queued until its client goes.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Principal } from "../../src/chat/auth.ts";
import { checkImageRoom, ImageReading } from "../../src/chat/image-limits.ts";
import type { RunningServer } from "../../src/main.ts";
import { createApiConversation } from "../../src/store/api-conversations.ts";
import {
  deleteOldImages,
  dropTurnImages,
  imageReference,
  loadImages,
  sha256Hex,
  storeImage,
} from "../../src/store/conversation-images.ts";
import type { Database } from "../../src/store/database.ts";
import { insertJob } from "../../src/store/jobs.ts";
import { APP_SLUG, startTestServer, testConfig } from "../helpers/app.ts";
import {
  type AssetServer,
  LOOPBACK_POLICY,
  PNG,
  startAssetServer,
} from "../helpers/asset-server.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { mockApp, useGitHubMock } from "../helpers/github-mock.ts";

useGitHubMock();

const OPERATOR_KEY = `op-${"m".repeat(40)}`;
const OPERATOR: Principal = { kind: "operator" };
const mona: Principal = { kind: "user", id: 5, login: "mona" };

let db: Database;
let server: RunningServer;
let assets: AssetServer;

beforeAll(async () => {
  db = await openTestDatabase();
  assets = await startAssetServer({
    "/shot.png": { body: PNG },
    "/stall.png": { claimedLength: 5 * 1024 * 1024 },
  });
  mockApp(APP_SLUG);
  server = await startTestServer(db, {
    config: testConfig({ apiKey: OPERATOR_KEY }),
    role: "web",
    chat: { pollIntervalMs: 20, imageFetch: { policy: LOOPBACK_POLICY } },
  });
});

afterAll(async () => {
  await server?.close();
  await assets?.close();
  await db?.close();
});

/** A distinct PNG: the pixel, then `i` as trailing bytes (the sniffer reads only the start). */
const png = (i: number) => Buffer.concat([PNG, Buffer.from(String(i))]);
const dataUrl = (bytes: Buffer) => `data:image/png;base64,${bytes.toString("base64")}`;

/** A streamed chat request with images; `signal` hangs up. */
function ask(urls: string[], signal?: AbortSignal, chatId?: string) {
  return fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${OPERATOR_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "vmpilot",
      stream: true,
      ...(chatId && { chat_id: chatId }),
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "look" },
            ...urls.map((url) => ({ type: "image_url", image_url: { url } })),
          ],
        },
      ],
    }),
    signal,
  });
}

/** The images stored, in one conversation or in all. */
const storedImages = async (conversationId?: number) =>
  Number(
    (
      await db.pool.query(
        "SELECT count(*) AS n FROM conversation_images WHERE $1::bigint IS NULL OR conversation_id = $1",
        [conversationId ?? null],
      )
    ).rows[0]?.n,
  );

/** Stores `count` different images in the conversation, from `from` on. */
async function seedImages(conversationId: number, from: number, count: number) {
  for (let i = from; i < from + count; i++) {
    await storeImage(db.pool, conversationId, "image/png", png(i));
  }
}

describe("a turn that never runs", () => {
  it("keeps none of its images when its client hangs up after the 200", async () => {
    const hangUp = new AbortController();
    const res = await ask([dataUrl(png(1)), dataUrl(png(2))], hangUp.signal);
    expect(res.status).toBe(200);
    await res.body?.getReader().read();
    expect(await storedImages()).toBe(2);
    hangUp.abort();
    await vi.waitFor(
      async () => {
        const { rows } = await db.pool.query("SELECT status FROM jobs ORDER BY id DESC LIMIT 1");
        expect({ status: rows[0]?.status, images: await storedImages() }).toEqual({
          status: "cancelled",
          images: 0,
        });
      },
      { timeout: 5_000, interval: 20 },
    );
  });

  it("leaves an image that a later turn of the conversation still names", async () => {
    const conversation = await createApiConversation(db.pool, {
      owner: OPERATOR,
      repositoryId: null,
    });
    const image = { mediaType: "image/png" as const, sha256: sha256Hex(png(3)) };
    const [first, second] = await Promise.all(
      [1, 2].map(async () => {
        const job = await insertJob(db.pool, {
          conversationId: conversation.id,
          installationId: null,
          repositoryId: null,
          repo: "scratch",
          number: null,
          trigger: "chat",
          requester: "operator",
          context: { images: [image] },
        });
        return job.id;
      }),
    );
    await storeImage(db.pool, conversation.id, "image/png", png(3), first);
    await dropTurnImages(db.pool, conversation.id, first as number);
    // Only the first turn is over: the second is still to run, and shows the image.
    expect(await storedImages(conversation.id)).toBe(1);
    await db.pool.query("UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE id = $1", [
      second,
    ]);
    await dropTurnImages(db.pool, conversation.id, first as number);
    expect(await storedImages(conversation.id)).toBe(0);
  });
});

describe("images stored", () => {
  it("are refused past 50 in a conversation, counting only those it does not hold yet", async () => {
    const conversation = await createApiConversation(db.pool, { owner: mona, repositoryId: null });
    await seedImages(conversation.id, 100, 48);
    // Stored before today: the day's count is not what refuses.
    await db.pool.query(
      "UPDATE conversation_images SET created_at = now() - interval '2 days' WHERE conversation_id = $1",
      [conversation.id],
    );
    const held = sha256Hex(png(100));
    await checkImageRoom(db.pool, mona, [held, "a", "b"], conversation.id);
    await expect(
      checkImageRoom(db.pool, mona, ["a", "b", "c"], conversation.id),
    ).rejects.toMatchObject({
      status: 400,
      code: "too_many_images",
      message:
        "A conversation may hold at most 50 images; this one has 48. Start a new chat to send more.",
    });
  });

  it("are refused past 100 an owner's day, in all their conversations, until the oldest is a day old", async () => {
    const [one, two] = await Promise.all(
      [1, 2].map(() => createApiConversation(db.pool, { owner: mona, repositoryId: null })),
    );
    await seedImages(one?.id as number, 200, 50);
    await seedImages(two?.id as number, 250, 49);
    await db.pool.query(
      "UPDATE conversation_images SET created_at = now() - interval '23 hours' WHERE sha256 = $1",
      [sha256Hex(png(200))],
    );
    await checkImageRoom(db.pool, mona, ["a"]);
    const refused = await checkImageRoom(db.pool, mona, ["a", "b"]).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 429, code: "rate_limit_exceeded" });
    const retryAfter = Number(
      (refused as { headers: Record<string, string> }).headers["retry-after"],
    );
    expect(retryAfter).toBeGreaterThan(3000);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    // Another owner's day is apart.
    await checkImageRoom(db.pool, OPERATOR, ["a", "b"]);
  });

  it("are deleted after 30 days, and a message shows a line in an old one's place", async () => {
    const conversation = await createApiConversation(db.pool, {
      owner: OPERATOR,
      repositoryId: null,
    });
    const sha256 = await storeImage(db.pool, conversation.id, "image/png", png(300));
    await db.pool.query(
      "UPDATE conversation_images SET created_at = now() - interval '31 days' WHERE sha256 = $1",
      [sha256],
    );
    await deleteOldImages(db.pool, 30);
    const [content] = await loadImages(db.pool, conversation.id, [
      [{ type: "text", text: "look" }, imageReference("image/png", sha256)],
    ]);
    expect(content).toEqual([
      { type: "text", text: "look" },
      {
        type: "text",
        text: "(An image was here; vmpilot keeps images for a limited time and this one was deleted.)",
      },
    ]);
  });

  it("by a request past the owner's day are refused with 429 before any is read", async () => {
    const conversation = await createApiConversation(db.pool, {
      owner: OPERATOR,
      repositoryId: null,
    });
    await seedImages(conversation.id, 400, 100);
    const before = assets.requests.length;
    const res = await ask([`${assets.url}/shot.png`]);
    expect(res.status).toBe(429);
    expect(assets.requests.length).toBe(before);
    await db.pool.query("DELETE FROM conversation_images WHERE conversation_id = $1", [
      conversation.id,
    ]);
  });
});

describe("images being read", () => {
  it("are at most 10 a person and 20 in all; past them a request is refused, and a reader's place comes back when it is done", () => {
    const reading = new ImageReading();
    const lisa: Principal = { kind: "user", id: 6, login: "lisa" };
    const releaseMona = reading.take(mona, 10);
    expect(() => reading.take(mona, 1)).toThrow(
      expect.objectContaining({ status: 429, code: "rate_limit_exceeded" }),
    );
    const releaseLisa = reading.take(lisa, 6);
    expect(() => reading.take(OPERATOR, 5)).toThrow(
      expect.objectContaining({ status: 503, code: "server_busy" }),
    );
    releaseMona();
    releaseMona();
    reading.take(OPERATOR, 5)();
    reading.take(mona, 10);
    releaseLisa();
    reading.take(OPERATOR, 10);
  });

  it("refuses a person's images past 10 in flight at once, stores nothing, and frees them when the client goes", async () => {
    const before = await storedImages();
    // More than a message may have is the message's fault, not the reader's: 400.
    expect((await ask(Array(11).fill(`${assets.url}/stall.png`))).status).toBe(400);
    const hangUp = new AbortController();
    const stalled = ask(Array(10).fill(`${assets.url}/stall.png`), hangUp.signal).catch(
      (e: unknown) => e,
    );
    await vi.waitFor(
      () => expect(assets.requests.filter((r) => r.path === "/stall.png")).toHaveLength(10),
      { timeout: 5_000, interval: 10 },
    );
    const refused = await ask([`${assets.url}/shot.png`]);
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({
      error: { message: expect.stringContaining("at most 10 images of one person at once") },
    });
    hangUp.abort();
    await stalled;
    // The stalled fetches were given up with the client: a new request gets their places.
    const again = new AbortController();
    await vi.waitFor(
      async () => {
        const res = await ask([`${assets.url}/shot.png`], again.signal);
        expect(res.status).toBe(200);
      },
      { timeout: 5_000, interval: 20 },
    );
    again.abort();
    await vi.waitFor(async () => expect(await storedImages()).toBe(before), {
      timeout: 5_000,
      interval: 20,
    });
  });
});
