// Screenshots attached to an issue reach the model as image blocks: fetched from the signed URLs
// of the rendered HTML without credentials, checked by their bytes and size, and stored once per
// conversation.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attachmentPolicy } from "../../src/github/images.ts";
import { text } from "../helpers/anthropic-fake.ts";
import {
  type AssetServer,
  LOOPBACK_POLICY,
  PNG,
  SVG,
  startAssetServer,
} from "../helpers/asset-server.ts";
import { github } from "../helpers/github-mock.ts";
import { TEST_INSTALLATION_TOKEN } from "../helpers/octokit.ts";
import {
  captureComment,
  mockRequester,
  plain,
  run,
  runQueued,
  type Seeded,
  TOKEN,
  usePipelineHarness,
} from "./pipeline-harness.ts";

const h = usePipelineHarness();
let assets: AssetServer;

beforeAll(async () => {
  assets = await startAssetServer({
    "/shot.png": { body: PNG },
    "/again.png": { body: PNG },
    "/logo.svg": { body: SVG, type: "image/svg+xml" },
    // Over the 5 MB cap, streamed without a Content-Length: counted as it comes.
    "/huge.png": { body: Buffer.concat([PNG, Buffer.alloc(5 * 1024 * 1024)]), chunked: true },
  });
});
afterAll(() => assets.close());

const img = (path: string, at = assets.url) =>
  `<p><a href="${at}${path}?jwt=signed"><img src="${at}${path}?jwt=signed&amp;v=1" alt="image"></a></p>`;

/** The item as GitHub renders it with the "full" media type, and its comments. */
function mockItem(seeded: Seeded, comments: unknown[], html = defaultHtml()) {
  const [owner] = seeded.repo.split("/");
  github()
    .get(`/repos/${seeded.repo}/contents/.github%2Fvmpilot.yml`)
    .reply(404)
    .get(`/repos/${owner}/.github/contents/.github%2Fvmpilot.yml`)
    .reply(404)
    .get(`/repos/${seeded.repo}/issues/${seeded.number}`)
    .matchHeader("accept", /application\/vnd\.github\.v3\.full/)
    .reply(200, {
      number: seeded.number,
      title: "Crash on empty input",
      body: "It crashes: ![image](https://github.com/user-attachments/assets/1) ![logo] ![big]",
      body_html: html,
      user: { login: "reporter" },
    })
    .get(`/repos/${seeded.repo}/issues/${seeded.number}/comments`)
    .matchHeader("accept", /application\/vnd\.github\.v3\.full/)
    .query(true)
    .reply(200, comments);
}

function defaultHtml() {
  return `<p>It crashes:</p>${img("/shot.png")}${img("/logo.svg")}${img("/huge.png")}`;
}

// biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
const blocksOf = (message: any) => plain(message).content as { type: string; text?: string }[];

