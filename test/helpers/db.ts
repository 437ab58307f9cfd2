import { randomBytes } from "node:crypto";
import pg from "pg";
import { vi } from "vitest";
import { chatKey, findOrCreateChat } from "../../src/store/chats.ts";
import { type Database, openDatabase } from "../../src/store/database.ts";
import { upsertRepository } from "../../src/store/installations.ts";
import { getJob, insertJob, type Job, type NewJob } from "../../src/store/jobs.ts";

export interface TestDatabaseTarget {
  name: "pglite" | "postgres";
  /** A fresh, migrated (unless migrate: false) database; close() also throws it away. */
  open(options?: { migrate?: boolean }): Promise<Database>;
}

let warned = false;

/**
 * The databases a store suite runs against: in-memory PGlite always, and a throwaway database on
 * the PostgreSQL server at TEST_DATABASE_URL when that is set. Use with describe.each.
 */
export function databases(): TestDatabaseTarget[] {
  const targets: TestDatabaseTarget[] = [
    {
      name: "pglite",
      open: (options) => openDatabase({ dataDir: "memory://", migrate: options?.migrate }),
    },
  ];
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

// Parallel test files each get their own database, dropped on close.
async function openPostgres(adminUrl: string, options?: { migrate?: boolean }): Promise<Database> {
  const name = `vmpilot_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
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
      const dropper = new pg.Client({ connectionString: adminUrl });
      await dropper.connect();
      try {
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}

let nextNumber = 1;

/** A repository and a chat on a new issue number, for tests that need a job to point at. */
export async function seedChat(db: Database, repositoryId = 1001) {
  await upsertRepository(db.pool, {
    id: repositoryId,
    installationId: 77,
    fullName: `acme/repo-${repositoryId}`,
  });
  const chat = await findOrCreateChat(db.pool, {
    repositoryId,
    number: nextNumber++,
    kind: "issue",
  });
  return { chat, key: chatKey(chat.id) };
}

export function newJob(chat: { id: number; repositoryId: number; number: number }): NewJob {
  return {
    chatId: chat.id,
    installationId: 77,
    repositoryId: chat.repositoryId,
    repo: `acme/repo-${chat.repositoryId}`,
    number: chat.number,
    trigger: "label",
    requester: "octocat",
    instruction: "fix it",
  };
}

export async function seedJob(db: Database, chat: Parameters<typeof newJob>[0]): Promise<Job> {
  return insertJob(db.pool, newJob(chat));
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
