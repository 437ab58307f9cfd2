import { ProbotOctokit } from "probot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRepoConfig } from "../../src/github/repo-config-loader.ts";
import { createAutomationConversation } from "../../src/store/conversations.ts";
import { getRepository, setRepositorySettings } from "../../src/store/installations.ts";
import { insertJob, type Job, updateJob } from "../../src/store/jobs.ts";
import type { FakeRepo } from "./helpers/github-fake.ts";
import { Client, startWebHarness, type WebHarness } from "./helpers/harness.ts";

let h: WebHarness;
let privateApp: FakeRepo;
let publicLib: FakeRepo;
let publicOpen: FakeRepo;
const clients: Record<string, Client> = {};
const USER_IDS = { alice: 1000, bob: 1001, carol: 1002, dave: 1003 };

beforeAll(async () => {
  h = await startWebHarness();
  privateApp = await h.addRepo({
    id: 501,
    installationId: 10,
    fullName: "acme/private-app",
    private: true,
    access: { alice: "admin", bob: "write", carol: "read" },
  });
  publicLib = await h.addRepo({
    id: 502,
    installationId: 10,
    fullName: "acme/public-lib",
    private: false,
    access: { alice: "admin" },
  });
  publicOpen = await h.addRepo({
    id: 503,
    installationId: 11,
    fullName: "octo/public-open",
    private: false,
    access: { erin: "admin" },
  });
  await setRepositorySettings(h.db.pool, publicOpen.id, { publicJobs: true });
  for (const [login, id] of Object.entries(USER_IDS)) {
    clients[login] = new Client(h.url);
    await clients[login].signIn(h.github, login, "/", id);
  }
});

afterAll(async () => {
  await h.close();
  expect(h.github.problems).toEqual([]);
});

const as = (login: string) => clients[login] as Client;

describe("every page", () => {
  it("sends the security headers", async () => {
    for (const path of ["/", "/static/vmpilot.css", "/jobs/999999", "/login"]) {
      const res = await as("alice").get(path);
      expect(res.headers.get("content-security-policy")).toMatch(/default-src 'self'/);
      expect(res.headers.get("content-security-policy")).not.toMatch(/unsafe-inline/);
      expect(res.headers.get("x-frame-options")).toBe("DENY");
      expect(res.headers.get("referrer-policy")).toBe("same-origin");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    }
  });

  it("sends visitors who are not signed in to the sign-in page", async () => {
    const anonymous = new Client(h.url);
    for (const path of ["/settings", "/jobs", "/usage", "/settings/acme/private-app"]) {
      const res = await anonymous.get(path);
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toBe(`/login?next=${encodeURIComponent(path)}`);
    }
  });

  it("never puts the user's GitHub token into a page", async () => {
    for (const path of ["/", "/settings", "/settings/acme/private-app", "/jobs", "/usage"]) {
      const res = await as("alice").get(path);
      expect(res.status).toBe(200);
      expect(await res.text()).not.toMatch(/ghu_/);
    }
  });

  it("leaves paths it does not serve to the next handler", async () => {
    const res = await as("alice").get("/api/github/webhooks");
    expect(res.status).toBe(404);
    expect(await res.text()).toBe("not found");
  });
});

