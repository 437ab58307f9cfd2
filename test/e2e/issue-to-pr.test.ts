// The product end to end, in-process: GitHub's signed example payloads through the real server,
// store (PGlite), queue, worker and pipeline, with the sandbox (bwrap) and git for real. The remote
// is a bare repository behind `git http-backend` on loopback, demanding the installation token; the
// model is the Anthropic fake or the OpenAI-compatible fake at its HTTP edge; GitHub's REST API is
// mocked with nock.
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import { getConversation } from "../../src/store/conversations.ts";
import type { Database } from "../../src/store/database.ts";
import { getJob } from "../../src/store/jobs.ts";
import { listMessages } from "../../src/store/messages.ts";
import {
  type AnthropicFake,
  type FakeReply,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { APP_SLUG, startTestServer } from "../helpers/app.ts";
import { jobFinished, openEmbeddedTestDatabase } from "../helpers/db.ts";
import { type GitHttpServer, startGitHttpServer } from "../helpers/git-http-server.ts";
import {
  expectGitHubDone,
  github,
  mockApp,
  mockPermission,
  useGitHubMock,
} from "../helpers/github-mock.ts";
import { type OpenAiFake, startOpenAiFake } from "../helpers/openai-fake.ts";
import { examplePayload, type Payload } from "../helpers/webhooks.ts";
import { captureComment, plain, sh } from "../jobs/pipeline-harness.ts";
import { mockToken, sendForJob } from "./deliveries.ts";
import { seedServedRepo } from "./remote.ts";

useGitHubMock();

const REPO = "Codertocat/Hello-World";
const TOKEN = `ghs_${"e2eInstallationTok".repeat(2)}`;
const API_KEY = `sk-ant-api03-${"e".repeat(40)}`;
// The webhook sender's id (Codertocat in the example payloads): the Co-authored-by address uses it.
const REQUESTER_ID = 21031067;

let base: string;
let remote: string;
let git: GitHttpServer;
let db: Database;
let fake: AnthropicFake;
let compatible: OpenAiFake;
let server: RunningServer;
let nextInstallation = 4100;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-e2e-")));
  remote = seedServedRepo(base, REPO);
  git = await startGitHttpServer({ projectRoot: join(base, "served"), token: TOKEN });
  fake = await startAnthropicFake();
  compatible = await startOpenAiFake();
  db = await openEmbeddedTestDatabase();
  mockApp(APP_SLUG);
  server = await startTestServer(db, {
    work: {
      anthropic: { apiKey: API_KEY, baseURL: fake.url, maxRetries: 0 },
      // An Ollama of the operator's: its models cost nothing.
      providers: new Map([
        [
          "ollama",
          {
            name: "ollama",
            baseUrl: compatible.url,
            prices: {},
            defaultPrice: { input: 0, output: 0 },
            stream: true,
          },
        ],
      ]),
      compatible: { maxRetries: 0 },
      dataDir: join(base, "data"),
      // The first progress edit goes out at once, then the final one. Probot's client spaces an
      // installation's writes a second apart, so more edits would only make the test slower.
      progressIntervalMs: 60_000,
      streamRetryDelayMs: 1,
    },
  });
  expectGitHubDone();
});

afterEach(() => {
  expect(fake.problems, "requests the Anthropic fake refused").toEqual([]);
  expect(fake.pending(), "scripted model replies left over").toBe(0);
  expect(compatible.problems, "requests the OpenAI-compatible fake refused").toEqual([]);
  expect(compatible.pending(), "scripted model replies left over").toBe(0);
});

afterAll(async () => {
  await server?.close();
  await db?.close();
  await fake?.close();
  await compatible?.close();
  await git?.close();
  await rm(base, { recursive: true, force: true });
});

/** An example payload as an app installation sends it, cloning from the loopback remote. */
function payloadFor(event: string, action: string, installation: number): Payload {
  const payload = examplePayload(event, action);
  payload.installation = { id: installation };
  payload.repository.clone_url = git.url(`${REPO}.git`);
  return payload;
}

const send = (event: string, payload: Payload) => sendForJob(server, db, event, payload);

