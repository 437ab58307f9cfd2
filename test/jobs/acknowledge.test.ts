// A job's admission and first answer through the runner, with no work to go on to, against PGlite
// and PostgreSQL, with GitHub mocked by nock.
import { Probot } from "probot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KINDS } from "../../src/jobs/kinds/index.ts";
import { acknowledgeWaiting } from "../../src/jobs/kinds/issue/acknowledge.ts";
import { reportDead } from "../../src/jobs/kinds/issue/dead.ts";
import type { OpenDeps } from "../../src/jobs/run/deps.ts";
import { runJob } from "../../src/jobs/run/runner.ts";
import { createLogger } from "../../src/log/logger.ts";
import { REDACTED } from "../../src/log/redact.ts";
import { findOrCreateConversation } from "../../src/store/conversations.ts";
import type { Database } from "../../src/store/database.ts";
import {
  getRepository,
  setRepositoryFileSettings,
  setRepositorySettings,
  upsertRepository,
} from "../../src/store/installations.ts";
import type { JobContext } from "../../src/store/job-context.ts";
import { getJob, insertJob, type Job, updateJob } from "../../src/store/jobs.ts";
import { appPrivateKey, TestProbotOctokit } from "../helpers/app.ts";
import { databases } from "../helpers/db.ts";
import {
  github,
  mockInstallationToken,
  mockPermission,
  mockRepoConfig,
  useGitHubMock,
} from "../helpers/github-mock.ts";

useGitHubMock();

const logger = createLogger({ level: "silent", format: "json" });
const probot = new Probot({
  appId: 1,
  privateKey: appPrivateKey(),
  log: logger,
  Octokit: TestProbotOctokit,
});
let nextInstallation = 1;
let nextRepository = 5000;

