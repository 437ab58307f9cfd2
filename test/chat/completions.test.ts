// The chat face with the official `openai` npm client as the client: the real server, store,
// queue, worker and sandbox in-process, the model behind the Anthropic fake at its HTTP edge.
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import { createApiKey } from "../../src/store/api-keys.ts";
import type { Database } from "../../src/store/database.ts";
import { upsertInstallation, upsertRepository } from "../../src/store/installations.ts";
import { getJob } from "../../src/store/jobs.ts";
import { seedServedRepo } from "../e2e/remote.ts";
import {
  type AnthropicFake,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { APP_SLUG, startTestServer, testConfig } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { type GitHttpServer, startGitHttpServer } from "../helpers/git-http-server.ts";
import {
  expectGitHubDone,
  github,
  mockApp,
  mockInstallationToken,
  mockPermission,
  mockRepoConfig,
  useGitHubMock,
} from "../helpers/github-mock.ts";
import { sh } from "../jobs/pipeline-harness.ts";

useGitHubMock();

const OPERATOR_KEY = `op-${"k".repeat(40)}`;
const REPO = "acme/widgets";
const GIT_TOKEN = `ghs_${"chatInstallationTok".repeat(2)}`;

let base: string;
let db: Database;
let fake: AnthropicFake;
let server: RunningServer;
let operator: OpenAI;
let git: GitHttpServer;

function client(apiKey: string): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${server.url}/v1`, maxRetries: 0 });
}

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-chat-")));
  fake = await startAnthropicFake();
  git = await startGitHttpServer({ projectRoot: join(base, "served"), token: GIT_TOKEN });
  db = await openTestDatabase();
  await upsertInstallation(db.pool, { id: 77, accountLogin: "acme", accountType: "Organization" });
  await upsertRepository(db.pool, { id: 700, installationId: 77, fullName: REPO });
  mockApp(APP_SLUG);
  server = await startTestServer(db, {
    config: testConfig({ apiKey: OPERATOR_KEY }),
    chat: { pollIntervalMs: 20, cloneUrl: (fullName) => git.url(`${fullName}.git`) },
    work: {
      anthropic: { apiKey: `sk-ant-api03-${"c".repeat(40)}`, baseURL: fake.url, maxRetries: 0 },
      dataDir: join(base, "data"),
      streamRetryDelayMs: 1,
    },
  });
  expectGitHubDone();
  operator = client(OPERATOR_KEY);
});

afterEach(() => {
  expect(fake.problems, "requests the Anthropic fake refused").toEqual([]);
  expect(fake.pending(), "scripted model replies left over").toBe(0);
  expectGitHubDone();
});

afterAll(async () => {
  await server?.close();
  await db?.close();
  await fake?.close();
  await git?.close();
  await rm(base, { recursive: true, force: true });
});

async function collect(stream: AsyncIterable<OpenAI.ChatCompletionChunk>) {
  const chunks: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  const content = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
  return { chunks, content };
}

async function conversationIdOf(completionJobCount: number): Promise<number> {
  const { rows } = await db.pool.query<{ conversation_id: string }>(
    "SELECT conversation_id FROM jobs WHERE trigger = 'chat' ORDER BY id DESC LIMIT 1",
  );
  expect(rows).toHaveLength(completionJobCount > 0 ? 1 : 0);
  return Number(rows[0]?.conversation_id);
}

describe("the chat face", () => {
  it("lists the models a key may use: the repositories its owner may use, and scratch with one", async () => {
    const all = await operator.models.list();
    expect(all.data.map((m) => m.id)).toEqual(["vmpilot", `vmpilot/${REPO}`]);
    expect(all.data[0]).toMatchObject({ object: "model", owned_by: "vmpilot" });

    const { secret } = await createApiKey(db.pool, {
      name: "laptop",
      ownerLogin: "mona",
      ownerId: 5,
    });
    mockInstallationToken(77);
    github().get("/user/5").reply(200, { login: "mona", id: 5 });
    mockRepoConfig(REPO);
    mockPermission(REPO, "mona", "read");
    const mine = await client(secret).models.list();
    expect(mine.data.map((m) => m.id)).toEqual([]);
  });

  it("streams a scratch turn, then a second request with the history continues the same workspace and chat", async () => {
    fake.push(
      {
        content: [
          text("Writing the file."),
          toolUse("bash", { command: "printf 'hi\\n' > hello.txt && cat hello.txt" }),
        ],
      },
      { content: [text("Created hello.txt.\n\nSummary: Add hello.txt")] },
    );
    const first = await collect(
      await operator.chat.completions.create({
        model: "vmpilot",
        messages: [
          { role: "system", content: "Answer tersely." },
          { role: "user", content: "make hello.txt" },
        ],
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(first.chunks[0]?.choices[0]?.delta).toMatchObject({ role: "assistant" });
    expect(first.chunks[0]?.object).toBe("chat.completion.chunk");
    expect(first.content).toContain("_working…_");
    expect(first.content).toContain("$ printf 'hi\\n' > hello.txt && cat hello.txt");
    expect(first.content).toMatch(/```text\nhi\n```/);
    expect(first.content).toContain("Created hello.txt.");
    expect(first.content).toMatch(/Tokens: \d+ in, \d+ out · cost \$/);
    const finish = first.chunks.find((c) => c.choices[0]?.finish_reason === "stop");
    expect(finish).toBeDefined();
    const usage = first.chunks.at(-1)?.usage;
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    // What the turn cost, beside the tokens: its job's figure.
    const turn = await db.pool.query<{ cost: number }>(
      "SELECT cost_usd::float8 AS cost FROM jobs ORDER BY id DESC LIMIT 1",
    );
    expect(turn.rows[0]?.cost).toBeGreaterThan(0);
    expect((usage as { cost?: number } | undefined)?.cost).toBe(turn.rows[0]?.cost);
    // The client's system message reached the agent's instructions, after vmpilot's own rules.
    expect(JSON.stringify(fake.requests[0]?.body.system)).toContain("Answer tersely.");
    const conversationId = await conversationIdOf(1);

    fake.push(
      { content: [toolUse("bash", { command: "cat hello.txt" })] },
      { content: [text("It says hi.")] },
    );
    const second = await operator.chat.completions.create({
      model: "vmpilot",
      messages: [
        { role: "system", content: "Answer tersely." },
        { role: "user", content: "make hello.txt" },
        { role: "assistant", content: first.content },
        { role: "user", content: "what does it say?" },
      ],
    });
    expect(second.object).toBe("chat.completion");
    const reply = second.choices[0]?.message.content ?? "";
    // Not streamed: the reply is the answer alone, without the placeholder a stream starts with.
    expect(reply).toMatch(/^```bash\n\$ cat hello\.txt\n```/);
    expect(reply).toMatch(/```text\nhi\n```/);
    expect(reply).toContain("It says hi.");
    expect(second.usage?.total_tokens).toBeGreaterThan(0);
    expect(await conversationIdOf(1)).toBe(conversationId);
    // The agent's own history (its tool calls, which the client never saw) came along.
    const sent = JSON.stringify(fake.requests.at(-2)?.body.messages);
    expect(sent).toContain("printf 'hi");
  });

  it("a regenerate goes back to the earlier turn's workspace, in a branch of the conversation", async () => {
    const ask = (messages: OpenAI.ChatCompletionMessageParam[]) =>
      operator.chat.completions.create({ model: "vmpilot", messages });
    fake.push(
      { content: [toolUse("bash", { command: "echo one > state.txt" })] },
      { content: [text("Wrote one.")] },
    );
    const one =
      (await ask([{ role: "user", content: "write one" }])).choices[0]?.message.content ?? "";
    const firstConversation = await conversationIdOf(1);
    fake.push(
      { content: [toolUse("bash", { command: "echo two > state.txt" })] },
      { content: [text("Wrote two.")] },
    );
    const history: OpenAI.ChatCompletionMessageParam[] = [
      { role: "user", content: "write one" },
      { role: "assistant", content: one },
      { role: "user", content: "now write two" },
    ];
    await ask(history);
    expect(await conversationIdOf(1)).toBe(firstConversation);

    // The client regenerates the last reply: the same history again.
    fake.push(
      { content: [toolUse("bash", { command: "cat state.txt" })] },
      { content: [text("Read it.")] },
    );
    const again = (await ask(history)).choices[0]?.message.content ?? "";
    expect(again).toMatch(/```text\none\n```/);
    expect(await conversationIdOf(1)).not.toBe(firstConversation);
  });

  it("a repository turn that asks for a pull request pushes a vmpilot/* branch and opens a draft", async () => {
    const repo = "acme/gadgets";
    await upsertInstallation(db.pool, { id: 88, accountLogin: "acme" });
    await upsertRepository(db.pool, { id: 800, installationId: 88, fullName: repo });
    const remote = seedServedRepo(base, repo);
    github()
      .post("/app/installations/88/access_tokens")
      .reply(201, {
        token: GIT_TOKEN,
        expires_at: new Date(Date.now() + 3_600_000).toISOString(),
        permissions: { contents: "write", pull_requests: "write" },
        repository_selection: "all",
      });
    mockRepoConfig(repo);
    let opened: Record<string, unknown> = {};
    let remoteReadme = "";
    github()
      .get(`/repos/${repo}/pulls`)
      .query(true)
      .reply(200, [])
      .post(`/repos/${repo}/pulls`)
      .reply(async (request: Request) => {
        opened = (await request.json()) as Record<string, unknown>;
        // The pull request is asked for only once the branch is on the remote.
        remoteReadme = sh(remote, `git show ${String(opened.head)}:README.md`);
        return [201, { number: 7, html_url: `https://github.com/${repo}/pull/7` }];
      });
    fake.push(
      {
        content: [
          toolUse("bash", { command: "sed -i 's/Helo/Hello/' README.md && sh test.sh && echo ok" }),
        ],
      },
      { content: [text("Fixed the greeting.\n\nSummary: Fix the README greeting")] },
    );
    const reply = await operator.chat.completions.create({
      model: `vmpilot/${repo}`,
      messages: [{ role: "user", content: "fix the typo in the README\n/vmpilot pr" }],
    });
    const conversationId = await conversationIdOf(1);
    expect(opened).toMatchObject({
      head: `vmpilot/chat-${conversationId}`,
      base: "master",
      title: "Fix the README greeting",
      draft: true,
    });
    expect(remoteReadme).toBe("Hello World");
    expect(sh(remote, "git show master:README.md")).toBe("Helo World");
    const content = reply.choices[0]?.message.content ?? "";
    expect(content).toContain(`Draft pull request: https://github.com/${repo}/pull/7`);
    // The person's words reached the model without the command line.
    expect(JSON.stringify(fake.requests.at(-2)?.body.messages)).not.toContain("/vmpilot pr");

    // A later turn of the conversation asks again: its branch exists now, and is pushed on top,
    // with the same pull request, based on the default branch as before (the installation's
    // token is still the one the first turn got).
    mockRepoConfig(repo);
    let updated: Record<string, unknown> = {};
    github()
      .get(`/repos/${repo}/pulls`)
      .query({ head: `acme:vmpilot/chat-${conversationId}`, state: "open", per_page: 10 })
      .reply(200, [
        {
          number: 7,
          html_url: `https://github.com/${repo}/pull/7`,
          head: { ref: `vmpilot/chat-${conversationId}` },
        },
      ])
      .patch(`/repos/${repo}/pulls/7`)
      .reply(async (request: Request) => {
        updated = (await request.json()) as Record<string, unknown>;
        return [200, { number: 7 }];
      });
    fake.push(
      { content: [toolUse("bash", { command: "echo '# Widgets' > NOTES.md" })] },
      { content: [text("Added notes.\n\nSummary: Add notes")] },
    );
    const second = await operator.chat.completions.create({
      model: `vmpilot/${repo}`,
      messages: [
        { role: "user", content: "fix the typo in the README\n/vmpilot pr" },
        { role: "assistant", content },
        { role: "user", content: "add a NOTES.md\n/vmpilot pr" },
      ],
    });
    expect(await conversationIdOf(1)).toBe(conversationId);
    const head = `vmpilot/chat-${conversationId}`;
    expect(sh(remote, `git show ${head}:NOTES.md`)).toBe("# Widgets");
    expect(sh(remote, `git show ${head}:README.md`)).toBe("Hello World");
    expect(sh(remote, "git show master:README.md")).toBe("Helo World");
    expect(String(updated.body)).toContain("NOTES.md");
    expect(second.choices[0]?.message.content ?? "").toContain(
      `Draft pull request: https://github.com/${repo}/pull/7`,
    );
  });

  it("a client's own chat id keeps the conversation when the history it sends back differs", async () => {
    const options = { headers: { "x-openwebui-chat-id": "owui-chat-1" } };
    fake.push({ content: [text("Noted: blue.")] });
    await operator.chat.completions.create(
      { model: "vmpilot", messages: [{ role: "user", content: "remember blue" }] },
      options,
    );
    const conversationId = await conversationIdOf(1);
    fake.push({ content: [text("Blue.")] });
    await operator.chat.completions.create(
      {
        model: "vmpilot",
        messages: [
          { role: "user", content: "remember blue" },
          // The client kept only the words, not vmpilot's whole reply.
          { role: "assistant", content: "Noted: blue." },
          { role: "user", content: "which colour?" },
        ],
      },
      options,
    );
    expect(await conversationIdOf(1)).toBe(conversationId);
    // The agent got its stored history, and no transcript of it as new context.
    const sent = JSON.stringify(fake.requests.at(-1)?.body.messages);
    expect(sent).toContain("remember blue");
    expect(sent).not.toContain("The conversation so far");
  });

  it("answers Open WebUI's title and follow-up chores at once, with no turn, workspace or cost", async () => {
    const jobs = async () =>
      Number((await db.pool.query("SELECT count(*) AS n FROM jobs")).rows[0]?.n);
    const before = await jobs();
    const chore = (output: string) =>
      `### Task:\nGenerate a concise, 3-5 word title.\n### Output:\n${output}\n### Chat History:\n<chat_history>\nUSER: fix the flaky login test please\nASSISTANT: _working…_\n</chat_history>`;
    const title = await operator.chat.completions.create({
      model: "vmpilot",
      messages: [
        { role: "user", content: chore('JSON format: { "title": "your concise title here" }') },
      ],
    });
    expect(JSON.parse(title.choices[0]?.message.content ?? "")).toEqual({
      title: "fix the flaky login test please",
    });
    expect(title.usage?.total_tokens).toBe(0);
    const followUps = await collect(
      await operator.chat.completions.create({
        model: "vmpilot",
        messages: [
          { role: "user", content: chore('JSON format: { "follow_ups": ["Question 1?"] }') },
        ],
        stream: true,
      }),
    );
    expect(JSON.parse(followUps.content)).toEqual({ follow_ups: [] });
    expect(await jobs()).toBe(before);
  });

  it("a client that disconnects cancels the turn", async () => {
    fake.push({ content: [toolUse("bash", { command: "echo started && sleep 60" })] });
    const stream = await operator.chat.completions.create({
      model: "vmpilot",
      messages: [{ role: "user", content: "wait a minute" }],
      stream: true,
    });
    let seen = "";
    for await (const chunk of stream) {
      seen += chunk.choices[0]?.delta.content ?? "";
      if (seen.includes("sleep 60")) break;
    }
    const { rows } = await db.pool.query<{ id: string }>(
      "SELECT id FROM jobs WHERE trigger = 'chat' ORDER BY id DESC LIMIT 1",
    );
    const jobId = Number(rows[0]?.id);
    await vi.waitFor(async () => expect((await getJob(db.pool, jobId))?.status).toBe("cancelled"), {
      timeout: 20_000,
      interval: 50,
    });
  });

  it("answers a repository it has no record of from the store, asking GitHub nothing, until the installations are synced", async () => {
    const title = (model: string) =>
      operator.chat.completions.create({
        model,
        messages: [
          {
            role: "user",
            content:
              '### Task:\nGenerate a concise, 3-5 word title.\n### Output:\nJSON format: { "title": "your concise title here" }\n### Chat History:\n<chat_history>\nUSER: tidy up\n</chat_history>',
          },
        ],
      });
    // Installed while no webhook reached this database: unknown (nock would refuse a call to GitHub)
    // until the installation sync records it.
    for (let i = 0; i < 2; i++) {
      await expect(title("vmpilot/acme/tools")).rejects.toMatchObject({
        status: 404,
        code: "model_not_found",
      });
    }
    await upsertInstallation(db.pool, {
      id: 99,
      accountLogin: "acme",
      accountType: "Organization",
    });
    await upsertRepository(db.pool, { id: 990, installationId: 99, fullName: "acme/tools" });
    expect((await title("vmpilot/acme/tools")).model).toBe("vmpilot/acme/tools");
    expect((await operator.models.list()).data.map((m) => m.id)).toContain("vmpilot/acme/tools");
  });

  it("answers a bad key, an unknown model, a malformed body and a spent budget in OpenAI's error format", async () => {
    const bad = await client("sk-wrong")
      .models.list()
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(bad).toMatchObject({ status: 401, code: "invalid_api_key" });

    const unknown = await operator.chat.completions
      .create({ model: "vmpilot/acme/nothing", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown).toMatchObject({ status: 404, code: "model_not_found" });

    const malformed = await operator.chat.completions
      .create({ model: "vmpilot", messages: [] })
      .catch((e: unknown) => e);
    expect(malformed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(malformed).toMatchObject({ status: 400, type: "invalid_request_error" });

    const { secret } = await createApiKey(db.pool, {
      name: "ci",
      ownerLogin: "spender",
      ownerId: 9,
    });
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO conversations (kind, api_owner, api_owner_id) VALUES ('api', 'spender', 9) RETURNING id`,
    );
    await db.pool.query(
      `INSERT INTO jobs (conversation_id, repo, trigger, requester, status, cost_usd, finished_at)
       VALUES ($1, 'scratch', 'chat', 'spender', 'succeeded', 1000, now())`,
      [rows[0]?.id],
    );
    // Scratch is for someone who may use a repository: the first by name will do.
    github().get("/user/9").reply(200, { login: "spender", id: 9 });
    mockPermission("acme/gadgets", "spender", "write");
    const spent = await client(secret)
      .chat.completions.create({ model: "vmpilot", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(spent).toBeInstanceOf(OpenAI.RateLimitError);
    expect(spent).toMatchObject({ status: 429, code: "insufficient_quota" });
  });
});

describe("whose conversation it is", () => {
  const remember = (colour: string) => [{ role: "user" as const, content: `remember ${colour}` }];
  const followUp = (colour: string, reply: string) => [
    ...remember(colour),
    { role: "assistant" as const, content: reply },
    { role: "user" as const, content: "which colour?" },
  ];

  it("a key whose owner's login is 'operator' neither continues the operator's conversation nor shares its budget", async () => {
    const options = { headers: { "x-openwebui-chat-id": "owui-operator-1" } };
    fake.push({ content: [text("Noted: red.")] });
    const first = await operator.chat.completions.create(
      { model: "vmpilot", messages: remember("red") },
      options,
    );
    const operatorConversation = await conversationIdOf(1);
    // The operator's scratch conversations spent today's budget.
    const spent = await db.pool.query<{ id: string }>(
      `INSERT INTO jobs (conversation_id, repo, trigger, requester, status, cost_usd, finished_at, context)
       VALUES ($1, 'scratch', 'chat', 'operator', 'succeeded', 1000, now(), '{"operator": true}')
       RETURNING id`,
      [operatorConversation],
    );
    try {
      const { secret } = await createApiKey(db.pool, {
        name: "laptop",
        ownerLogin: "operator",
        ownerId: 4242,
      });
      github().get("/user/4242").reply(200, { login: "operator", id: 4242 });
      mockPermission("acme/gadgets", "operator", "write");
      fake.push({ content: [text("You have not told me a colour yet.")] });
      const reply = await client(secret).chat.completions.create(
        { model: "vmpilot", messages: followUp("red", first.choices[0]?.message.content ?? "") },
        options,
      );
      expect(reply.choices[0]?.message.content).toContain("You have not told me a colour yet.");
      expect(await conversationIdOf(1)).not.toBe(operatorConversation);
      // What the client sent came as its context; none of the operator's stored conversation did.
      const sent = JSON.stringify(fake.requests.at(-1)?.body.messages);
      expect(sent).toContain("The conversation so far");
    } finally {
      await db.pool.query("DELETE FROM jobs WHERE id = $1", [spent.rows[0]?.id]);
    }
  });

  it("a login given up and registered by someone else brings them none of its conversations", async () => {
    const old = await createApiKey(db.pool, { name: "old", ownerLogin: "alice", ownerId: 501 });
    // Alice renamed herself: her key acts under the login she has now.
    github().get("/user/501").reply(200, { login: "alice-renamed", id: 501 });
    mockPermission("acme/gadgets", "alice-renamed", "write");
    fake.push({ content: [text("Noted: green.")] });
    const first = await client(old.secret).chat.completions.create({
      model: "vmpilot",
      messages: remember("green"),
    });
    const aliceConversation = await conversationIdOf(1);
    const { rows } = await db.pool.query<{ requester: string }>(
      "SELECT requester FROM jobs WHERE conversation_id = $1",
      [aliceConversation],
    );
    expect(rows).toEqual([{ requester: "alice-renamed" }]);

    const taken = await createApiKey(db.pool, { name: "new", ownerLogin: "alice", ownerId: 777 });
    github().get("/user/777").reply(200, { login: "alice", id: 777 });
    mockPermission("acme/gadgets", "alice", "write");
    fake.push({ content: [text("You have not told me a colour yet.")] });
    await client(taken.secret).chat.completions.create({
      model: "vmpilot",
      messages: followUp("green", first.choices[0]?.message.content ?? ""),
    });
    expect(await conversationIdOf(1)).not.toBe(aliceConversation);
  });
});