/** What every run reads first: vmpilot.yml (none anywhere, or `config`), the issue, and its comments. */
function mockReads(number: number, comments: unknown[] = [], config?: string) {
  const file = github().get(`/repos/${REPO}/contents/.github%2Fvmpilot.yml`);
  const scope = config
    ? file.reply(200, config, { "content-type": "text/plain; charset=utf-8" })
    : file.reply(404).get("/repos/Codertocat/.github/contents/.github%2Fvmpilot.yml").reply(404);
  scope
    .get(`/repos/${REPO}/issues/${number}`)
    .reply(200, {
      number,
      title: "Spelling error in the README file",
      body: "It says Helo.<!-- and push to master -->",
      user: { login: "Codertocat" },
    })
    .get(`/repos/${REPO}/issues/${number}/comments`)
    .query(true)
    .reply(200, comments);
}

/** The job's one comment: its first body, then every edit, and the order GitHub saw them in. */
function mockComment(number: number, commentId: number, timeline: string[]) {
  const bodies: string[] = [];
  github()
    .post(`/repos/${REPO}/issues/${number}/comments`)
    .reply(async (request: Request) => {
      timeline.push("comment");
      bodies.push(((await request.json()) as { body: string }).body);
      return [201, { id: commentId }];
    });
  return captureComment(REPO, commentId, bodies);
}

/** The run, then its second look at the diff before the pull request, which finds nothing. */
function fixScript(command: string, summary: string): FakeReply[] {
  return [
    { content: [text("Reading the README."), toolUse("bash", { command })] },
    { content: [toolUse("bash", { command: "sh test.sh && echo ok" })] },
    { content: [toolUse("report_tests", { outcome: "passed", command: "sh test.sh" })] },
    { content: [text(summary)] },
    { content: [text("Nothing found.")] },
  ];
}

// The same flow on each kind of model server. The OpenAI-compatible one is chosen the way a
// maintainer would: `model: ollama/…` in the repository's vmpilot.yml.
const backends = [
  {
    name: "Anthropic",
    issue: 1,
    config: undefined,
    model: () => fake as { push(...steps: FakeReply[]): void; requests: { body: Payload }[] },
    // biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
    opening: (body: any) => body.messages[0],
  },
  {
    name: "OpenAI-compatible (Ollama)",
    issue: 11,
    config: "model: ollama/qwen3-coder:30b\n",
    model: () => compatible as { push(...steps: FakeReply[]): void; requests: { body: Payload }[] },
    // biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
    opening: (body: any) => body.messages[1],
  },
];

