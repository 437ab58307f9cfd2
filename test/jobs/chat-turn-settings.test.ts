// What a worker decides before a chat turn runs: whether its requester still passes the
// repository's gate (on the file as it is now), and how much it may spend, reserved so that
// concurrent turns never promise more than the day allows.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaults } from "../../src/config/repo-config.ts";
import { KINDS } from "../../src/jobs/kinds/index.ts";
import { runJob } from "../../src/jobs/run/runner.ts";
import { grant, readFile } from "../../src/jobs/run/settings.ts";
import {
  type ConversationOwner,
  createApiConversation,
  getApiConversation,
} from "../../src/store/api-conversations.ts";
import { findOrCreateConversation } from "../../src/store/conversations.ts";
import type { Database } from "../../src/store/database.ts";
import {
  setRepositorySettings,
  upsertInstallation,
  upsertRepository,
} from "../../src/store/installations.ts";
import {
  getJob,
  insertJob,
  type Job,
  SCRATCH_BUDGET_LOCK,
  updateJob,
} from "../../src/store/jobs.ts";
import { databases } from "../helpers/db.ts";
import { mockPermission, mockRepoConfig, useGitHubMock } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";

useGitHubMock();

const REPO = "acme/widgets";
const ALLOW_ALICE = "triggerPolicy: allow-list\nallowedUsers: [alice]\n";