describe("/settings", () => {
  it("lists the repositories the user administers, as GitHub reports them", async () => {
    const before = h.github.requests.length;
    const page = await (await as("alice").get("/settings")).text();
    expect(page).toContain('href="/settings/acme/private-app"');
    expect(page).toContain('href="/settings/acme/public-lib"');
    expect(page).not.toContain("octo/public-open");
    expect(h.github.requests.slice(before)).toEqual([
      "GET /api/v3/user/installations",
      "GET /api/v3/user/installations/10/repositories",
    ]);
  });

  it("shows a writer no repository and no settings form", async () => {
    const page = await (await as("bob").get("/settings")).text();
    expect(page).toContain("You administer no repository");
    const form = await as("bob").get("/settings/acme/private-app");
    expect(form.status).toBe(404);
  });

  it("does not let a writer save settings", async () => {
    const csrf = Client.csrf(await (await as("bob").get("/")).text());
    const res = await as("bob").post("/settings/acme/private-app", { csrf, label: "pwned" });
    expect(res.status).toBe(404);
    expect((await getRepository(h.db.pool, privateApp.id))?.settings).toEqual({});
  });

  it("shows an admin the form with each value's source", async () => {
    const res = await as("alice").get("/settings/acme/private-app");
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(page).toMatch(
      /<label for="f-label">Trigger label <span class="source source-default">default<\/span>/,
    );
    expect(page).toContain('id="f-label" name="label"');
    expect(page).toContain('value="vmpilot"');
    expect(page).toContain('name="plugins" value="code_review"');
  });

  it("saves valid settings, storing only what differs from the defaults", async () => {
    const client = as("alice");
    const csrf = Client.csrf(await (await client.get("/settings/acme/private-app")).text());
    const res = await client.post("/settings/acme/private-app", {
      csrf,
      enabled: "on",
      label: "ai-fix",
      triggerPolicy: "allow-list",
      allowedUsers: "carol, bob\n",
      model: "",
      maxSteps: "50",
      maxCostUsd: "2.5",
      maxDailyCostUsd: "",
      setup: "npm ci\n\nnpm run build",
      "network.allow": "registry.npmjs.org\n*.pypi.org:443",
      plugins: ["code_review"],
      // Checked by default, as the browser sends them.
      "ci.autofix": "on",
      readyForReview: "on",
    });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/settings/acme/private-app?saved=1");
    expect((await getRepository(h.db.pool, privateApp.id))?.settings).toEqual({
      label: "ai-fix",
      triggerPolicy: "allow-list",
      allowedUsers: ["carol", "bob"],
      maxCostUsd: 2.5,
      setup: ["npm ci", "npm run build"],
      network: { allow: ["registry.npmjs.org", "*.pypi.org:443"] },
      plugins: ["code_review"],
    });
    const page = await (await client.get("/settings/acme/private-app?saved=1")).text();
    expect(page).toContain('role="status">Saved.');
    expect(page).toMatch(/Trigger label <span class="source source-page">set on this page/);
    expect(page).toContain('value="ai-fix"');
    expect(page).toContain('value="2.5"');
    expect(page).toMatch(/name="plugins" value="code_review" checked/);
    // publicJobs was not submitted: an unchecked box is false, which is the default.
    expect(page).toMatch(/Public job pages<\/label> <span class="source source-default">/);
  });

  it("rejects invalid values with an error next to each field, keeping what was typed", async () => {
    const client = as("alice");
    const stored = (await getRepository(h.db.pool, privateApp.id))?.settings;
    const csrf = Client.csrf(await (await client.get("/settings/acme/private-app")).text());
    const res = await client.post("/settings/acme/private-app", {
      csrf,
      label: "ok",
      maxSteps: "0",
      maxCostUsd: "-3",
      allowedUsers: "carol\nnot a user!",
      "network.allow": "http://example.com/path",
    });
    expect(res.status).toBe(422);
    const page = await res.text();
    expect(page).toContain('<p class="error" id="f-maxSteps-error">Must be at least 1.</p>');
    expect(page).toContain('<p class="error" id="f-maxCostUsd-error">Must be greater than 0.</p>');
    expect(page).toMatch(/id="f-allowedUsers-error">“not a user!”: must be a GitHub user name/);
    expect(page).toMatch(
      /id="f-network-allow-error">“http:\/\/example.com\/path”: must be a host name/,
    );
    expect(page).toMatch(
      /id="f-maxSteps" name="maxSteps" aria-describedby="f-maxSteps-hint f-maxSteps-error" aria-invalid="true"/,
    );
    expect(page).toContain('value="-3"');
    expect(page).toContain('<a href="#f-maxSteps">Max steps per job: Must be at least 1.</a>');
    expect((await getRepository(h.db.pool, privateApp.id))?.settings).toEqual(stored);
  });

  it("lists the configured model providers and refuses a model no configured provider serves", async () => {
    const client = as("alice");
    const form = await (await client.get("/settings/acme/private-app")).text();
    expect(form).toContain("Configured providers: anthropic, ollama.");
    const csrf = Client.csrf(form);
    const refused = await client.post("/settings/acme/private-app", {
      csrf,
      model: "openrouter/qwen/qwen3-coder",
    });
    expect(refused.status).toBe(422);
    expect(await refused.text()).toContain(
      'id="f-model-error">The model openrouter/qwen/qwen3-coder is served by &quot;openrouter&quot;, which is not configured (configured: anthropic, ollama)',
    );
    const saved = await client.post("/settings/acme/private-app", {
      csrf,
      model: "ollama/qwen3-coder:30b",
    });
    expect(saved.status).toBe(303);
    expect((await getRepository(h.db.pool, privateApp.id))?.settings).toMatchObject({
      model: "ollama/qwen3-coder:30b",
    });
  });

  it("refuses a form without the session's CSRF token", async () => {
    const stored = (await getRepository(h.db.pool, privateApp.id))?.settings;
    const missing = await as("alice").post("/settings/acme/private-app", { label: "csrf" });
    expect(missing.status).toBe(403);
    const othersToken = Client.csrf(await (await as("bob").get("/")).text());
    const wrong = await as("alice").post("/settings/acme/private-app", {
      csrf: othersToken,
      label: "csrf",
    });
    expect(wrong.status).toBe(403);
    const json = await as("alice").request("/settings/acme/private-app", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ label: "csrf" }),
    });
    expect(json.status).toBe(415);
    expect((await getRepository(h.db.pool, privateApp.id))?.settings).toEqual(stored);
  });

  it("shows the repo file's values winning over the page's", async () => {
    publicLib.configFile = "label: from-file\nmaxSteps: 7\n";
    await setRepositorySettings(h.db.pool, publicLib.id, { label: "from-page", maxCostUsd: 1 });
    const page = await (await as("alice").get("/settings/acme/public-lib")).text();
    expect(page).toMatch(
      /Trigger label <span class="source source-file">from .github\/vmpilot.yml/,
    );
    expect(page).toMatch(/sets this to <strong>from-file<\/strong>,\s*which takes precedence/);
    expect(page).toMatch(/Max cost per job \(USD\) <span class="source source-page">/);
    expect(page).toMatch(/Model <span class="source source-default">/);
  });

  it("reads the owner's .github repository as a job does: the page and the job agree", async () => {
    const orgWide: FakeRepo = {
      id: 599,
      installationId: 10,
      fullName: "acme/.github",
      private: false,
      access: {},
      configFile: "label: org-wide\nmaxSteps: 11\n",
    };
    h.github.repos.push(orgWide);
    try {
      const page = await (await as("alice").get("/settings/acme/private-app")).text();
      expect(page).toMatch(/sets this to <strong>org-wide<\/strong>,\s*which takes precedence/);
      // The worker's loader, as a job calls it (there with the installation's token).
      const octokit = new ProbotOctokit({ baseUrl: h.github.apiUrl });
      const job = await loadRepoConfig(octokit, { owner: "acme", repo: "private-app" });
      expect(job).toEqual({
        ok: true,
        config: { label: "org-wide", maxSteps: 11 },
        source: "acme/.github/.github/vmpilot.yml",
      });
    } finally {
      h.github.repos.splice(h.github.repos.indexOf(orgWide), 1);
    }
  });

  it("says when the repo file is invalid, naming the key", async () => {
    publicLib.configFile = "label: x\nmaxStep: 7\n";
    const page = await (await as("alice").get("/settings/acme/public-lib")).text();
    expect(page).toContain("is invalid and is ignored until it is fixed: maxStep: unknown key");
    delete publicLib.configFile;
  });
});

