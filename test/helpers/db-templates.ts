// Vitest globalSetup: the store is created and migrated once per run, not once per test file.
// Starting PGlite on a new database runs initdb (some 2 s); copying an initialised data dir and
// opening it takes a fifth of that. On TEST_DATABASE_URL, a template database that CREATE
// DATABASE … TEMPLATE clones. db.ts hands out the copies and clones.
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { cp, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { createQueue } from "../../src/jobs/queue/queue.ts";
import { isRunning } from "../../src/store/data-dir-lock.ts";
import { type Database, openDatabase } from "../../src/store/database.ts";

export interface DatabaseTemplates {
  /** Where the copies go: tmpfs when there is one, as the copies are thrown away. */
  root: string;
  /** PGlite data dirs (their pglite/ holds the files): initialised only, and migrated. */
  fresh: string;
  migrated: string;
  /** A migrated database on TEST_DATABASE_URL's server, when that is set. */
  postgres?: string;
}

declare module "vitest" {
  interface ProvidedContext {
    databaseTemplates: DatabaseTemplates;
  }
}

/** A directory for this run's copies; those of runs that died without their teardown go. */
async function makeRoot(): Promise<string> {
  const base = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  for (const name of await readdir(base)) {
    const pid = Number(/^vmpilot-test-(\d+)-/.exec(name)?.[1]);
    if (pid && !isRunning(pid)) await rm(join(base, name), { recursive: true, force: true });
  }
  return mkdtemp(join(base, `vmpilot-test-${process.pid}-`));
}

async function makeTemplates(): Promise<DatabaseTemplates> {
  const root = await makeRoot();
  const fresh = join(root, "fresh");
  const migrated = join(root, "migrated");
  await (await openDatabase({ dataDir: fresh, migrate: false })).close();
  await cp(join(fresh, "pglite"), join(migrated, "pglite"), { recursive: true });
  const adminUrl = process.env.TEST_DATABASE_URL;
  const [postgres] = await Promise.all([
    adminUrl ? makePostgresTemplate(adminUrl) : undefined,
    withQueueSchema(openDatabase({ dataDir: migrated })),
  ]);
  return { root, fresh, migrated, postgres };
}

async function makePostgresTemplate(adminUrl: string): Promise<string> {
  // A server on this machine: the templates of runs that died without their teardown go.
  if (/^(127\.\d+\.\d+\.\d+|localhost|\[::1\]|)$/.test(new URL(adminUrl).hostname)) {
    for (const name of await templateNames(adminUrl)) {
      const pid = Number(/^vmpilot_template_(\d+)_/.exec(name)?.[1]);
      if (pid && !isRunning(pid)) await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name}`);
    }
  }
  const name = `vmpilot_template_${process.pid}_${randomBytes(6).toString("hex")}`;
  await adminQuery(adminUrl, `CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  // Closed again: CREATE DATABASE … TEMPLATE refuses a template anyone is connected to.
  await withQueueSchema(openDatabase({ databaseUrl: url.toString(), dataDir: "" }));
  return name;
}

/**
 * Starts and stops a queue on the migrated template, then closes it: pg-boss's schema and the
 * queues are in every copy, and a test's first queue start takes a tenth of the time (some 40 ms,
 * not 380 ms).
 */
async function withQueueSchema(opening: Promise<Database>): Promise<void> {
  const db = await opening;
  try {
    const queue = createQueue(db);
    await queue.start();
    await queue.stop();
  } finally {
    await db.close();
  }
}

export async function adminQuery(adminUrl: string, sql: string): Promise<pg.QueryResult> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    return await admin.query(sql);
  } finally {
    await admin.end();
  }
}

async function templateNames(adminUrl: string): Promise<string[]> {
  const { rows } = await adminQuery(
    adminUrl,
    "SELECT datname FROM pg_database WHERE datname LIKE 'vmpilot\\_template\\_%'",
  );
  return rows.map((row) => String(row.datname));
}

async function removeTemplates(templates: DatabaseTemplates): Promise<void> {
  await rm(templates.root, { recursive: true, force: true });
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (adminUrl && templates.postgres) {
    await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${templates.postgres} WITH (FORCE)`);
  }
}

// Each project that lists this file runs it; they share one set of templates, removed after the
// last of them is done.
const shared = globalThis as {
  vmpilotTemplates?: { made: Promise<DatabaseTemplates>; users: number };
};

export default async function setup(project: TestProject) {
  shared.vmpilotTemplates ??= { made: makeTemplates(), users: 0 };
  const entry = shared.vmpilotTemplates;
  entry.users += 1;
  project.provide("databaseTemplates", await entry.made);
  return async () => {
    entry.users -= 1;
    if (entry.users > 0) return;
    shared.vmpilotTemplates = undefined;
    await removeTemplates(await entry.made);
  };
}