describe.each(databases())("a chat turn's settings ($name)", (target) => {
  let db: Database;
  const deps = () => ({
    db,
    auth: async () => testOctokit(),
    defaults: { ...defaults, maxDailyCostUsd: 1, maxCostUsd: 1 },
    allowedUsers: [],
    publicUrl: "https://pilot.example",
    logger: { debug() {}, info() {}, warn() {}, error() {} },
    queue: { cancel: async () => "finished" as const },
  });
  /** The turn through the runner as far as its work, which this worker has none for. */
  const admit = async (job: Job) => {
    const signal = new AbortController().signal;
    const outcome = await runJob(
      KINDS,
      { jobId: job.id, attempt: 1, maxAttempts: 3, signal },
      deps(),
      undefined,
    );
    return { outcome, error: (await getJob(db.pool, job.id))?.error };
  };
  /** What the turn may spend: the scratch owner's budget, or the repository's over its file now. */
  const granted = async (job: Job, base = deps()) => {
    if (job.repositoryId === null) {
      const owner = (await getApiConversation(db.pool, job.conversationId))?.owner;
      if (!owner) throw new Error("no owner");
      return grant(base, job, { scratchOwner: owner }, undefined, "you");
    }
    const fresh = readFile(db.pool, testOctokit(), { id: 700, owner: "acme", name: "widgets" });
    return grant(base, job, { repositoryId: 700 }, fresh, "you");
  };

  beforeAll(async () => {
    db = await target.open();
    await upsertInstallation(db.pool, { id: 77, accountLogin: "acme" });
    await upsertRepository(db.pool, { id: 700, installationId: 77, fullName: REPO });
    // Room for several repository turns a day; scratch has the defaults' one dollar.
    await setRepositorySettings(db.pool, 700, { maxDailyCostUsd: 100 });
  });

  afterAll(async () => {
    await db?.close();
  });

  // People by GitHub user id; a login is only what they are called.
  const ids = new Map<string, number>();
  const ownerOf = (login: string, operator: boolean): ConversationOwner => {
    if (operator) return { kind: "operator" };
    if (!ids.has(login)) ids.set(login, 100 + ids.size);
    return { kind: "user", id: ids.get(login) as number, login };
  };

  async function turn(owner: string, options: { scratch?: boolean; operator?: boolean } = {}) {
    const repositoryId = options.scratch ? null : 700;
    const conversation = await createApiConversation(db.pool, {
      owner: ownerOf(owner, options.operator ?? false),
      repositoryId,
    });
    return insertJob(db.pool, {
      conversationId: conversation.id,
      installationId: options.scratch ? null : 77,
      repositoryId,
      repo: options.scratch ? "scratch" : REPO,
      number: null,
      trigger: "chat",
      requester: owner,
      instruction: "fix it",
      context: {
        agent: options.scratch ? "vmpilot" : `vmpilot/${REPO}`,
        cloneUrl: options.scratch ? null : `https://github.com/${REPO}.git`,
        system: "",
        askedHash: "h",
        transcript: "",
        pullRequest: true,
        operator: options.operator ?? false,
      },
    });
  }

  it("refuses a repository turn whose requester the file's allow-list now leaves out", async () => {
    const job = await turn("bob");
    mockRepoConfig(REPO, ALLOW_ALICE);
    expect(await admit(job)).toEqual({
      outcome: "failed",
      error: "bob may no longer use vmpilot on acme/widgets (its triggerPolicy or allowedUsers).",
    });
    const { rows } = await db.pool.query("SELECT reserved_usd FROM jobs WHERE id = $1", [job.id]);
    expect(rows[0]?.reserved_usd).toBeNull();
  });

  it("runs the turns of whoever the gate admits: a writer, the allow-list, the operator", async () => {
    mockRepoConfig(REPO);
    mockPermission(REPO, "carol", "write");
    expect(await admit(await turn("carol"))).toEqual({ outcome: "acknowledged", error: null });
    for (const [owner, operator] of [
      ["alice", false],
      ["operator", true],
    ] as const) {
      mockRepoConfig(REPO, ALLOW_ALICE);
      const admitted = await admit(await turn(owner, { operator }));
      expect(admitted).toEqual({ outcome: "acknowledged", error: null });
    }
  });

  it("holds a person whose login is 'operator' to the gate, and goes on no chat of nobody's", async () => {
    mockRepoConfig(REPO, ALLOW_ALICE);
    expect(await admit(await turn("operator"))).toMatchObject({
      outcome: "failed",
      error: expect.stringContaining("operator may no longer use vmpilot on acme/widgets"),
    });
    // A chat carried over from before owners were ids, whose owner could not be told.
    const job = await turn("nobody", { scratch: true });
    await db.pool.query("UPDATE conversations SET api_owner_id = NULL WHERE id = $1", [
      job.conversationId,
    ]);
    expect(await admit(job)).toEqual({
      outcome: "failed",
      error: "This conversation has no known owner; start a new chat.",
    });
  });

  it("reserves a scratch budget, so concurrent scratch turns never promise more than the day allows", async () => {
    const jobs: Job[] = [];
    for (let i = 0; i < 3; i++) jobs.push(await turn("mona", { scratch: true }));
    const results = await Promise.all(jobs.map((job) => granted(job)));
    expect(results.flatMap((r) => ("budgetUsd" in r ? [r.budgetUsd] : []))).toEqual([1]);
    expect(results.filter((r) => !("budgetUsd" in r))).toEqual([
      { limit: expect.stringContaining("Your scratch conversations reached the daily cost") },
      { limit: expect.stringContaining("Your scratch conversations reached the daily cost") },
    ]);
    // Another owner's scratch budget is their own.
    expect(await granted(await turn("nils", { scratch: true }))).toMatchObject({ budgetUsd: 1 });
  });

  it("holds a key's owner to their monthly budget, counting their issue jobs too", async () => {
    const petra = ownerOf("petra", false) as { id: number };
    const issue = await findOrCreateConversation(db.pool, {
      repositoryId: 700,
      number: 1,
      kind: "issue",
    });
    const asked = await insertJob(db.pool, {
      conversationId: issue.id,
      installationId: 77,
      repositoryId: 700,
      repo: REPO,
      number: 1,
      trigger: "label",
      requester: "petra",
      context: { requesterId: petra.id },
    });
    await updateJob(db.pool, asked.id, { costUsd: 1, status: "succeeded" });
    // Scratch: the defaults' cap.
    const capped = { ...deps(), defaults: { ...deps().defaults, maxMonthlyCostUsdPerUser: 1 } };
    expect(await granted(await turn("petra", { scratch: true }), capped)).toEqual({
      limit: expect.stringContaining("You reached the monthly cost limit per person ($1.00,"),
    });
    // A repository: its own cap, over the same month.
    mockRepoConfig(REPO, "maxMonthlyCostUsdPerUser: 1.5\n");
    expect(await granted(await turn("petra"))).toMatchObject({
      settings: expect.objectContaining({ maxMonthlyCostUsdPerUser: 1.5 }),
      budgetUsd: 0.5,
    });
  });

  // PGlite has one backend, so its transactions never overlap; PostgreSQL's do.
  it.runIf(target.name === "postgres")(
    "reserves a scratch budget under a lock on its owner",
    async () => {
      const job = await turn("olga", { scratch: true });
      const holder = await db.pool.connect();
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [
        SCRATCH_BUDGET_LOCK,
        `user ${ids.get("olga")}`,
      ]);
      const pending = granted(job);
      const waiting = async () => {
        const { rows } = await holder.query(
          "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        );
        return rows.length === 1;
      };
      const deadline = Date.now() + 5000;
      while (!(await waiting()) && Date.now() < deadline);
      expect(await waiting()).toBe(true);
      await holder.query("COMMIT");
      holder.release();
      expect(await pending).toMatchObject({ budgetUsd: 1 });
    },
  );
});