describe("images attached to an issue", () => {
  it("reach the model as image blocks once per conversation; an SVG and an oversize file are left out, saying so", async () => {
    const seeded = await h.seedRepo();
    const first = await h.seedJob(seeded, {
      trigger: "command",
      instruction: "what does the screenshot show?",
    });
    mockItem(seeded, []);
    mockRequester();
    captureComment(seeded.repo, first.commentId);
    h.fake.push({ content: [text("A crash dialog.")] });
    const deps = h.deps({ imageFetch: { policy: LOOPBACK_POLICY } });

    expect(await runQueued(run(first.job.id), deps)).toBe("succeeded");

    const opening = blocksOf(h.fake.requests[0]?.body.messages[0]);
    expect(opening.map((b) => b.type)).toEqual(["text", "text", "text", "image", "text"]);
    expect(opening[2]?.text).toBe("Image from the issue's description:");
    expect(opening[3]).toEqual({
      type: "image",
      source: { type: "base64", media_type: "image/png", data: PNG.toString("base64") },
    });
    expect(opening[4]?.text).toBe(
      [
        "An image in the issue's description was left out: it is not a PNG, JPEG, GIF or WebP image.",
        "An image in the issue's description was left out: it is over the 5 MB limit.",
      ].join("\n"),
    );
    // The signed URLs got no credentials: no Authorization header, no token anywhere.
    expect(assets.requests.map((r) => r.path.split("?")[0])).toEqual([
      "/shot.png",
      "/logo.svg",
      "/huge.png",
    ]);
    for (const { headers } of assets.requests) {
      expect(headers.authorization).toBeUndefined();
      expect(JSON.stringify(headers)).not.toContain(TEST_INSTALLATION_TOKEN);
      expect(JSON.stringify(headers)).not.toContain(TOKEN);
    }
    // Stored once, by hash; the message holds a reference, not the bytes.
    const images = await h.db.pool.query(
      "SELECT sha256, media_type FROM conversation_images WHERE conversation_id = $1",
      [seeded.conversationId],
    );
    expect(images.rows).toHaveLength(1);
    const stored = await h.db.pool.query(
      "SELECT content FROM messages WHERE conversation_id = $1 AND seq = 1",
      [seeded.conversationId],
    );
    expect(stored.rows[0].content[3]).toEqual({
      type: "image",
      source: { type: "chat_image", media_type: "image/png", sha256: images.rows[0].sha256 },
    });

    // The next turn: a comment with the same screenshot again, under another signed URL.
    const second = await h.seedJob(seeded, {
      trigger: "mention",
      instruction: "and this one?",
      triggerCommentId: 901,
    });
    mockItem(seeded, [
      {
        id: 901,
        user: { login: "octocat" },
        body: "@vmpilot-bot and this one? ![image](https://github.com/user-attachments/assets/2)",
        body_html: `<p>@vmpilot-bot and this one?</p>${img("/again.png")}`,
        created_at: "2030-01-01T00:00:00Z",
      },
    ]);
    mockRequester();
    captureComment(seeded.repo, second.commentId);
    h.fake.push({ content: [text("The same dialog.")] });

    expect(await runQueued(run(second.job.id), deps)).toBe("succeeded");

    // Only the comment's image was read: the description's went with the first turn.
    expect(assets.requests.slice(3).map((r) => r.path.split("?")[0])).toEqual(["/again.png"]);
    const messages = h.fake.requests[1]?.body.messages;
    // The first turn, its image read back from the store, then the new turn without it.
    expect(blocksOf(messages[0])).toEqual(opening);
    const latest = blocksOf(messages.at(-1));
    expect(latest).toEqual([{ type: "text", text: expect.stringContaining("and this one?") }]);
    const count = await h.db.pool.query(
      "SELECT count(*)::int AS n FROM conversation_images WHERE conversation_id = $1",
      [seeded.conversationId],
    );
    expect(count.rows[0].n).toBe(1);
  });
});

describe("images on GitHub Enterprise Server", () => {
  it("come from the Enterprise host over http on a private address; another private host's are left out, even through a redirect", async () => {
    // localhost is the same loopback server under another name: only the Enterprise host is let in.
    const other = `http://localhost:${new URL(assets.url).port}`;
    const ghes = await startAssetServer({
      "/storage/user/1/shot.png": { body: PNG },
      "/storage/user/1/moved.png": { redirect: `${other}/again.png` },
    });
    try {
      const seeded = await h.seedRepo();
      const { job, commentId } = await h.seedJob(seeded, {
        trigger: "command",
        instruction: "what do the screenshots show?",
      });
      const html = `<p>It crashes:</p>${img("/storage/user/1/shot.png", ghes.url)}${img("/again.png", other)}${img("/storage/user/1/moved.png", ghes.url)}`;
      mockItem(seeded, [], html);
      mockRequester();
      captureComment(seeded.repo, commentId);
      h.fake.push({ content: [text("A crash dialog.")] });
      // What the worker is given for GHE_HOST=127.0.0.1:<port> with GHE_PROTOCOL=http.
      const deps = h.deps({ imageFetch: { policy: attachmentPolicy(`${ghes.url}/api/v3`) } });
      const before = assets.requests.length;

      expect(await runQueued(run(job.id), deps)).toBe("succeeded");

      const opening = blocksOf(h.fake.requests.at(-1)?.body.messages[0]);
      expect(opening.map((b) => b.type)).toEqual(["text", "text", "text", "image", "text"]);
      expect(opening[3]).toMatchObject({ type: "image", source: { media_type: "image/png" } });
      expect(opening[4]?.text).toBe(
        [
          "An image in the issue's description was left out: it is not served over https.",
          "An image in the issue's description was left out: it is not served over https.",
        ].join("\n"),
      );
      expect(ghes.requests.map((r) => r.path.split("?")[0])).toEqual([
        "/storage/user/1/shot.png",
        "/storage/user/1/moved.png",
      ]);
      expect(assets.requests.length).toBe(before);
    } finally {
      await ghes.close();
    }
  });
});