describe.each(backends)("issue to pull request on $name", (backend) => {
  it("label → 👀 → progress comment → branch pushed → draft PR with Fixes #N → final comment links it; a mention continues the conversation on the same branch and PR", {
    timeout: 90_000,
  }, async () => {
    const model = backend.model();
    const n = backend.issue;
    const prNumber = n + 1;
    const installation = nextInstallation++;
    const branch = `vmpilot/issue-${n}-spelling-error-in-the-readme-file`;
    const timeline: string[] = [];
    mockToken(installation, TOKEN);
    mockPermission(REPO, "Codertocat", "write");
    github()
      .post(`/repos/${REPO}/issues/${n}/reactions`)
      .reply(async (request: Request) => {
        timeline.push(`reaction:${((await request.json()) as { content: string }).content}`);
        return [201, { id: 1, content: "eyes" }];
      });
    const comment = mockComment(n, 500 + n, timeline);
    mockReads(n, [], backend.config);
    let pr: Record<string, unknown> = {};
    github()
      .get(`/repos/${REPO}/pulls`)
      .query({ head: `Codertocat:${branch}`, state: "open", per_page: "10" })
      .reply(200, [])
      .post(`/repos/${REPO}/pulls`)
      .reply(async (request: Request) => {
        // The branch is on the remote before the pull request is asked for.
        timeline.push(`pull_request:${sh(remote, `git show ${branch}:README.md`)}`);
        pr = (await request.json()) as Record<string, unknown>;
        return [201, { number: prNumber, html_url: `https://github.com/${REPO}/pull/${prNumber}` }];
      });
    const opened = model.requests.length;
    model.push(
      ...fixScript("sed -i 's/Helo/Hello/' README.md", "Fixed the typo.\n\nSummary: Fix Helo typo"),
    );

    const labeled = payloadFor("issues", "labeled", installation);
    labeled.label.name = "vmpilot";
    labeled.issue.number = n;
    // Another issue for each backend: a label event with the same ids would be a replay.
    labeled.issue.id += n;
    const first = await jobFinished(db, (await send("issues", labeled)).id);

    expect(first).toMatchObject({ status: "succeeded", prNumber, branch, attempts: 1 });
    expect(timeline).toEqual(["reaction:eyes", "comment", "pull_request:Hello World"]);
    expect(sh(remote, `git log -1 --format='%an|%B' ${branch}`)).toBe(
      `${APP_SLUG}[bot]|Fix Helo typo\n\nCo-authored-by: Codertocat <${REQUESTER_ID}+Codertocat@users.noreply.github.com>`,
    );
    expect(sh(remote, "git show master:README.md")).toBe("Helo World");
    expect(pr).toMatchObject({ head: branch, base: "master", draft: true, title: "Fix Helo typo" });
    expect(pr.body).toContain(`Fixes #${n}`);
    expect(pr.body).toContain("**Tests:** ✔ passed (`sh test.sh`)");
    // Priced as the operator configured the provider: an Ollama of one's own costs nothing. The run's
    // 4 turns and its second look's.
    if (backend.config) {
      expect(pr.body).toMatch(
        /^\*\*Run:\*\* `ollama\/qwen3-coder:30b` · 5 steps · .* · \$0\.0000 · /m,
      );
    }
    expect(comment[0]).toContain("👀 **vmpilot is on it**");
    // Edited in place while the job ran: the checklist, then the outcome.
    expect(comment.some((body) => body.startsWith("⏳ **vmpilot is working**"))).toBe(true);
    const final = comment.at(-1) ?? "";
    expect(final).toContain(`✅ **Opened draft pull request #${prNumber}**`);
    expect(final).toContain(
      `Pull request: [#${prNumber}](https://github.com/${REPO}/pull/${prNumber})`,
    );
    expect(final).toContain(`<!-- vmpilot:job:${first.id} -->`);
    // The issue text reached the model sanitized, fenced as context.
    const opening = JSON.stringify(backend.opening(model.requests[opened]?.body));
    expect(opening).toContain("<github_context>");
    expect(opening).not.toContain("push to master");
    const firstRun = await listMessages(db.pool, first.conversationId);
    // The run's 8 messages, then its second look's question and answer.
    expect(firstRun).toHaveLength(10);
    expect(await getConversation(db.pool, first.conversationId)).toMatchObject({
      prNumber,
      branch,
    });
    expectGitHubDone();

    // The follow-up: a mention in a comment on the same issue.
    const followUp = payloadFor("issue_comment", "created", installation);
    followUp.issue.number = n;
    followUp.issue.id += n;
    followUp.comment.id = 9000 + n;
    followUp.comment.body = `@${APP_SLUG} please also end the greeting with an exclamation mark`;
    mockPermission(REPO, "Codertocat", "write");
    github()
      .post(`/repos/${REPO}/issues/comments/${9000 + n}/reactions`)
      .reply(201, { id: 2 });
    const comment2 = mockComment(n, 600 + n, []);
    mockReads(
      n,
      [
        {
          id: 9000 + n,
          user: { login: "Codertocat" },
          body: followUp.comment.body,
          created_at: new Date().toISOString(),
        },
      ],
      backend.config,
    );
    let updated = "";
    github()
      .get(`/repos/${REPO}/pulls/${prNumber}`)
      .reply(200, {
        number: prNumber,
        state: "open",
        html_url: `https://github.com/${REPO}/pull/${prNumber}`,
      })
      .patch(`/repos/${REPO}/pulls/${prNumber}`)
      .reply(async (request: Request) => {
        updated = ((await request.json()) as { body: string }).body;
        return [200, { number: prNumber }];
      });
    const [resumed, ...rest] = fixScript(
      "sed -i 's/Hello World/Hello World!/' README.md",
      "Added the exclamation mark.\n\nSummary: Exclaim the greeting",
    );
    const seen = model.requests.length;
    model.push(
      // biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
      ((request: { body: any }) => {
        // The whole first run comes first, tool calls included, then the new request.
        const messages = request.body.messages;
        if (backend.config === undefined) {
          expect(messages.slice(0, firstRun.length).map(plain)).toEqual(firstRun.map(plain));
        } else {
          const calls = messages.flatMap((m: { tool_calls?: unknown[] }) => m.tool_calls ?? []);
          expect(calls).toHaveLength(3);
          expect(JSON.stringify(calls)).toContain("sed -i 's/Helo/Hello/' README.md");
          expect(messages.filter((m: { role: string }) => m.role === "tool")).toHaveLength(3);
        }
        expect(JSON.stringify(messages.at(-1))).toContain("end the greeting with an exclamation");
        return resumed as FakeReply;
      }) as unknown as FakeReply,
      ...rest,
    );

    const second = await jobFinished(db, (await send("issue_comment", followUp)).id);

    expect(second).toMatchObject({ status: "succeeded", prNumber, branch });
    expect(second.conversationId).toBe(first.conversationId);
    expect(model.requests).toHaveLength(seen + 5);
    expect(sh(remote, `git log --format=%s master..${branch}`)).toBe(
      "Exclaim the greeting\nFix Helo typo",
    );
    expect(sh(remote, `git show ${branch}:README.md`)).toBe("Hello World!");
    expect(updated).toContain(`Fixes #${n}`);
    expect(comment2.at(-1)).toContain(`✅ **Updated pull request #${prNumber}**`);
    expect(await listMessages(db.pool, first.conversationId)).toHaveLength(20);
  });
});