describe("/jobs", () => {
  let privateJob: Job;
  let publicJob: Job;
  let openJob: Job;

  beforeAll(async () => {
    privateJob = await h.addJob(privateApp, {
      status: "succeeded",
      prNumber: 42,
      costUsd: 0.1234,
      startedAt: new Date(Date.now() - 90_000),
      finishedAt: new Date(),
      usage: { inputTokens: 1000, outputTokens: 200, cacheReadInputTokens: 5000 },
    });
    publicJob = await h.addJob(publicLib, {
      status: "failed",
      error: "token ghs_abcdefghijklmnopqrstuvwxyz0123 leaked",
    });
    openJob = await h.addJob(publicOpen, { status: "succeeded" });
    await h.addEvent(privateJob, "acknowledged", { message: "vmpilot is on it" });
    await h.addEvent(privateJob, "step_started", { step: 1 });
    await h.addEvent(privateJob, "text", {
      step: 1,
      text: "Let me look. <script>alert(1)</script>",
    });
    await h.addEvent(privateJob, "tool_call", {
      step: 1,
      id: "t1",
      name: "bash",
      input: { command: "cat <img src=x onerror=alert(1)>" },
    });
    await h.addEvent(privateJob, "tool_result", {
      step: 1,
      id: "t1",
      name: "bash",
      isError: false,
      output: "GH_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789\nok",
      durationMs: 1500,
    });
    await h.addEvent(privateJob, "tool_call", {
      step: 1,
      id: "t2",
      name: "str_replace_based_edit_tool",
      input: {
        command: "str_replace",
        path: "src/a.ts",
        old_str: "const a = 1;\n",
        new_str: "const a = 2;\n",
      },
    });
    await h.addEvent(privateJob, "usage", {
      step: 1,
      turn: {
        inputTokens: 1000,
        outputTokens: 200,
        cacheReadInputTokens: 5000,
        cacheCreationInputTokens: 0,
        costUsd: 0.1234,
      },
      totals: { costUsd: 0.1234 },
    });
  });

  it("lists a reader's jobs per repository with status, trigger, requester, links and cost", async () => {
    const page = await (await as("carol").get("/jobs")).text();
    expect(page).toContain("acme/private-app");
    expect(page).toContain(`<a href="/jobs/${privateJob.id}">#${privateJob.id}</a>`);
    expect(page).toContain('class="status status-succeeded">succeeded');
    expect(page).toContain(`href="${h.github.webUrl}/acme/private-app/pull/42"`);
    expect(page).toContain(
      `href="${h.github.webUrl}/acme/private-app/issues/${privateJob.number}"`,
    );
    expect(page).toContain("$0.1234");
    expect(page).toMatch(/1 min 30 s|1 min 29 s|1 min 31 s/);
    expect(page).not.toContain("acme/public-lib"); // carol has no explicit access there
  });

  it("shows a reader the job log: escaped text, redacted output, commands and diffs", async () => {
    const res = await as("carol").get(`/jobs/${privateJob.id}`);
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(page).toContain("Let me look. &lt;script&gt;alert(1)&lt;/script&gt;");
    expect(page).not.toContain("<script>alert");
    expect(page).toContain("cat &lt;img src=x onerror=alert(1)&gt;");
    expect(page).toContain("GH_TOKEN=[REDACTED]");
    expect(page).not.toContain("ghp_abc");
    expect(page).toMatch(/<details><summary>Output of bash \(2 lines, 1.5 s\)<\/summary>/);
    expect(page).toContain(
      '<span class="del">- const a = 1;</span><span class="add">+ const a = 2;</span>',
    );
    expect(page).toContain("Tokens: 1,000 in, 200 out, 5,000 cache · cost $0.1234");
    expect(page).toContain("<strong>Acknowledged</strong>");
    expect(page).not.toContain("/static/live.js"); // finished: nothing to stream
  });

  it("gives a stranger 404 on a private repository's job, signed in or not", async () => {
    expect((await as("dave").get(`/jobs/${privateJob.id}`)).status).toBe(404);
    expect((await new Client(h.url).get(`/jobs/${privateJob.id}`)).status).toBe(404);
    expect((await new Client(h.url).get(`/jobs/${privateJob.id}/events`)).status).toBe(404);
    expect((await as("dave").get("/jobs/987654")).status).toBe(404);
  });

  it("checks access to a job by its repository's id, not by a name another repository now has", async () => {
    // The job was made in a private repository that was renamed since; carol now owns a
    // repository under its old name.
    const renamed = await h.addRepo({
      id: 504,
      installationId: 10,
      fullName: "acme/secret-renamed",
      private: true,
      access: { alice: "admin" },
    });
    await h.addRepo({
      id: 505,
      installationId: 10,
      fullName: "acme/secret",
      private: true,
      access: { carol: "read" },
    });
    const job = await h.addJob({ ...renamed, fullName: "acme/secret" });
    expect((await as("carol").get(`/jobs/${job.id}`)).status).toBe(404);
    expect((await as("carol").get(`/jobs/${job.id}/events`)).status).toBe(404);
    expect((await as("alice").get(`/jobs/${job.id}`)).status).toBe(200);
  });

  it("shows a scheduled automation's run, which has no issue, to the repository's readers", async () => {
    const conversationId = await createAutomationConversation(h.db.pool, privateApp.id);
    const run = await insertJob(h.db.pool, {
      conversationId,
      installationId: privateApp.installationId,
      repositoryId: privateApp.id,
      repo: privateApp.fullName,
      number: null,
      trigger: "automation",
      requester: "vmpilot[bot]",
      instruction: "update the lockfile",
    });
    expect((await as("carol").get(`/jobs/${run.id}`)).status).toBe(200);
    expect((await as("dave").get(`/jobs/${run.id}`)).status).toBe(404);
  });

  it("shows public repositories' jobs to visitors only when publicJobs is on", async () => {
    expect((await new Client(h.url).get(`/jobs/${publicJob.id}`)).status).toBe(404);
    const open = await new Client(h.url).get(`/jobs/${openJob.id}`);
    expect(open.status).toBe(200);
    // Anyone signed in can read a public repository on GitHub, so they see its jobs.
    const page = await (await as("dave").get(`/jobs/${publicJob.id}`)).text();
    expect(page).toContain("token [REDACTED] leaked");
  });

  it("streams new steps of a running job as Server-Sent Events until it finishes", async () => {
    const running = await h.addJob(privateApp, { status: "running", startedAt: new Date() });
    const first = await h.addEvent(running, "step_started", { step: 1 });
    const page = await (await as("carol").get(`/jobs/${running.id}`)).text();
    expect(page).toContain('<script src="/static/live.js" defer></script>');
    expect(page).toContain(`data-after="${first}" data-live="true"`);

    const res = await as("carol").get(`/jobs/${running.id}/events?after=${first}`);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const stream = readEvents(res);
    const second = await h.addEvent(running, "text", { step: 1, text: "Working\non it" });
    const step = await stream.next("step");
    expect(step.id).toBe(String(second));
    expect(step.data).toContain(`<li id="ev-${second}" class="text">`);
    expect(step.data).toContain("Working\non it");
    await h.addEvent(running, "finished", { reason: "end_turn", steps: 1, finalText: "Done" });
    await updateJob(h.db.pool, running.id, { status: "succeeded" });
    expect((await stream.next("step")).data).toContain("<strong>Finished</strong>");
    expect((await stream.next("status")).data).toBe("succeeded");
    expect((await stream.next("end")).data).toBe("succeeded");
  });

  it("keeps a tool's CR and LF inside the event: output cannot forge an end or an id", async () => {
    const running = await h.addJob(privateApp, { status: "running" });
    const forged = "ok\r\nevent: end\r\nid: 999999\r\ndata: forged\r\n\r\nevent: end\rdata: x\r\r";
    const a = await h.addEvent(running, "text", { text: forged });
    const b = await h.addEvent(running, "text", { text: "after" });
    await updateJob(h.db.pool, running.id, { status: "cancelled" });
    const stream = readEvents(await as("carol").get(`/jobs/${running.id}/events?after=0`));
    const first = await stream.next("step");
    expect(first.id).toBe(String(a));
    expect(first.data).toContain("event: end");
    const second = await stream.next("step");
    expect(second.id).toBe(String(b));
    expect(second.data).toContain("after");
    expect((await stream.next("end")).data).toBe("cancelled");
  });

  it("resumes a stream after the Last-Event-ID the browser sends", async () => {
    const running = await h.addJob(privateApp, { status: "running" });
    const a = await h.addEvent(running, "text", { text: "a" });
    const b = await h.addEvent(running, "text", { text: "b" });
    await updateJob(h.db.pool, running.id, { status: "cancelled" });
    const res = await as("carol").get(`/jobs/${running.id}/events?after=0`, {
      "last-event-id": String(a),
    });
    const stream = readEvents(res);
    expect((await stream.next("step")).id).toBe(String(b));
    expect((await stream.next("end")).data).toBe("cancelled");
  });
});

