import { ProbotOctokit } from "probot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRepoConfig } from "../../src/github/repo-config-loader.ts";
import { createAutomationConversation } from "../../src/store/conversations.ts";
import { getRepository, setRepositorySettings } from "../../src/store/installations.ts";
import { insertJob, type Job, updateJob } from "../../src/store/jobs.ts";
import { field, fragment, main } from "./helpers/fragment.ts";
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
      const header = (name: string) => [name, res.headers.get(name)];
      expect(res.headers.get("content-security-policy")).not.toMatch(/unsafe-inline/);
      expect(
        Object.fromEntries([
          header("content-security-policy"),
          header("x-frame-options"),
          header("referrer-policy"),
          header("x-content-type-options"),
        ]),
      ).toMatchInlineSnapshot(`
        {
          "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
          "referrer-policy": "same-origin",
          "x-content-type-options": "nosniff",
          "x-frame-options": "DENY",
        }
      `);
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
    expect(main(page)).toMatchInlineSnapshot(`
      "<main id="main" tabindex="-1">
      <h1>Settings</h1>
      <p>Repositories where vmpilot is installed and you are an administrator:</p><section aria-labelledby="inst-10">
      <h2 id="inst-10">acme</h2>

      <ul><li><a href="/settings/acme/private-app">acme/private-app</a> <span class="muted">(private)</span></li>
      <li><a href="/settings/acme/public-lib">acme/public-lib</a></li></ul>
      </section>
      </main>"
    `);
    expect(page).not.toContain("octo/public-open");
    expect(h.github.requests.slice(before)).toEqual([
      "GET /api/v3/user/installations",
      "GET /api/v3/user/installations/10/repositories",
    ]);
  });

  it("shows a writer no repository and no settings form", async () => {
    const page = await (await as("bob").get("/settings")).text();
    expect(main(page)).toMatchInlineSnapshot(`
      "<main id="main" tabindex="-1">
      <h1>Settings</h1>
      <p>You administer no repository where vmpilot is installed.</p>
      </main>"
    `);
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
    expect(field(page, "label")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-label">Trigger label <span class="source source-default">default</span></label>
      <input type="text" id="f-label" name="label" aria-describedby="f-label-hint"  value="vmpilot"  spellcheck="false">
      <p class="hint" id="f-label-hint">Issue label that asks vmpilot to work on an issue.

      (<code>label</code> in the file)</p>
      </div>"
    `);
    expect(field(page, "plugins")).toMatchInlineSnapshot(`
      "<div class="field"><fieldset aria-describedby="f-plugins-hint"><legend>Plugins <span class="source source-default">default</span></legend>
        <div><label><input type="checkbox" name="plugins" value="code_review" > code_review</label></div><div><label><input type="checkbox" name="plugins" value="docs" > docs</label></div></fieldset>
      <p class="hint" id="f-plugins-hint">Enabled plugins (folders under plugins/).

      (<code>plugins</code> in the file)</p>
      </div>"
    `);
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
      "review.beforePullRequest": "on",
      "memory.enabled": "on",
      showCost: "on",
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
    expect(fragment(page, '<p class="notice', "</p>")).toMatchInlineSnapshot(
      `"<p class="notice ok" role="status">Saved.</p>"`,
    );
    expect(field(page, "label")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-label">Trigger label <span class="source source-page">set on this page</span></label>
      <input type="text" id="f-label" name="label" aria-describedby="f-label-hint"  value="ai-fix"  spellcheck="false">
      <p class="hint" id="f-label-hint">Issue label that asks vmpilot to work on an issue.

      (<code>label</code> in the file)</p>
      </div>"
    `);
    expect(field(page, "maxCostUsd")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-maxCostUsd">Max cost per job (USD) <span class="source source-page">set on this page</span></label>
      <input type="number" step="any" inputmode="decimal" id="f-maxCostUsd" name="maxCostUsd" aria-describedby="f-maxCostUsd-hint"  value="2.5">
      <p class="hint" id="f-maxCostUsd-hint">Most a single job may spend, in US dollars.

      (<code>maxCostUsd</code> in the file)</p>
      </div>"
    `);
    expect(field(page, "plugins")).toMatchInlineSnapshot(`
      "<div class="field"><fieldset aria-describedby="f-plugins-hint"><legend>Plugins <span class="source source-page">set on this page</span></legend>
        <div><label><input type="checkbox" name="plugins" value="code_review" checked> code_review</label></div><div><label><input type="checkbox" name="plugins" value="docs" > docs</label></div></fieldset>
      <p class="hint" id="f-plugins-hint">Enabled plugins (folders under plugins/).

      (<code>plugins</code> in the file)</p>
      </div>"
    `);
    // publicJobs was not submitted: an unchecked box is false, which is the default.
    expect(field(page, "publicJobs")).toMatchInlineSnapshot(`
      "<div class="field"><div><label><input type="checkbox" id="f-publicJobs" name="publicJobs" aria-describedby="f-publicJobs-hint"  >
        Public job pages</label> <span class="source source-default">default</span></div>
      <p class="hint" id="f-publicJobs-hint">On a public repository, show job pages to everyone, signed in or not.

      (<code>publicJobs</code> in the file)</p>
      </div>"
    `);
    expect(field(page, "showCost")).toMatchInlineSnapshot(`
      "<div class="field"><div><label><input type="checkbox" id="f-showCost" name="showCost" aria-describedby="f-showCost-hint"  checked>
        Show each job&#39;s cost in its comment and pull request</label> <span class="source source-default">default</span></div>
      <p class="hint" id="f-showCost-hint">Show what each job took (model, steps, tokens, cost, time) in its final comment and its pull request&#39;s body.

      (<code>showCost</code> in the file)</p>
      </div>
      <div><button type="submit" class="primary">Save settings</button></div>
      "
    `);
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
    expect(fragment(page, '<div class="notice error"', "</div>")).toMatchInlineSnapshot(`
      "<div class="notice error" role="alert" id="error-summary">
        <h2>The settings were not saved</h2>
        <ul><li><a href="#f-allowedUsers">Allowed users: “not a user!”: must be a GitHub user name (letters, digits, -).</a></li>
      <li><a href="#f-maxSteps">Max steps per job: Must be at least 1.</a></li>
      <li><a href="#f-maxCostUsd">Max cost per job (USD): Must be greater than 0.</a></li>
      <li><a href="#f-network-allow">Network allow-list: “http://example.com/path”: must be a host name with an optional port, like registry.npmjs.org or *.example.com:443.</a></li>
        </ul>
      </div>"
    `);
    expect(field(page, "maxSteps")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-maxSteps">Max steps per job <span class="source source-default">default</span></label>
      <input type="number" step="any" inputmode="decimal" id="f-maxSteps" name="maxSteps" aria-describedby="f-maxSteps-hint f-maxSteps-error" aria-invalid="true" value="0"><p class="error" id="f-maxSteps-error">Must be at least 1.</p>
      <p class="hint" id="f-maxSteps-hint">Most agent steps (requests to the model) per job.

      (<code>maxSteps</code> in the file)</p>
      </div>"
    `);
    expect(field(page, "maxCostUsd")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-maxCostUsd">Max cost per job (USD) <span class="source source-page">set on this page</span></label>
      <input type="number" step="any" inputmode="decimal" id="f-maxCostUsd" name="maxCostUsd" aria-describedby="f-maxCostUsd-hint f-maxCostUsd-error" aria-invalid="true" value="-3"><p class="error" id="f-maxCostUsd-error">Must be greater than 0.</p>
      <p class="hint" id="f-maxCostUsd-hint">Most a single job may spend, in US dollars.

      (<code>maxCostUsd</code> in the file)</p>
      </div>"
    `);
    expect(field(page, "allowedUsers")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-allowedUsers">Allowed users <span class="source source-page">set on this page</span></label>
      <textarea id="f-allowedUsers" name="allowedUsers" aria-describedby="f-allowedUsers-hint f-allowedUsers-error" aria-invalid="true" rows="3" spellcheck="false">carol
      not a user!</textarea><p class="error" id="f-allowedUsers-error">“not a user!”: must be a GitHub user name (letters, digits, -).</p>
      <p class="hint" id="f-allowedUsers-hint">GitHub users who may trigger vmpilot in addition to (or, with allow-list, instead of) writers. One user name per line.

      (<code>allowedUsers</code> in the file)</p>
      </div>"
    `);
    expect(field(page, "network-allow")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-network-allow">Network allow-list <span class="source source-page">set on this page</span></label>
      <textarea id="f-network-allow" name="network.allow" aria-describedby="f-network-allow-hint f-network-allow-error" aria-invalid="true" rows="3" spellcheck="false">http://example.com/path</textarea><p class="error" id="f-network-allow-error">“http://example.com/path”: must be a host name with an optional port, like registry.npmjs.org or *.example.com:443.</p>
      <p class="hint" id="f-network-allow-hint">Hosts the workspace may reach (host or host:port). One host per line.

      (<code>network.allow</code> in the file)</p>
      </div>"
    `);
    expect((await getRepository(h.db.pool, privateApp.id))?.settings).toEqual(stored);
  });

  it("lists the configured model providers and refuses a model no configured provider serves", async () => {
    const client = as("alice");
    const form = await (await client.get("/settings/acme/private-app")).text();
    expect(field(form, "model")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-model">Model <span class="source source-default">default</span></label>
      <input type="text" id="f-model" name="model" aria-describedby="f-model-hint"  value="claude-sonnet-5-5" list="models" spellcheck="false">
      <p class="hint" id="f-model-hint">Model id: claude-… (Anthropic), or &lt;provider&gt;/&lt;model&gt; for an OpenAI-compatible provider the operator configured.
      Configured providers: anthropic, ollama.
      (<code>model</code> in the file)</p>
      </div>"
    `);
    const csrf = Client.csrf(form);
    const refused = await client.post("/settings/acme/private-app", {
      csrf,
      model: "openrouter/qwen/qwen3-coder",
    });
    expect(refused.status).toBe(422);
    expect(field(await refused.text(), "model-error")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-model">Model <span class="source source-default">default</span></label>
      <input type="text" id="f-model" name="model" aria-describedby="f-model-hint f-model-error" aria-invalid="true" value="openrouter/qwen/qwen3-coder" list="models" spellcheck="false"><p class="error" id="f-model-error">The model openrouter/qwen/qwen3-coder is served by &quot;openrouter&quot;, which is not configured (configured: anthropic, ollama); see the README&#39;s model providers.</p>
      <p class="hint" id="f-model-hint">Model id: claude-… (Anthropic), or &lt;provider&gt;/&lt;model&gt; for an OpenAI-compatible provider the operator configured.
      Configured providers: anthropic, ollama.
      (<code>model</code> in the file)</p>
      </div>"
    `);
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
    expect(field(page, "label")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-label">Trigger label <span class="source source-file">from .github/vmpilot.yml</span></label>
      <input type="text" id="f-label" name="label" aria-describedby="f-label-hint"  value="from-page"  spellcheck="false">
      <p class="hint" id="f-label-hint">Issue label that asks vmpilot to work on an issue.

      (<code>label</code> in the file)</p>
      <p class="hint"><code>.github/vmpilot.yml</code> sets this to <strong>from-file</strong>,
      which takes precedence over this page.</p></div>"
    `);
    expect(field(page, "maxCostUsd")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-maxCostUsd">Max cost per job (USD) <span class="source source-page">set on this page</span></label>
      <input type="number" step="any" inputmode="decimal" id="f-maxCostUsd" name="maxCostUsd" aria-describedby="f-maxCostUsd-hint"  value="1">
      <p class="hint" id="f-maxCostUsd-hint">Most a single job may spend, in US dollars.

      (<code>maxCostUsd</code> in the file)</p>
      </div>"
    `);
    expect(field(page, "model")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-model">Model <span class="source source-default">default</span></label>
      <input type="text" id="f-model" name="model" aria-describedby="f-model-hint"  value="claude-sonnet-5-5" list="models" spellcheck="false">
      <p class="hint" id="f-model-hint">Model id: claude-… (Anthropic), or &lt;provider&gt;/&lt;model&gt; for an OpenAI-compatible provider the operator configured.
      Configured providers: anthropic, ollama.
      (<code>model</code> in the file)</p>
      </div>"
    `);
  });

  it("lists the lessons from review as the default branch has them, stale ones marked", async () => {
    publicLib.memoryFile = [
      "# Lessons from review",
      "",
      "A maintainer's own note, kept as written.",
      "",
      "- Use the logger in src/log, never <script>console.log</script>. — learned from <https://github.com/acme/public-lib/pull/3#discussion_r7> · files: `src/log.ts`",
      "- **Stale:** Keep the old parser. — learned from <javascript:alert(1)> · files: `old.ts`",
      "",
    ].join("\n");
    const page = await (await as("alice").get("/settings/acme/public-lib")).text();
    expect(
      fragment(page, '<section aria-labelledby="lessons">', "</section>"),
    ).toMatchInlineSnapshot(`
      "<section aria-labelledby="lessons"><h2 id="lessons">Lessons from review</h2>
      <p class="muted">Every job reads <code>.github/vmpilot/memory.md</code> from the default branch. Edit the file
      to change them; vmpilot proposes new ones in a pull request from <code>vmpilot/memory</code>, and
      merging it approves them.</p>
      <ul class="lessons"><li>Use the logger in src/log, never &lt;script&gt;console.log&lt;/script&gt;. — <a href="https://github.com/acme/public-lib/pull/3#discussion_r7">learned from review</a> · files: <code>src/log.ts</code></li>
      <li><strong>Stale:</strong> Keep the old parser. — learned from javascript:alert(1) · files: <code>old.ts</code></li></ul>
      </section>"
    `);
    publicLib.configFile = "memory: false\n";
    const off = await (await as("alice").get("/settings/acme/public-lib")).text();
    expect(fragment(off, '<section aria-labelledby="lessons">', "</section>")).toContain(
      "Off: vmpilot keeps no lessons for this repository.",
    );
    delete publicLib.configFile;
    delete publicLib.memoryFile;
  });

  it("shows the page's cost limits holding over a file that would raise them", async () => {
    publicLib.configFile = "maxDailyCostUsd: 1000\n";
    await setRepositorySettings(h.db.pool, publicLib.id, { maxDailyCostUsd: 10 });
    const page = await (await as("alice").get("/settings/acme/public-lib")).text();
    expect(field(page, "maxDailyCostUsd")).toMatchInlineSnapshot(`
      "<div class="field"><label for="f-maxDailyCostUsd">Max cost per day (USD) <span class="source source-page">set on this page</span></label>
      <input type="number" step="any" inputmode="decimal" id="f-maxDailyCostUsd" name="maxDailyCostUsd" aria-describedby="f-maxDailyCostUsd-hint"  value="10">
      <p class="hint" id="f-maxDailyCostUsd-hint">Most all jobs of this repository may spend per day, in US dollars.

      (<code>maxDailyCostUsd</code> in the file)</p>
      <p class="hint"><code>.github/vmpilot.yml</code> sets this to <strong>1000</strong>,
      above this page's limit, which holds: the file may lower it, never raise it.</p></div>"
    `);
    expect(page).toContain("ceilings: the file may lower them, never raise them.");
    delete publicLib.configFile;
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
      expect(field(page, "label")).toMatchInlineSnapshot(`
        "<div class="field"><label for="f-label">Trigger label <span class="source source-file">from .github/vmpilot.yml</span></label>
        <input type="text" id="f-label" name="label" aria-describedby="f-label-hint"  value="vmpilot"  spellcheck="false">
        <p class="hint" id="f-label-hint">Issue label that asks vmpilot to work on an issue.

        (<code>label</code> in the file)</p>
        <p class="hint"><code>.github/vmpilot.yml</code> sets this to <strong>org-wide</strong>,
        which takes precedence over this page.</p></div>"
      `);
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
    expect(fragment(page, '<p class="notice error">', "</p>")).toMatchInlineSnapshot(
      `"<p class="notice error"><code>.github/vmpilot.yml</code> is invalid and is ignored until it is fixed: maxStep: unknown key</p>"`,
    );
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
      request: {
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
    // The job took 90 s, give or take the second the harness took to store it.
    expect(main(page).replace(/1 min (29|31) s/, "1 min 30 s")).toMatchInlineSnapshot(`
      "<main id="main" tabindex="-1">
      <h1>Jobs</h1>
      <section aria-labelledby="repo-501">
      <h2 id="repo-501"><a href="/jobs?repo=acme/private-app">acme/private-app</a></h2>
      <div class="table-wrap"><table>
      <thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Trigger</th>
      <th scope="col">Requester</th><th scope="col">Issue</th><th scope="col">PR</th>
      <th scope="col" class="hide-narrow">Created</th><th scope="col" class="num">Duration</th>
      <th scope="col" class="num">Cost</th></tr></thead>
      <tbody><tr>
        <td><a href="/jobs/1">#1</a></td>
        <td><span class="status status-succeeded">succeeded</span></td>
        <td>label</td>
        <td>alice</td>
        <td><a href="http://127.0.0.1:PORT/acme/private-app/issues/1">#1</a></td>
        <td><a href="http://127.0.0.1:PORT/acme/private-app/pull/42">#42</a></td>
        <td class="hide-narrow"><time>TIME</time></td>
        <td class="num">1 min 30 s</td>
        <td class="num">$0.1234</td>
      </tr></tbody></table></div>
      </section>
      </main>"
    `);
    expect(page).not.toContain("acme/public-lib"); // carol has no explicit access there
  });

  it("shows a reader the job log: escaped text, redacted output, commands and diffs", async () => {
    const res = await as("carol").get(`/jobs/${privateJob.id}`);
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(fragment(page, '<ol id="timeline"', "</ol>")).toMatchInlineSnapshot(`
      "<ol id="timeline" class="timeline" aria-labelledby="log-heading" data-job="1"
        data-after="7" data-live="false"><li id="ev-1" class="event"><time>TIME</time> <strong>Acknowledged</strong>: vmpilot is on it</li>
      <li id="ev-2" class="step"><h3>Step 1</h3></li>
      <li id="ev-3" class="text"><time>TIME</time><div class="model-text">Let me look. &lt;script&gt;alert(1)&lt;/script&gt;</div></li>
      <li id="ev-4" class="tool-call"><time>TIME</time> <pre class="command"><span aria-hidden="true">$ </span>cat &lt;img src=x onerror=alert(1)&gt;</pre></li>
      <li id="ev-5" class="tool-result">
      <details><summary>Output of bash (2 lines, 1.5 s)</summary>
      <pre>GH_TOKEN=[REDACTED]
      ok</pre></details></li>
      <li id="ev-6" class="tool-call"><time>TIME</time> Edited <code>src/a.ts</code><pre class="diff" aria-label="Diff"><span class="del">- const a = 1;</span><span class="add">+ const a = 2;</span></pre></li>
      <li id="ev-7" class="usage muted">Tokens: 1,000 in, 200 out, 5,000 cache · cost $0.1234 (job so far $0.1234)</li></ol>"
    `);
    expect(page).not.toContain("<script>alert");
    expect(page).not.toContain("ghp_abc");
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
    expect(fragment(page, "token ", "leaked")).toMatchInlineSnapshot(`"token [REDACTED] leaked"`);
  });

  it("streams new steps of a running job as Server-Sent Events until it finishes, and its tokens and cost", async () => {
    const running = await h.addJob(privateApp, { status: "running", startedAt: new Date() });
    const first = await h.addEvent(running, "step_started", { step: 1 });
    const page = await (await as("carol").get(`/jobs/${running.id}`)).text();
    expect(fragment(page, "<dt>Tokens</dt>", "$0.00</dd>")).toMatchInlineSnapshot(`
      "<dt>Tokens</dt><dd id="job-tokens">0</dd>
        <dt>Cost</dt><dd id="job-cost">$0.00</dd>"
    `);
    expect(fragment(page, '<script src="/static/live.js"', "</script>")).toMatchInlineSnapshot(
      `"<script src="/static/live.js" defer></script>"`,
    );
    expect(
      fragment(page, '<ol id="timeline"', ">")
        .replace(`data-job="${running.id}"`, 'data-job="JOB"')
        .replace(`data-after="${first}"`, 'data-after="FIRST"'),
    ).toMatchInlineSnapshot(`
      "<ol id="timeline" class="timeline" aria-labelledby="log-heading" data-job="JOB"
        data-after="FIRST" data-live="true">"
    `);

    const res = await as("carol").get(`/jobs/${running.id}/events?after=${first}`);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const stream = readEvents(res);
    const second = await h.addEvent(running, "text", { step: 1, text: "Working\non it" });
    const step = await stream.next("step");
    expect(step.id).toBe(String(second));
    // The header moves with the log: the job row's tokens and cost, as the page shows them.
    await updateJob(h.db.pool, running.id, {
      costUsd: 0.0081,
      usage: { inputTokens: 1200, outputTokens: 300, cacheReadInputTokens: 4000 },
    });
    expect((await stream.next("spent")).data).toEqual({ tokens: "5,500", cost: "$0.0081" });
    // Spent nothing after all: /usage's tests below count this job.
    await updateJob(h.db.pool, running.id, { costUsd: 0, usage: {} });
    expect((await stream.next("spent")).data).toEqual({ tokens: "0", cost: "$0.00" });
    expect(
      fragment(step.data, "<li", "</li>").replace(`ev-${second}"`, 'ev-SECOND"'),
    ).toMatchInlineSnapshot(`
      "<li id="ev-SECOND" class="text"><time>TIME</time><div class="model-text">Working
      on it</div></li>"
    `);
    const last = await h.addEvent(running, "finished", {
      reason: "end_turn",
      steps: 1,
      finalText: "Done",
    });
    await updateJob(h.db.pool, running.id, { status: "succeeded" });
    const finished = fragment((await stream.next("step")).data, "<li", "</li>");
    expect(finished.replace(`ev-${last}"`, 'ev-LAST"')).toMatchInlineSnapshot(`
      "<li id="ev-LAST" class="finished"><time>TIME</time> <strong>Finished</strong> (end_turn)
              after 1 steps.
              <div class="model-text">Done</div></li>"
    `);
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
    expect(
      fragment(first.data, "<li", "</li>").replace(`ev-${a}"`, 'ev-A"'),
    ).toMatchInlineSnapshot(`
      "<li id="ev-A" class="text"><time>TIME</time><div class="model-text">ok
      event: end
      id: 999999
      data: forged

      event: end
      data: x

      </div></li>"
    `);
    const second = await stream.next("step");
    expect(second.id).toBe(String(b));
    expect(
      fragment(second.data, "<li", "</li>").replace(`ev-${b}"`, 'ev-B"'),
    ).toMatchInlineSnapshot(
      `"<li id="ev-B" class="text"><time>TIME</time><div class="model-text">after</div></li>"`,
    );
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
    // Its ids count the jobs and conversations of the tests above.
    const named = (html: string) =>
      html
        .replaceAll(`/jobs/${id}"`, '/jobs/ID"')
        .replaceAll(`#${id} `, "#ID ")
        .replaceAll(`#${id}<`, "#ID<")
        .replace(`conversation ${conversation.rows[0]?.id}<`, "conversation ID<")
        // Queued: its time so far is the clock's.
        .replace(/\d+ s so far/, "N s so far");
    expect(
      named(fragment(bobs, '<section aria-labelledby="your-chat-turns"', "</section>")),
    ).toMatchInlineSnapshot(`
      "<section aria-labelledby="your-chat-turns">
      <h2 id="your-chat-turns">Your chat turns</h2>
      <div class="table-wrap"><table>
      <thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Trigger</th>
      <th scope="col">Requester</th><th scope="col">Issue</th><th scope="col">PR</th>
      <th scope="col" class="hide-narrow">Created</th><th scope="col" class="num">Duration</th>
      <th scope="col" class="num">Cost</th></tr></thead>
      <tbody><tr>
        <td><a href="/jobs/ID">#ID</a></td>
        <td><span class="status status-queued">queued</span></td>
        <td>chat</td>
        <td>bob</td>
        <td>conversation ID</td>
        <td>—</td>
        <td class="hide-narrow"><time>TIME</time></td>
        <td class="num">N s so far</td>
        <td class="num">$0.00</td>
      </tr></tbody></table></div>
      </section>"
    `);
    const page = await (await as("bob").get(`/jobs/${id}`)).text();
    expect(named(fragment(page, "<h1>", "</h1>"))).toMatchInlineSnapshot(
      `"<h1>Job #ID · acme/private-app conversation ID</h1>"`,
    );

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
    // The hint is the secret's last four characters.
    expect(
      fragment(listed, "<table", "</table>").replace(`…${secret.slice(-4)}`, "…HINT"),
    ).toMatchInlineSnapshot(`
      "<table><thead><tr><th>Name</th><th>Key</th><th>Created (UTC)</th><th>Last used</th><th></th></tr></thead><tbody><tr>
      <td>Open WebUI</td><td><code>…HINT</code></td><td>DATE</td><td>never</td>
      <td><form method="post" action="/keys/1/revoke"><input type="hidden" name="csrf" value="CSRF"><button type="submit" class="link">Revoke</button></form></td></tr></tbody></table>"
    `);

    const id = String(stored.rows[0]?.id);
    // Another user cannot revoke it, nor can a form without the CSRF token.
    const aliceCsrf = Client.csrf(await (await as("alice").get("/")).text());
    expect((await as("alice").post(`/keys/${id}/revoke`, { csrf: aliceCsrf })).status).toBe(404);
    expect((await as("bob").post(`/keys/${id}/revoke`, {})).status).toBe(403);
    const revoked = await as("bob").post(`/keys/${id}/revoke`, { csrf });
    expect(revoked.status).toBe(303);
    const after = await (await as("bob").get("/keys")).text();
    expect(
      fragment(after, "<table", "</table>").replace(`…${secret.slice(-4)}`, "…HINT"),
    ).toMatchInlineSnapshot(`
      "<table><thead><tr><th>Name</th><th>Key</th><th>Created (UTC)</th><th>Last used</th><th></th></tr></thead><tbody><tr>
      <td>Open WebUI</td><td><code>…HINT</code></td><td>DATE</td><td>never</td>
      <td>revoked DATE</td></tr></tbody></table>"
    `);
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
    expect(fragment(await refused.text(), '<p class="error"', "</p>")).toMatchInlineSnapshot(
      `"<p class="error" role="alert">You have 20 keys, the most one person may have. Revoke one to make another.</p>"`,
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
    // A day's bar; the day's row counts the jobs of the tests above.
    expect(fragment(page, "<rect", "</rect>")).toMatchInlineSnapshot(
      `"<rect x="59.2" y="156" width="15.0" height="0" class="bar"><title>DATE: $0.00</title></rect>"`,
    );
    expect(
      fragment(page, '<caption class="muted">Per repository', "</table>"),
    ).toMatchInlineSnapshot(`
      "<caption class="muted">Per repository per day</caption>
      <thead><tr><th scope="col">Day</th><th scope="col">Repository</th><th scope="col" class="num">Jobs</th>
      <th scope="col" class="num">Input tokens</th><th scope="col" class="num">Output tokens</th>
      <th scope="col" class="num hide-narrow">Cache tokens</th><th scope="col" class="num">Cost</th></tr></thead>
      <tbody><tr><td>DATE</td><td><a href="/jobs?repo=acme/private-app">acme/private-app</a></td>
      <td class="num">6</td><td class="num">1,000</td><td class="num">200</td>
      <td class="num hide-narrow">5,000</td><td class="num">$0.1234</td></tr><tr><td>DATE</td><td><a href="/jobs?repo=acme/public-lib">acme/public-lib</a></td>
      <td class="num">1</td><td class="num">0</td><td class="num">0</td>
      <td class="num hide-narrow">0</td><td class="num">$0.00</td></tr><tr><td>DATE</td><td><a href="/jobs?repo=acme/secret">acme/secret</a></td>
      <td class="num">1</td><td class="num">0</td><td class="num">0</td>
      <td class="num hide-narrow">0</td><td class="num">$0.00</td></tr></tbody></table>"
    `);
  });

  it("leaves out repositories the user cannot read", async () => {
    const page = await (await as("dave").get("/usage")).text();
    expect(fragment(page, "<figure", "<rect")).toMatchInlineSnapshot(`
      "<figure class="chart">
        <svg viewBox="0 0 720 180" role="img" aria-labelledby="chart-caption">
          <line x1="56" y1="156" x2="700" y2="156" class="axis"></line>
          <line x1="56" y1="10" x2="700" y2="10" class="grid"></line>
          <text x="50" y="14" text-anchor="end">$0.00</text>
          <text x="50" y="160" text-anchor="end">$0.00</text>
          <rect"
    `);
    expect(fragment(page, "</figure>", "</main>")).toMatchInlineSnapshot(`
      "</figure>
      <p>No jobs in the last 30 days.</p>
      </main>"
    `);
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
    // Bob's chat turns, whatever else he ran here; the operator's key; the harness's issue jobs
    // recorded no requester id: counted by login, and said so.
    expect(fragment(page, '<caption class="muted">Per person', "</table>")).toMatchInlineSnapshot(`
      "<caption class="muted">Per person, last 30 days</caption>
      <thead><tr><th scope="col">Person</th><th scope="col" class="num">Jobs</th>
      <th scope="col" class="num">Input tokens</th><th scope="col" class="num">Output tokens</th>
      <th scope="col" class="num">Cost</th></tr></thead>
      <tbody><tr><td>bob</td><td class="num">2</td>
      <td class="num">0</td><td class="num">0</td><td class="num">$0.5000</td></tr><tr><td>operator key</td><td class="num">1</td>
      <td class="num">0</td><td class="num">0</td><td class="num">$0.5000</td></tr><tr><td>alice <span class="muted">(jobs without a user id)</span></td><td class="num">4</td>
      <td class="num">1,000</td><td class="num">200</td><td class="num">$0.1234</td></tr><tr><td>vmpilot[bot] <span class="muted">(an app)</span></td><td class="num">1</td>
      <td class="num">0</td><td class="num">0</td><td class="num">$0.00</td></tr></tbody></table>"
    `);
    expect(fragment(page, "<p>Your own jobs", "</p>")).toMatchInlineSnapshot(`
      "<p>Your own jobs and chat turns this month (UTC), in every repository: <strong>$0.5000</strong>
      (what a repository's <code>maxMonthlyCostUsdPerUser</code> counts).</p>"
    `);
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