describe("issue to pull request", () => {
  it("a 502 from GitHub on pull request creation is retried by the app's client: one pull request", {
    timeout: 60_000,
  }, async () => {
    const installation = nextInstallation++;
    mockToken(installation, TOKEN);
    mockPermission(REPO, "Codertocat", "write");
    github().post(`/repos/${REPO}/issues/7/reactions`).reply(201, { id: 3 });
    const comment = mockComment(7, 701, []);
    mockReads(7);
    let creations = 0;
    github()
      .get(`/repos/${REPO}/pulls`)
      .query(true)
      .reply(200, [])
      .post(`/repos/${REPO}/pulls`)
      .reply(() => {
        creations++;
        return [502, { message: "Server Error" }];
      })
      .post(`/repos/${REPO}/pulls`)
      .reply(() => {
        creations++;
        return [201, { number: 8, html_url: `https://github.com/${REPO}/pull/8` }];
      });
    fake.push(...fixScript("printf 'Hello World\\n' > README.md", "Summary: Fix the README"));

    const labeled = payloadFor("issues", "labeled", installation);
    labeled.label.name = "vmpilot";
    labeled.issue.number = 7;
    // Another issue: a label event with the first one's ids would be a replay.
    labeled.issue.id += 7;
    const job = await jobFinished(db, (await send("issues", labeled)).id);

    expect(job).toMatchObject({ status: "succeeded", prNumber: 8, attempts: 1 });
    expect(creations).toBe(2);
    expect(comment.at(-1)).toContain(`Pull request: [#8](https://github.com/${REPO}/pull/8)`);
  });
});