describe("chat-face jobs", () => {
  it("are their owner's alone: listed under their chat turns, hidden from the repository's readers", async () => {
    const conversation = await h.db.pool.query<{ id: string }>(
      `INSERT INTO conversations (kind, api_owner, api_owner_id, repository_id)
       VALUES ('api', 'bob', $1, $2) RETURNING id`,
      [USER_IDS.bob, privateApp.id],
    );
    const inserted = await h.db.pool.query<{ id: string }>(
      `INSERT INTO jobs (conversation_id, installation_id, repository_id, repo, trigger, requester, instruction)
       VALUES ($1, 10, $2, 'acme/private-app', 'chat', 'bob', 'tidy up') RETURNING id`,
      [conversation.rows[0]?.id, privateApp.id],
    );
    const id = inserted.rows[0]?.id as string;
    const bobs = await (await as("bob").get("/jobs")).text();
    expect(bobs).toContain("Your chat turns");
    expect(bobs).toContain(`href="/jobs/${id}"`);
    const page = await (await as("bob").get(`/jobs/${id}`)).text();
    expect(page).toContain(`acme/private-app conversation ${conversation.rows[0]?.id}`);
    const alices = await (await as("alice").get("/jobs")).text();
    expect(alices).not.toContain(`href="/jobs/${id}"`);
    expect((await as("alice").get(`/jobs/${id}`)).status).toBe(404);
  });
});