describe.each(databases())("acknowledge on $name", (target) => {
  let db: Database;
  const cancelled: number[] = [];
  let deps: OpenDeps;

  beforeAll(async () => {
    db = await target.open();
    deps = {
      db,
      queue: {
        async cancel(jobId) {
          cancelled.push(jobId);
          return "cancelled";
        },
      },
      auth: (installationId) => probot.auth(installationId),
      allowedUsers: ["Trusted-Friend"],
      publicUrl: "https://pilot.example",
      logger,
    };
  });
  afterAll(() => db?.close());

  /** A job on a new repository and installation, triggered by a comment. */
  async function seed(
    overrides: {
      requester?: string;
      command?: string;
      /** The repository's `.github/vmpilot.yml`; none by default; false: never read. */
      config?: string | false;
      trigger?: Job["trigger"];
      label?: string;
    } = {},
  ) {
    const installationId = nextInstallation++;
    const repositoryId = nextRepository++;
    const name = `repo-${repositoryId}`;
    mockInstallationToken(installationId);
    if (overrides.config !== false) mockRepoConfig(`acme/${name}`, overrides.config);
    await upsertRepository(db.pool, { id: repositoryId, installationId, fullName: `acme/${name}` });
    const conversation = await findOrCreateConversation(db.pool, {
      repositoryId,
      number: 7,
      kind: "issue",
    });
    const context: JobContext = {
      owner: "acme",
      name,
      itemKind: "issue",
      title: "Broken",
      htmlUrl: `https://github.com/acme/${name}/issues/7`,
      cloneUrl: `https://github.com/acme/${name}.git`,
      defaultBranch: "main",
      target: { type: "issue_comment", id: 99 },
      appSlug: "vmpilot-bot",
      command: "vmpilot",
      label: overrides.label ?? "vmpilot",
    };
    const job = await insertJob(db.pool, {
      conversationId: conversation.id,
      installationId,
      repositoryId,
      repo: `acme/${name}`,
      number: 7,
      trigger: overrides.trigger ?? "command",
      command: overrides.command ?? "fix",
      requester: overrides.requester ?? "maintainer",
      triggerCommentId: 99,
      context: context as unknown as Record<string, unknown>,
    });
    return { job, repo: `acme/${name}`, repositoryId };
  }

  const run = async (job: Job, attempt = 1) => {
    const signal = new AbortController().signal;
    const outcome = await runJob(
      KINDS,
      { jobId: job.id, attempt, maxAttempts: 3, signal },
      deps,
      undefined,
    );
    return { outcome };
  };

  it("reacts, posts one progress comment and stores its id", async () => {
    const { job, repo } = await seed();
    mockPermission(repo, "maintainer", "write");
    github()
      .post(`/repos/${repo}/issues/comments/99/reactions`, { content: "eyes" })
      .reply(201, {});
    github().post(`/repos/${repo}/issues/7/comments`).reply(201, { id: 501 });
    expect((await run(job)).outcome).toBe("acknowledged");
    expect(await getJob(db.pool, job.id)).toMatchObject({
      status: "acknowledged",
      progressCommentId: 501,
    });
  });

  it("edits the stored comment on a rerun instead of posting again", async () => {
    const { job, repo } = await seed();
    await updateJob(db.pool, job.id, { progressCommentId: 502 });
    mockPermission(repo, "maintainer", "admin");
    github().patch(`/repos/${repo}/issues/comments/502`).reply(200, { id: 502 });
    expect((await run(job, 2)).outcome).toBe("acknowledged");
  });

  it("finds the comment a crashed attempt posted but never stored", async () => {
    const { job, repo } = await seed();
    mockPermission(repo, "maintainer", "maintain");
    github().post(`/repos/${repo}/issues/comments/99/reactions`).reply(200, {});
    github()
      .get(`/repos/${repo}/issues/7/comments`)
      .query(true)
      .reply(200, [
        { id: 600, body: "unrelated" },
        { id: 601, body: `vmpilot is on it\n<!-- vmpilot:job:${job.id} -->` },
      ]);
    github().patch(`/repos/${repo}/issues/comments/601`).reply(200, { id: 601 });
    expect((await run(job, 2)).outcome).toBe("acknowledged");
    expect((await getJob(db.pool, job.id))?.progressCommentId).toBe(601);
  });

  it("lets allow-listed users in without asking GitHub", async () => {
    const { job, repo } = await seed({ requester: "trusted-friend" });
    github().post(`/repos/${repo}/issues/comments/99/reactions`).reply(201, {});
    github().post(`/repos/${repo}/issues/7/comments`).reply(201, { id: 502 });
    expect((await run(job)).outcome).toBe("acknowledged");
  });

  it("refuses writers on an allow-list-only repository", async () => {
    const { job, repo, repositoryId } = await seed();
    await setRepositorySettings(db.pool, repositoryId, {
      triggerPolicy: "allow-list",
      allowedUsers: ["someone-else"],
    });
    let reply = "";
    github()
      .post(`/repos/${repo}/issues/7/comments`, (body) => {
        reply = body.body;
        return true;
      })
      .reply(201, { id: 503 });
    expect((await run(job)).outcome).toBe("refused");
    expect(reply).toContain("allow-list");
    expect((await getJob(db.pool, job.id))?.status).toBe("refused");
  });

  it("lets users on the repository's allow-list in", async () => {
    const { job, repo, repositoryId } = await seed({ requester: "contributor" });
    await setRepositorySettings(db.pool, repositoryId, { allowedUsers: ["Contributor"] });
    github().post(`/repos/${repo}/issues/comments/99/reactions`).reply(201, {});
    github().post(`/repos/${repo}/issues/7/comments`).reply(201, { id: 504 });
    expect((await run(job)).outcome).toBe("acknowledged");
  });

  it("takes who may trigger from vmpilot.yml over the settings page", async () => {
    const outsider = await seed({
      requester: "outsider",
      config: "allowedUsers: [Outsider]\nmodel: claude-opus-4-1\n",
    });
    await setRepositorySettings(db.pool, outsider.repositoryId, { triggerPolicy: "allow-list" });
    github().post(`/repos/${outsider.repo}/issues/comments/99/reactions`).reply(201, {});
    github().post(`/repos/${outsider.repo}/issues/7/comments`).reply(201, { id: 506 });
    const ack = await run(outsider.job);
    expect(ack).toEqual({ outcome: "acknowledged" });
    expect((await getRepository(db.pool, outsider.repositoryId))?.fileSettings).toEqual({
      allowedUsers: ["Outsider"],
    });

    const writer = await seed({ config: "triggerPolicy: allow-list\n" });
    github().post(`/repos/${writer.repo}/issues/7/comments`).reply(201, { id: 507 });
    expect((await run(writer.job)).outcome).toBe("refused");
  });

  it("decides from what it last knew of the file while reading it again", async () => {
    const { job, repo, repositoryId } = await seed({ config: "model: claude-opus-4-1\n" });
    await setRepositoryFileSettings(db.pool, repositoryId, { triggerPolicy: "allow-list" });
    // Refused without asking GitHub for the role: the stored allow-list policy decided.
    github().post(`/repos/${repo}/issues/7/comments`).reply(201, { id: 509 });
    expect((await run(job)).outcome).toBe("refused");
    expect((await getRepository(db.pool, repositoryId))?.fileSettings).toEqual({});
  });

  it("drops a job the file does not want without a word on GitHub", async () => {
    const labeled = await seed({ trigger: "label", label: "bug", config: "label: ai-fix\n" });
    expect((await run(labeled.job)).outcome).toBe("ignored");
    expect((await getJob(db.pool, labeled.job.id))?.status).toBe("ignored");

    const disabled = await seed({ config: "enabled: false\n" });
    expect((await run(disabled.job)).outcome).toBe("ignored");

    const wanted = await seed({ trigger: "label", label: "AI-Fix", config: "label: ai-fix\n" });
    mockPermission(wanted.repo, "maintainer", "write");
    github().post(`/repos/${wanted.repo}/issues/comments/99/reactions`).reply(201, {});
    github().post(`/repos/${wanted.repo}/issues/7/comments`).reply(201, { id: 508 });
    expect((await run(wanted.job)).outcome).toBe("acknowledged");
  });

  it("refuses someone GitHub does not know as a collaborator", async () => {
    const { job, repo } = await seed({ requester: "stranger" });
    github()
      .get(`/repos/${repo}/collaborators/stranger/permission`)
      .reply(404, { message: "Not Found" });
    github().post(`/repos/${repo}/issues/7/comments`).reply(201, { id: 505 });
    expect((await run(job)).outcome).toBe("refused");
  });

  it("refuses the same user on the same issue only once an hour", async () => {
    const { job, repo } = await seed({ requester: "stranger" });
    github()
      .get(`/repos/${repo}/collaborators/stranger/permission`)
      .times(2)
      .reply(404, { message: "Not Found" });
    github().post(`/repos/${repo}/issues/7/comments`).reply(201, { id: 509 });
    expect((await run(job)).outcome).toBe("refused");
    const again = await insertJob(db.pool, { ...job, context: job.context });
    mockRepoConfig(repo, undefined);
    // No second comment is mocked: posting one would fail on the unmatched request.
    expect((await run(again)).outcome).toBe("refused");
    expect((await getJob(db.pool, again.id))?.status).toBe("refused");
  });

  it("answers status with the conversation's current job", async () => {
    const { job: work, repo } = await seed();
    await updateJob(db.pool, work.id, { status: "running" });
    const statusJob = await insertJob(db.pool, {
      ...work,
      command: "status",
      context: work.context,
    });
    mockPermission(repo, "maintainer", "write");
    let reply = "";
    github()
      .post(`/repos/${repo}/issues/7/comments`, (body) => {
        reply = body.body;
        return true;
      })
      .reply(201, { id: 506 });
    expect((await run(statusJob)).outcome).toBe("answered");
    expect(reply).toContain(`Job [#${work.id}](https://pilot.example/jobs/${work.id})`);
    expect(reply).toContain("is running");
  });

  it("lists what is queued behind the running job in status", async () => {
    const { job: work, repo } = await seed();
    await updateJob(db.pool, work.id, { status: "running" });
    const behind = await insertJob(db.pool, { ...work, requester: "alice", context: work.context });
    const plan = await insertJob(db.pool, { ...work, command: "plan", context: work.context });
    const statusJob = await insertJob(db.pool, {
      ...work,
      command: "status",
      context: work.context,
    });
    mockPermission(repo, "maintainer", "write");
    let reply = "";
    github()
      .post(`/repos/${repo}/issues/7/comments`, (body) => {
        reply = body.body;
        return true;
      })
      .reply(201, { id: 508 });
    expect((await run(statusJob)).outcome).toBe("answered");
    // Ids differ between databases: name them.
    const ids = { w: work.id, b: behind.id, p: plan.id, s: statusJob.id };
    const named = Object.entries(ids).reduce(
      (text, [name, id]) => text.replace(new RegExp(`(#|jobs/|job:)${id}\\b`, "g"), `$1<${name}>`),
      reply,
    );
    expect(named).toMatchInlineSnapshot(`
      "Job [#<w>](https://pilot.example/jobs/<w>) (\`fix\`, asked by @maintainer) is running.

      Queued behind it, in the order they will run:
      - [#<b>](https://pilot.example/jobs/<b>) (\`fix\`, asked by @alice)
      - [#<p>](https://pilot.example/jobs/<p>) (\`plan\`, asked by @maintainer)

      <!-- vmpilot:job:<s> -->"
    `);
  });

  it("acknowledges a job waiting behind its conversation's running job at once, and its start edits that comment", async () => {
    const { job: work, repo } = await seed();
    await updateJob(db.pool, work.id, { status: "running" });
    const behind = await insertJob(db.pool, { ...work, context: work.context });
    const signal = new AbortController().signal;
    mockPermission(repo, "maintainer", "write");
    github()
      .post(`/repos/${repo}/issues/comments/99/reactions`, { content: "eyes" })
      .reply(201, {});
    let notice = "";
    github()
      .post(`/repos/${repo}/issues/7/comments`, (body) => {
        notice = body.body;
        return true;
      })
      .reply(201, { id: 509 });
    await acknowledgeWaiting(deps, behind.id, signal);
    expect(notice).toContain(`behind [job #${work.id}](https://pilot.example/jobs/${work.id})`);
    expect(await getJob(db.pool, behind.id)).toMatchObject({
      status: "queued",
      progressCommentId: 509,
    });
    // A second delivery of the notice does nothing, and so does a notice for a job with nothing
    // ahead of it (it starts, and answers, at once).
    await acknowledgeWaiting(deps, behind.id, signal);
    await acknowledgeWaiting(deps, work.id, signal);

    // Its turn: no second 👀, the same comment edited.
    await updateJob(db.pool, work.id, { status: "succeeded" });
    mockRepoConfig(repo, undefined);
    mockPermission(repo, "maintainer", "write");
    github().patch(`/repos/${repo}/issues/comments/509`).reply(200, { id: 509 });
    expect((await run(behind)).outcome).toBe("acknowledged");
  });

  it("waits for the notice that claimed the comment just before the job started", async () => {
    const { job: work, repo } = await seed();
    const behind = await insertJob(db.pool, { ...work, context: work.context });
    await db.pool.query("UPDATE jobs SET noticed_at = now() WHERE id = $1", [behind.id]);
    mockPermission(repo, "maintainer", "write");
    let edited = false;
    github()
      .patch(`/repos/${repo}/issues/comments/510`)
      .reply(() => {
        edited = true;
        return [200, { id: 510 }];
      });
    const started = run(behind);
    // The notice stores its comment while the job waits for it.
    await updateJob(db.pool, behind.id, { progressCommentId: 510 });
    expect((await started).outcome).toBe("acknowledged");
    expect(edited).toBe(true);
  });

  it("tells the user a dead job failed, in its own comment, with secrets redacted", async () => {
    const { job, repo } = await seed({ config: false });
    await updateJob(db.pool, job.id, { progressCommentId: 507 });
    let body = "";
    github()
      .patch(`/repos/${repo}/issues/comments/507`, (request) => {
        body = request.body;
        return true;
      })
      .reply(200, {});
    const token = `ghs_${"a".repeat(36)}`;
    await reportDead(deps, {
      jobId: job.id,
      conversationKey: "x",
      error: `push with ${token} failed`,
    });
    expect(body).toContain("failed after retries");
    expect(body).toContain(REDACTED);
    expect(body).not.toContain(token);
    expect(body).toContain("/vmpilot retry");
  });
});
