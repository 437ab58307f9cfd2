// The real server, store (PGlite) and queue, with signed real payloads POSTed over HTTP and
// GitHub mocked at the nock edge.
import { describe, expect, it, vi } from "vitest";
import { jobDuration } from "../../src/metrics.ts";
import { findOrCreateConversation } from "../../src/store/conversations.ts";
import {
  getRepository,
  setRepositoryFileSettings,
  upsertRepository,
} from "../../src/store/installations.ts";
import { getJob, type Job } from "../../src/store/jobs.ts";
import { APP_SLUG } from "../helpers/app.ts";
import { seedJob } from "../helpers/db.ts";
import {
  github,
  mockInstallationToken,
  mockPermission,
  mockRepoConfig,
  useGitHubMock,
} from "../helpers/github-mock.ts";
import { useTestServer } from "../helpers/test-server.ts";
import { deliver, examplePayload, type Payload } from "../helpers/webhooks.ts";

useGitHubMock();

const REPO = "Codertocat/Hello-World";
const REPO_ID = 186853002;
const t = useTestServer();
const send = t.send;
let nextInstallation = 1000;
let nextCommentId = 50_000;

function forInstallation(payload: Payload): { payload: Payload; installation: number } {
  const installation = nextInstallation++;
  payload.installation = { id: installation };
  return { payload, installation };
}

function issueComment(body: string, sender = { login: "Codertocat", type: "User" }) {
  const payload = examplePayload("issue_comment", "created");
  payload.comment.body = body;
  payload.comment.id = nextCommentId++;
  payload.sender = { ...payload.sender, ...sender };
  payload.comment.user = payload.sender;
  return forInstallation(payload);
}

async function jobsForDelivery(deliveryId: string): Promise<Job[]> {
  const { rows } = await t.db.pool.query<{ id: string }>(
    "SELECT id FROM jobs WHERE delivery_id = $1",
    [deliveryId],
  );
  return Promise.all(rows.map(async (row) => (await getJob(t.db.pool, Number(row.id))) as Job));
}

async function deliveryCount(deliveryId: string): Promise<number> {
  const { rows } = await t.db.pool.query("SELECT 1 FROM deliveries WHERE id = $1", [deliveryId]);
  return rows.length;
}

/** Waits until the queue is done with the job (no sleeps: polls the row). */
function finished(jobId: number): Promise<Job> {
  return vi.waitFor(
    async () => {
      const job = await getJob(t.db.pool, jobId);
      if (!job?.finishedAt) throw new Error(`job ${jobId} still ${job?.status}`);
      return job;
    },
    { timeout: 15_000, interval: 25 },
  );
}

/** Mocks a full acknowledgement and returns the posted comment body once it has been sent. */
function expectAcknowledgement(installation: number, reactionPath: string, number: number) {
  mockInstallationToken(installation);
  mockRepoConfig(REPO);
  mockPermission(REPO, "Codertocat", "write");
  github().post(reactionPath, { content: "eyes" }).reply(201, { id: 1, content: "eyes" });
  let posted = "";
  github()
    .post(`/repos/${REPO}/issues/${number}/comments`, (body) => {
      posted = body.body;
      return true;
    })
    .reply(201, { id: 777_000 + installation, body: "" });
  return () => posted;
}

describe("webhook signature", () => {
  it("rejects a forged signature with 4xx and stores nothing", async () => {
    const { payload } = issueComment("/vmpilot fix");
    const response = await send("issue_comment", payload, {
      signature: `sha256=${"0".repeat(64)}`,
    });
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
    expect(await deliveryCount(response.id)).toBe(0);
    expect(await jobsForDelivery(response.id)).toEqual([]);
  });

  it("rejects a body signed with another secret", async () => {
    const { payload } = issueComment("/vmpilot fix");
    const response = await deliver(t.server.url, {
      event: "issue_comment",
      payload,
      secret: "not-the-secret",
    });
    expect(response.status).toBe(400);
    expect(await deliveryCount(response.id)).toBe(0);
  });

  it("rejects a missing signature with 4xx and stores nothing", async () => {
    const { payload } = issueComment("/vmpilot fix");
    const response = await send("issue_comment", payload, { signature: null });
    expect(response.status).toBe(400);
    expect(await deliveryCount(response.id)).toBe(0);
  });
});