describe("/keys", () => {
  it("makes a key shown once, stores only its hash, lists it with its hint, and revokes it", async () => {
    const csrf = Client.csrf(await (await as("bob").get("/keys")).text());
    const made = await as("bob").post("/keys", { csrf, name: "Open WebUI" });
    expect(made.status).toBe(200);
    const page = await made.text();
    const secret = /id="new-key"[^>]*value="(vmp_[A-Za-z0-9_-]{43})"/.exec(page)?.[1] as string;
    expect(secret).toBeDefined();
    const stored = await h.db.pool.query("SELECT * FROM api_keys WHERE owner_login = 'bob'");
    expect(stored.rows).toHaveLength(1);
    expect(JSON.stringify(stored.rows)).not.toContain(secret);
    const listed = await (await as("bob").get("/keys")).text();
    expect(listed).not.toContain(secret);
    expect(listed).toContain(`…${secret.slice(-4)}`);
    expect(listed).toContain("Open WebUI");

    const id = String(stored.rows[0]?.id);
    // Another user cannot revoke it, nor can a form without the CSRF token.
    const aliceCsrf = Client.csrf(await (await as("alice").get("/")).text());
    expect((await as("alice").post(`/keys/${id}/revoke`, { csrf: aliceCsrf })).status).toBe(404);
    expect((await as("bob").post(`/keys/${id}/revoke`, {})).status).toBe(403);
    const revoked = await as("bob").post(`/keys/${id}/revoke`, { csrf });
    expect(revoked.status).toBe(303);
    expect(await (await as("bob").get("/keys")).text()).toMatch(/revoked \d{4}-/);
    const live = await h.db.pool.query("SELECT 1 FROM api_keys WHERE revoked_at IS NULL");
    expect(live.rows).toHaveLength(0);
  });

  it("makes at most 20 live keys per person, and says so at the 21st", async () => {
    const csrf = Client.csrf(await (await as("alice").get("/keys")).text());
    for (let i = 1; i <= 20; i++) {
      expect((await as("alice").post("/keys", { csrf, name: `key ${i}` })).status).toBe(200);
    }
    const refused = await as("alice").post("/keys", { csrf, name: "key 21" });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain(
      "You have 20 keys, the most one person may have. Revoke one to make another.",
    );
    const live = await h.db.pool.query(
      "SELECT 1 FROM api_keys WHERE owner_login = 'alice' AND revoked_at IS NULL",
    );
    expect(live.rows).toHaveLength(20);
  });

  it("makes no key for someone who cannot push to any repository of the app", async () => {
    const page = await (await as("carol").get("/keys")).text();
    expect(page).not.toContain('action="/keys"');
    const csrf = Client.csrf(page);
    expect((await as("carol").post("/keys", { csrf, name: "x" })).status).toBe(403);
    const stored = await h.db.pool.query("SELECT 1 FROM api_keys WHERE owner_login = 'carol'");
    expect(stored.rows).toHaveLength(0);
  });
});

