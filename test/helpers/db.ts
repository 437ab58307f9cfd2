import { randomBytes } from "node:crypto";
import { cpSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { inject, vi } from "vitest";
import { conversationKey, findOrCreateConversation } from "../../src/store/conversations.ts";
import { type Database, openDatabase } from "../../src/store/database.ts";
import { upsertRepository } from "../../src/store/installations.ts";
import { getJob, insertJob, type Job, type NewJob } from "../../src/store/jobs.ts";
import { adminQuery, type DatabaseTemplates } from "./db-templates.ts";

export interface TestDatabaseTarget {
  name: "pglite" | "postgres";
  /** A fresh, migrated (unless migrate: false) database; close() also throws it away. */
  open(options?: { migrate?: boolean }): Promise<Database>;
}

/** The run's templates (db-templates.ts); none outside vitest, as in the benchmarks. */
function templates(): DatabaseTemplates | undefined {
  return process.env.VITEST ? inject("databaseTemplates") : undefined;
}

/**
 * A PGlite data dir of its own under `dataDir`, initialised and (unless migrate: false) migrated,
 * for a process that opens the embedded database itself (`npm start`, the CLI). Without the run's
 * templates the process creates it.
 */
export async function seedDataDir(dataDir: string, options?: { migrate?: boolean }): Promise<void> {
  const from = templates();
  if (!from) return;
  const template = options?.migrate === false ? from.fresh : from.migrated;
  // Synchronous: for a data dir's ~1,100 files, the promise-based cp took some 180 ms of CPU a
  // copy and cpSync 32 ms (some 80 copies a run); the worker waits for the copy either way.
  cpSync(join(template, "pglite"), join(dataDir, "pglite"), { recursive: true });
}

/**
 * A fresh database for a test file or a test, migrated unless migrate: false, thrown away on
 * close(): a clone on TEST_DATABASE_URL's server when that is set, else embedded. A PGlite store
 * is a process of its own, some 1.5 core-s to start on a slow 2-core machine, and some 40 files
 * open one: on the server, the files under chat/, jobs/, web/ and intake/ took 11 % less CPU.
 * PGlite keeps its own runs: the store and queue suites run on both (databases()), and the e2e
 * files, which drive the app as `npm start` runs it, open it by name.
 */
export function openTestDatabase(options?: { migrate?: boolean }): Promise<Database> {
  const adminUrl = process.env.TEST_DATABASE_URL;
  return adminUrl ? openPostgres(adminUrl, options) : openEmbeddedTestDatabase(options);
}

/**
 * A fresh embedded (PGlite) database: a copy of the run's template. The in-memory database it
 * stands for would run initdb each time.
 */
export async function openEmbeddedTestDatabase(options?: { migrate?: boolean }): Promise<Database> {
  const root = templates()?.root;
  if (!root) return openDatabase({ dataDir: "memory://", migrate: options?.migrate });
  const dataDir = await mkdtemp(join(root, "db-"));
  try {
    await seedDataDir(dataDir, options);
    const db = await openDatabase({ dataDir, migrate: options?.migrate });
    return {
      ...db,
      async close() {
        await db.close();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
}

let warned = false;

/**
 * The databases a store suite runs against: embedded PGlite always, and a throwaway database on
 * the PostgreSQL server at TEST_DATABASE_URL when that is set. Use with describe.each.
 */
export function databases(): TestDatabaseTarget[] {
  const targets: TestDatabaseTarget[] = [{ name: "pglite", open: openEmbeddedTestDatabase }];
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (adminUrl) {
    targets.push({ name: "postgres", open: (options) => openPostgres(adminUrl, options) });
  } else if (!warned) {
    warned = true;
    console.warn("TEST_DATABASE_URL is not set: skipping the real PostgreSQL runs, PGlite only.");
  }
  return targets;
}

/** Another connection pool onto the same database, as a second process would have. */
export function connectAgain(db: Database): Promise<Database> {
  return openDatabase({ databaseUrl: db.url, dataDir: "", migrate: false });
}

// Parallel test files each get their own database, dropped on close: a clone of the run's
// migrated template, or an empty one.
async function openPostgres(adminUrl: string, options?: { migrate?: boolean }): Promise<Database> {
  const name = `vmpilot_test_${randomBytes(6).toString("hex")}`;
  const template = options?.migrate === false ? undefined : templates()?.postgres;
  await adminQuery(adminUrl, `CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ""}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = await openDatabase({
    databaseUrl: url.toString(),
    dataDir: "",
    migrate: options?.migrate,
  });
  return {
    ...db,
    async close() {
      await db.close();
      await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

// Counted per database, from 1: in a worker shared between files (vitest.config.ts) a module-wide
// count would depend on the files before, and reach the numbers a test picked by hand.
const nextNumbers = new WeakMap<Database, number>();

/** A repository and a conversation on a new issue number, for tests that need a job to point at. */
export async function seedConversation(db: Database, repositoryId = 1001) {
  await upsertRepository(db.pool, {
    id: repositoryId,
    installationId: 77,
    fullName: `acme/repo-${repositoryId}`,
  });
  const number = nextNumbers.get(db) ?? 1;
  nextNumbers.set(db, number + 1);
  const conversation = await findOrCreateConversation(db.pool, {
    repositoryId,
    number,
    kind: "issue",
  });
  return { conversation, key: conversationKey(conversation.id) };
}

export function newJob(conversation: { id: number; repositoryId: number; number: number }): NewJob {
  return {
    conversationId: conversation.id,
    installationId: 77,
    repositoryId: conversation.repositoryId,
    repo: `acme/repo-${conversation.repositoryId}`,
    number: conversation.number,
    trigger: "label",
    requester: "octocat",
    instruction: "fix it",
  };
}

export async function seedJob(
  db: Database,
  conversation: Parameters<typeof newJob>[0],
): Promise<Job> {
  return insertJob(db.pool, newJob(conversation));
}

/** Resolves once the queue is done with the job: its row says so (no sleeps). */
export function jobFinished(db: Database, jobId: number): Promise<Job> {
  return vi.waitFor(
    async () => {
      const job = await getJob(db.pool, jobId);
      if (!job?.finishedAt) throw new Error(`job ${jobId} is still ${job?.status}`);
      return job;
    },
    { timeout: 60_000, interval: 50 },
  );
}