describe("triggers", () => {
  interface Case {
    name: string;
    event: string;
    payload: () => Payload;
    reaction: (payload: Payload) => string;
    number: number;
    expected: Partial<Job>;
  }
  const cases: Case[] = [
    {
      name: "label",
      event: "issues",
      payload: () => {
        const p = examplePayload("issues", "labeled");
        p.label.name = "vmpilot";
        return p;
      },
      reaction: () => `/repos/${REPO}/issues/1/reactions`,
      number: 1,
      expected: { trigger: "label", command: "fix", instruction: "", triggerCommentId: null },
    },
    {
      name: "assigned to the app",
      event: "issues",
      payload: () => {
        const p = examplePayload("issues", "assigned");
        p.assignee = { ...p.assignee, login: `${APP_SLUG}[bot]`, type: "Bot" };
        return p;
      },
      reaction: () => `/repos/${REPO}/issues/1/reactions`,
      number: 1,
      expected: { trigger: "assigned", command: "fix" },
    },
    {
      name: "opened with a mention",
      event: "issues",
      payload: () => {
        const p = examplePayload("issues", "opened");
        p.issue.body = `The README is wrong.\n\n@${APP_SLUG} please fix the spelling`;
        return p;
      },
      reaction: () => `/repos/${REPO}/issues/1/reactions`,
      number: 1,
      expected: { trigger: "mention", command: "fix", instruction: "please fix the spelling" },
    },
    {
      name: "comment mention",
      event: "issue_comment",
      payload: () => issueComment(`Hey @${APP_SLUG}, plan the migration`).payload,
      reaction: (p) => `/repos/${REPO}/issues/comments/${p.comment.id}/reactions`,
      number: 1,
      expected: { trigger: "mention", command: "plan", instruction: "the migration" },
    },
    {
      name: "command",
      event: "issue_comment",
      payload: () => issueComment("LGTM otherwise.\n/vmpilot plan split the module").payload,
      reaction: (p) => `/repos/${REPO}/issues/comments/${p.comment.id}/reactions`,
      number: 1,
      expected: { trigger: "command", command: "plan", instruction: "split the module" },
    },
    {
      name: "review comment",
      event: "pull_request_review_comment",
      payload: () => {
        const p = examplePayload("pull_request_review_comment", "created");
        p.comment.body = `@${APP_SLUG} rename this variable`;
        return p;
      },
      reaction: () => `/repos/${REPO}/pulls/comments/284312630/reactions`,
      number: 2,
      expected: {
        trigger: "review_comment",
        command: "fix",
        instruction: "rename this variable",
        triggerCommentId: 284312630,
      },
    },
    {
      name: "review submitted",
      event: "pull_request_review",
      payload: () => {
        const p = examplePayload("pull_request_review", "submitted");
        p.review.body = "/vmpilot review focus on error handling";
        return p;
      },
      reaction: () => `/repos/${REPO}/issues/2/reactions`,
      number: 2,
      expected: { trigger: "review", command: "review", instruction: "focus on error handling" },
    },
  ];

  it.each(cases)("$name → a job, 👀 and one progress comment", async (c) => {
    const { payload, installation } = forInstallation(c.payload());
    const posted = expectAcknowledgement(installation, c.reaction(payload), c.number);
    const response = await send(c.event, payload);
    expect(response.status).toBe(200);
    const [job] = await jobsForDelivery(response.id);
    expect(job).toMatchObject({
      ...c.expected,
      number: c.number,
      repo: REPO,
      requester: "Codertocat",
      installationId: installation,
    });
    const done = await finished(job?.id as number);
    expect(done.status).toBe("acknowledged");
    expect(done.progressCommentId).toBe(777_000 + installation);
    expect(posted()).toContain("vmpilot is on it");
    expect(posted()).toContain(`https://vmpilot.test/jobs/${done.id}`);
    expect(posted()).toContain("starting work");
  });
});