describe("/usage", () => {
  it("shows tokens and cost per repository per day, with a chart", async () => {
    const page = await (await as("alice").get("/usage")).text();
    const today = new Date().toISOString().slice(0, 10);
    expect(page).toContain("<svg");
    expect(page).toMatch(/<rect [^>]*class="bar"><title>[0-9-]+: \$[0-9.]+<\/title><\/rect>/);
    expect(page).toMatch(
      new RegExp(
        `<td>${today}</td><td><a href="/jobs\\?repo=acme/private-app">acme/private-app</a></td>\\s*<td class="num">\\d+</td><td class="num">1,000</td><td class="num">200</td>`,
      ),
    );
    expect(page).toContain("$0.1234");
  });

  it("leaves out repositories the user cannot read", async () => {
    const page = await (await as("dave").get("/usage")).text();
    expect(page).toContain("No jobs in the last 30 days.");
  });

  it("shows who spent what: requesters, the owners of API keys, the operator's key", async () => {
    for (const [login, id] of [
      ["bob", USER_IDS.bob],
      ["operator", null],
    ] as const) {
      const { rows } = await h.db.pool.query<{ id: string }>(
        `INSERT INTO conversations (kind, api_owner, api_owner_id, api_operator, repository_id)
         VALUES ('api', $1, $2, $3, $4) RETURNING id`,
        [login, id, id === null, privateApp.id],
      );
      await h.db.pool.query(
        `INSERT INTO jobs (conversation_id, installation_id, repository_id, repo, trigger, requester, cost_usd)
         VALUES ($1, 10, $2, 'acme/private-app', 'chat', $3, 0.5)`,
        [rows[0]?.id, privateApp.id, login],
      );
    }
    const page = await (await as("bob").get("/usage")).text();
    expect(page).toContain('<caption class="muted">Per person, last 30 days</caption>');
    // Bob's chat turns, whatever else he ran here.
    expect(page).toMatch(/<tr><td>bob<\/td><td class="num">\d+<\/td>/);
    expect(page).toMatch(/<tr><td>operator key<\/td><td class="num">1<\/td>/);
    // The harness's issue jobs recorded no requester id: counted by login, and said so.
    expect(page).toContain('<td>alice <span class="muted">(jobs without a user id)</span></td>');
    expect(page).toMatch(
      /Your own jobs and chat turns this month \(UTC\), in every repository: <strong>\$0\.5000<\/strong>/,
    );
  });
});

/**
 * Reads an SSE response event by event, as EventSource does: CR, LF and CRLF all end a line, a
 * blank line dispatches. Each event's data is one JSON string, decoded here.
 */
function readEvents(res: Response) {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let fields: { event?: string; id?: string; data: string[] } = { data: [] };
  return {
    async next(type: string): Promise<{ id?: string; data: string }> {
      for (;;) {
        const match = /\r\n|\r|\n/.exec(buffer);
        // A lone CR at the end may be the first half of a CRLF: wait for more.
        if (match && !(match[0] === "\r" && match.index === buffer.length - 1)) {
          const line = buffer.slice(0, match.index);
          buffer = buffer.slice(match.index + match[0].length);
          if (line === "") {
            const event = fields;
            fields = { data: [] };
            if (event.event === type)
              return { id: event.id, data: JSON.parse(event.data.join("\n")) };
            continue;
          }
          const colon = line.indexOf(":");
          const name = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (name === "event") fields.event = value;
          else if (name === "id") fields.id = value;
          else if (name === "data") fields.data.push(value);
          continue;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before a ${type} event`);
        buffer += decoder.decode(value, { stream: true });
      }
    },
  };
}