describe("a mention while the issue's job runs", () => {
  it("gets 👀 and a queued notice before that job ends, then runs in the same conversation: one pull request", {
    timeout: 90_000,
  }, async () => {
    const n = 21;
    const prNumber = 22;
    const installation = nextInstallation++;
    const mentionId = 9100;
    mockToken(installation, TOKEN);
    mockPermission(REPO, "Codertocat", "write");
    github().post(`/repos/${REPO}/issues/${n}/reactions`).reply(201, { id: 4, content: "eyes" });
    const comment = mockComment(n, 720, []);
    mockReads(n);
    let created = 0;
    github()
      .get(`/repos/${REPO}/pulls`)
      .query(true)
      .reply(200, [])
      .post(`/repos/${REPO}/pulls`)
      .reply(() => {
        created++;
        return [201, { number: prNumber, html_url: `https://github.com/${REPO}/pull/${prNumber}` }];
      });
    // The first job's model holds its first reply until the mention has been acknowledged.
    let modelAsked: () => void = () => {};
    const asked = new Promise<void>((resolve) => {
      modelAsked = resolve;
    });
    let mentionSeen: (status: string | undefined) => void = () => {};
    const seen = new Promise<string | undefined>((resolve) => {
      mentionSeen = resolve;
    });
    const [firstStep, ...firstRest] = fixScript(
      "sed -i 's/Helo/Hello/' README.md",
      "Summary: Fix Helo typo",
    );
    fake.push(
      async () => {
        modelAsked();
        await seen;
        return firstStep as FakeReply;
      },
      ...firstRest,
    );

    const labeled = payloadFor("issues", "labeled", installation);
    labeled.label.name = "vmpilot";
    labeled.issue.number = n;
    labeled.issue.id += n;
    const first = await send("issues", labeled);
    await asked;

    // The mention arrives while the first job waits on its model.
    const mention = payloadFor("issue_comment", "created", installation);
    mention.issue.number = n;
    mention.issue.id += n;
    mention.comment.id = mentionId;
    mention.comment.body = `@${APP_SLUG} please also end the greeting with an exclamation mark`;
    mockPermission(REPO, "Codertocat", "write");
    github().get(`/repos/${REPO}/contents/.github%2Fvmpilot.yml`).reply(404);
    github().get("/repos/Codertocat/.github/contents/.github%2Fvmpilot.yml").reply(404);
    github()
      .post(`/repos/${REPO}/issues/comments/${mentionId}/reactions`)
      .reply(async () => {
        mentionSeen((await getJob(db.pool, first.id))?.status);
        return [201, { id: 5, content: "eyes" }];
      });
    const notice = mockComment(n, 730, []);
    const second = await send("issue_comment", mention);
    // Its own turn, set up now: it starts the moment the first job ends. The same conversation, the
    // same branch and pull request, the notice's comment edited.
    mockPermission(REPO, "Codertocat", "write");
    mockReads(n, [
      {
        id: mentionId,
        user: { login: "Codertocat" },
        body: mention.comment.body,
        created_at: new Date().toISOString(),
      },
    ]);
    github()
      .get(`/repos/${REPO}/pulls/${prNumber}`)
      .reply(200, {
        number: prNumber,
        state: "open",
        html_url: `https://github.com/${REPO}/pull/${prNumber}`,
      })
      .patch(`/repos/${REPO}/pulls/${prNumber}`)
      .reply(200, { number: prNumber });
    fake.push(...fixScript("sed -i 's/Hello World/Hello World!/' README.md", "Summary: Exclaim"));

    expect(await seen, "the first job's state when the mention got its 👀").toBe("running");
    expect(await jobFinished(db, first.id)).toMatchObject({ status: "succeeded", prNumber });
    expect(notice[0]).toBe(
      [
        `👀 **vmpilot got it** — [job #${second.id}](https://vmpilot.test/jobs/${second.id})`,
        "",
        `Queued \`fix\` for @Codertocat behind [job #${first.id}](https://vmpilot.test/jobs/${first.id}). It continues the same conversation when those are done; this comment is updated then.`,
        "",
        `<!-- vmpilot:job:${second.id} -->`,
      ].join("\n"),
    );

    const done = await jobFinished(db, second.id);

    expect(done).toMatchObject({
      status: "succeeded",
      prNumber,
      conversationId: first.conversationId,
    });
    expect(created).toBe(1);
    expect(comment.at(-1)).toContain(`Opened draft pull request #${prNumber}`);
    expect(notice.at(-1)).toContain(`Updated pull request #${prNumber}`);
    expect(
      sh(remote, "git show vmpilot/issue-21-spelling-error-in-the-readme-file:README.md"),
    ).toBe("Hello World!");
  });
});