describe("intake rules", () => {
  it("creates one job for a delivery sent twice", async () => {
    const { payload, installation } = issueComment("/vmpilot fix the typo");
    expectAcknowledgement(
      installation,
      `/repos/${REPO}/issues/comments/${payload.comment.id}/reactions`,
      1,
    );
    const first = await send("issue_comment", payload);
    const second = await send("issue_comment", payload, { id: first.id });
    expect([first.status, second.status]).toEqual([200, 200]);
    const jobs = await jobsForDelivery(first.id);
    expect(jobs).toHaveLength(1);
    await finished(jobs[0]?.id as number);
  });

  it("creates one job for the same signed comment replayed under a new delivery id", async () => {
    const { payload, installation } = issueComment("/vmpilot fix the typo");
    expectAcknowledgement(
      installation,
      `/repos/${REPO}/issues/comments/${payload.comment.id}/reactions`,
      1,
    );
    const first = await send("issue_comment", payload);
    const replay = await send("issue_comment", payload);
    expect(replay.id).not.toBe(first.id);
    expect([first.status, replay.status]).toEqual([200, 200]);
    const jobs = await jobsForDelivery(first.id);
    expect(jobs).toHaveLength(1);
    expect(await jobsForDelivery(replay.id)).toEqual([]);
    expect(await deliveryCount(replay.id)).toBe(0);
    await finished(jobs[0]?.id as number);
  });

  it("creates a job for each of two comments with the same text", async () => {
    const comments = [issueComment("/vmpilot fix the typo"), issueComment("/vmpilot fix the typo")];
    const jobs: Job[] = [];
    for (const { payload, installation } of comments) {
      expectAcknowledgement(
        installation,
        `/repos/${REPO}/issues/comments/${payload.comment.id}/reactions`,
        1,
      );
      const response = await send("issue_comment", payload);
      const [job] = await jobsForDelivery(response.id);
      // One after the other: the second, arriving while the first runs, would be acknowledged by
      // a notice (acknowledge.ts), which this test does not mock.
      if (job) jobs.push(await finished(job.id));
    }
    expect(jobs.map((job) => job.triggerCommentId)).toEqual(
      comments.map(({ payload }) => payload.comment.id),
    );
  });

  it("refuses a read-only user politely and does nothing else", async () => {
    const { payload, installation } = issueComment("/vmpilot fix", {
      login: "reader",
      type: "User",
    });
    mockInstallationToken(installation);
    mockRepoConfig(REPO);
    mockPermission(REPO, "reader", "read");
    let reply = "";
    github()
      .post(`/repos/${REPO}/issues/1/comments`, (body) => {
        reply = body.body;
        return true;
      })
      .reply(201, { id: 1 });
    const refusals = async () =>
      (await jobDuration.get()).values.find(
        (v) =>
          v.metricName === "vmpilot_job_duration_seconds_count" && v.labels.outcome === "refused",
      )?.value ?? 0;
    const before = await refusals();
    const response = await send("issue_comment", payload);
    const [job] = await jobsForDelivery(response.id);
    const done = await finished(job?.id as number);
    expect(done.status).toBe("refused");
    expect(reply).toMatch(/^Sorry @reader, .*write, maintain or admin access/);
    // The worker times every job it takes, by outcome, for /metrics.
    await vi.waitFor(async () => expect(await refusals()).toBe(before + 1));
  });

  it("forgets what it knew of vmpilot.yml when a push to the default branch changes it", async () => {
    const { payload } = forInstallation(examplePayload("push"));
    await upsertRepository(t.db.pool, {
      id: REPO_ID,
      installationId: payload.installation.id,
      fullName: REPO,
    });
    await setRepositoryFileSettings(t.db.pool, REPO_ID, { label: "ai-fix" });
    const commit = (files: string[]) => ({
      id: "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
      message: "change",
      added: [],
      removed: [],
      modified: files,
    });
    const fileSettings = async () => (await getRepository(t.db.pool, REPO_ID))?.fileSettings;
    const defaultRef = `refs/heads/${payload.repository.default_branch}`;
    for (const [ref, files] of [
      [defaultRef, ["README.md"]],
      ["refs/heads/feature", [".github/vmpilot.yml"]],
    ] as const) {
      const response = await send("push", { ...payload, ref, commits: [commit([...files])] });
      expect(response.status).toBe(200);
      expect(await fileSettings()).toEqual({ label: "ai-fix" });
    }
    // The push queues a sync of the automations, which reads the file again. The read is held
    // until the forgetting is seen, and the test waits for it: a sync still running would ask
    // GitHub for a token during a later test.
    mockInstallationToken(payload.installation.id);
    let answerRead = () => {};
    const readAnswered = new Promise<void>((resolve) => {
      answerRead = resolve;
    });
    github()
      .get(`/repos/${REPO}/contents/.github%2Fvmpilot.yml`)
      .reply(async () => {
        await readAnswered;
        return [200, "label: ai-fixed\n", { "content-type": "text/plain" }];
      });
    const changed = { ...payload, ref: defaultRef, commits: [commit([".github/vmpilot.yml"])] };
    expect((await send("push", changed)).status).toBe(200);
    expect(await fileSettings()).toBeNull();
    answerRead();
    await vi.waitFor(async () => expect(await fileSettings()).toEqual({ label: "ai-fixed" }), {
      timeout: 15_000,
      interval: 25,
    });
  });

  it("ignores bots, including the app itself", async () => {
    for (const sender of [
      { login: "dependabot[bot]", type: "Bot" },
      { login: `${APP_SLUG}[bot]`, type: "Bot" },
    ]) {
      const { payload } = issueComment(`/vmpilot fix @${APP_SLUG}`, sender);
      const response = await send("issue_comment", payload);
      expect(response.status).toBe(200);
      expect(await deliveryCount(response.id)).toBe(0);
      expect(await jobsForDelivery(response.id)).toEqual([]);
    }
  });

  it("ignores comments without a trigger and comments on locked issues", async () => {
    const plain = issueComment("Thanks, looks good");
    const locked = issueComment("/vmpilot fix");
    locked.payload.issue.locked = true;
    for (const { payload } of [plain, locked]) {
      const response = await send("issue_comment", payload);
      expect(response.status).toBe(200);
      expect(await jobsForDelivery(response.id)).toEqual([]);
    }
  });

  it("answers an unknown verb with the help text and no reaction", async () => {
    const { payload, installation } = issueComment("/vmpilot deploy");
    mockInstallationToken(installation);
    mockRepoConfig(REPO);
    mockPermission(REPO, "Codertocat", "admin");
    let reply = "";
    github()
      .post(`/repos/${REPO}/issues/1/comments`, (body) => {
        reply = body.body;
        return true;
      })
      .reply(201, { id: 2 });
    const response = await send("issue_comment", payload);
    const [job] = await jobsForDelivery(response.id);
    expect(job?.command).toBe("help");
    const done = await finished(job?.id as number);
    expect(done.status).toBe("succeeded");
    expect(reply).toContain("`deploy` is not a vmpilot command");
    expect(reply).toContain("/vmpilot stop");
  });

  it("stops the conversation's waiting job on /vmpilot stop", async () => {
    // A job of issue 77's conversation that has not started (inserted without enqueueing).
    const conversation = await findOrCreateConversation(t.db.pool, {
      repositoryId: REPO_ID,
      number: 77,
      kind: "issue",
    });
    const waiting = await seedJob(t.db, conversation);
    const { payload, installation } = issueComment("/vmpilot stop");
    payload.issue.number = 77;
    mockInstallationToken(installation);
    mockRepoConfig(REPO);
    mockPermission(REPO, "Codertocat", "maintain");
    let reply = "";
    github()
      .post(`/repos/${REPO}/issues/77/comments`, (body) => {
        reply = body.body;
        return true;
      })
      .reply(201, { id: 3 });
    const response = await send("issue_comment", payload);
    const [job] = await jobsForDelivery(response.id);
    await finished(job?.id as number);
    expect((await getJob(t.db.pool, waiting.id))?.status).toBe("cancelled");
    expect(reply).toContain(
      `Stopped job [#${waiting.id}](https://vmpilot.test/jobs/${waiting.id}) as`,
    );
  });

  it("survives a 1 MB comment and unicode tricks", async () => {
    const huge = `/vmpilot fix ${"x".repeat(1_000_000)}`;
    const tricky =
      "/vmpilot fix \u202Etxt.exe\u202C \u200B<!-- hidden -->visible 𝕏 \u{E0041} \uFEFF";
    for (const body of [huge, tricky]) {
      const { payload, installation } = issueComment(body);
      expectAcknowledgement(
        installation,
        `/repos/${REPO}/issues/comments/${payload.comment.id}/reactions`,
        1,
      );
      const response = await send("issue_comment", payload);
      expect(response.status).toBe(200);
      const [job] = await jobsForDelivery(response.id);
      await finished(job?.id as number);
      if (body === tricky) expect(job?.instruction).toBe("txt.exe visible 𝕏");
      else expect(job?.instruction).toHaveLength(1_000_000);
    }
  });

  it("records installations and their repositories", async () => {
    const created = examplePayload("installation", "created");
    created.installation.id = 424242;
    created.repositories = [{ id: 9001, name: "a", full_name: "acme/a", private: false }];
    expect((await send("installation", created)).status).toBe(200);
    const added = examplePayload("installation_repositories", "added");
    added.installation.id = 424242;
    added.repositories_added = [{ id: 9002, name: "b", full_name: "acme/b", private: false }];
    added.repositories_removed = [{ id: 9001, name: "a", full_name: "acme/a", private: false }];
    expect((await send("installation_repositories", added)).status).toBe(200);
    expect(await getRepository(t.db.pool, 9002)).toMatchObject({
      installationId: 424242,
      removedAt: null,
    });
    expect((await getRepository(t.db.pool, 9001))?.removedAt).toBeInstanceOf(Date);
    const { rows } = await t.db.pool.query(
      "SELECT account_login FROM installations WHERE id = 424242",
    );
    expect(rows).toEqual([{ account_login: "Codertocat" }]);
  });
});

describe("GET /healthz", () => {
  it("reports database and queue status as JSON", async () => {
    const response = await fetch(`${t.server.url}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      status: "ok",
      role: "all",
      database: "ok",
      queue: "ok",
      waiting: {},
    });
  });

  it("does not tell strangers which store it uses", async () => {
    const body = await (await fetch(`${t.server.url}/healthz`)).text();
    expect(body).not.toMatch(/embedded|pglite|postgres/i);
  });
});
