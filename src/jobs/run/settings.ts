// The settings every job runs with, resolved here and nowhere else (but the settings page, which
// shows where each value comes from): the operator's defaults < the settings page <
// `.github/vmpilot.yml`, which cannot raise the page's cost ceilings. The runner resolves them once
// for a job and hands them on; the budget a job may spend is reserved under them, with the refusal
// texts every door and kind shares.
import type { ProbotOctokit } from "probot";
import {
  checkRepoConfig,
  type RepoConfig,
  type RepoSettings,
  type ResolvedSettings,
  resolveSettings,
} from "../../config/repo-config.ts";
import { loadRepoConfig, type RepoConfigLoad } from "../../github/repo-config-loader.ts";
import type { ConversationOwner } from "../../store/api-conversations.ts";
import {
  getRepository,
  type Repository,
  setRepositoryFileSettings,
} from "../../store/installations.ts";
import { reserveBudget } from "../../store/jobs.ts";
import type { Queryable } from "../../store/sql.ts";
import type { JobDeps } from "./deps.ts";

/**
 * The file's keys the intake, the acknowledgement, the ready-for-review check and the automations'
 * schedules act on before (or without) reading the file again.
 */
const TRIGGER_KEYS = [
  "enabled",
  "label",
  "triggerPolicy",
  "allowedUsers",
  "ci",
  "readyForReview",
  "automations",
] as const;

/** A repository's settings over the defaults: the stored page, then the file when there is one. */
export function settingsOver(
  repository: Pick<Repository, "settings"> | undefined,
  file: RepoConfig | null,
  defaults: RepoSettings | undefined,
): ResolvedSettings {
  return resolveSettings({ defaults, page: pageSettings(repository?.settings), file });
}

/** Stored page settings; anything the schema no longer accepts is ignored rather than fatal. */
export function pageSettings(stored: Record<string, unknown> | undefined): RepoConfig | null {
  if (!stored) return null;
  const parsed = checkRepoConfig(stored);
  return parsed.ok ? parsed.config : null;
}

/** What the file said when last read; undefined when that is unknown, or was invalid. */
function knownFile(repository: Pick<Repository, "fileSettings"> | undefined) {
  const known = repository?.fileSettings ? checkRepoConfig(repository.fileSettings) : undefined;
  return known?.ok ? known.config : undefined;
}

/** A repository's settings as last known, without reading the file (what the intake decided on). */
export function knownSettings(
  repository: Pick<Repository, "settings" | "fileSettings"> | undefined,
  defaults: RepoSettings | undefined,
): RepoSettings {
  return settingsOver(repository, knownFile(repository) ?? null, defaults).values;
}

/** An invalid file is reported where a job runs; until it is fixed, the page decides alone. */
const fileOf = (load: RepoConfigLoad): RepoConfig | null => (load.ok ? load.config : null);

/** Stores the trigger keys of a fresh read of the file, for whoever decides before reading it. */
export async function rememberFileSettings(
  db: Queryable,
  repositoryId: number,
  load: RepoConfigLoad,
): Promise<void> {
  if (!load.ok) return;
  const file = load.config;
  const known = Object.fromEntries(
    TRIGGER_KEYS.flatMap((key) => (key in file ? [[key, file[key]]] : [])),
  );
  await setRepositoryFileSettings(db, repositoryId, known);
}

/** Reads the file fresh and remembers its trigger keys. */
export async function readFile(
  db: Queryable,
  octokit: ProbotOctokit,
  repository: { id: number; owner: string; name: string },
): Promise<RepoConfigLoad> {
  const load = await loadRepoConfig(octokit, { owner: repository.owner, repo: repository.name });
  await rememberFileSettings(db, repository.id, load);
  return load;
}

/**
 * What decides whether a job is wanted and who may start it: the page over what the file said
 * when last read, so that an issue's 👀 does not wait for the read; a push that changed the file
 * makes that unknown, and then the read is awaited, as it is with `wait` (a chat turn's person may
 * have lost access since). `fresh` is that read, for the settings the job then runs with.
 */
export async function triggerSettings(
  db: Queryable,
  octokit: ProbotOctokit,
  repository: { id: number; owner: string; name: string },
  defaults: RepoSettings | undefined,
  wait: boolean,
): Promise<{ settings: RepoSettings; fresh: Promise<RepoConfigLoad> }> {
  const fresh = readFile(db, octokit, repository);
  // Settled by whoever awaits it; meanwhile a failure must not count as unhandled.
  fresh.catch(() => undefined);
  const stored = await getRepository(db, repository.id);
  const file = (wait ? undefined : knownFile(stored)) ?? fileOf(await fresh);
  return { settings: settingsOver(stored, file, defaults).values, fresh };
}

/**
 * A repository's settings as the chat face checks them on every request: the page over what the
 * file said when last read; when that is unknown, the file is read, and remembered, now.
 */
export async function repositoryTriggerSettings(
  db: Queryable,
  octokit: ProbotOctokit,
  repository: Repository,
  defaults: RepoSettings | undefined,
): Promise<RepoSettings> {
  const known = knownFile(repository);
  if (known) return settingsOver(repository, known, defaults).values;
  const [owner = "", name = ""] = repository.fullName.split("/");
  const load = await readFile(db, octokit, { id: repository.id, owner, name });
  return settingsOver(repository, fileOf(load), defaults).values;
}

export function startOfUtcDay(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
}

export function startOfUtcMonth(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

/** Why a job or a chat turn may not spend: the texts every door and kind says it with. */
export const limitText = {
  /** `whose`: "This repository", "Your scratch conversations". */
  daily: (settings: RepoSettings, whose: string) =>
    `${whose} reached the daily cost limit ($${settings.maxDailyCostUsd.toFixed(2)}), counting what running jobs may still spend; it resets tomorrow (UTC), or a maintainer can raise maxDailyCostUsd.`,
  monthly(settings: RepoSettings, who: "requester" | "you"): string {
    const cap = settings.maxMonthlyCostUsdPerUser ?? 0;
    const [subject, their] = who === "you" ? ["You", "your"] : ["This job's requester", "their"];
    return `${subject} reached the monthly cost limit per person ($${cap.toFixed(2)}, maxMonthlyCostUsdPerUser), which counts ${their} jobs and chat turns this month (UTC) in every repository vmpilot works on, with what running ones may still spend; it resets on the 1st, or a maintainer can raise maxMonthlyCostUsdPerUser.`;
  },
  job: (settings: RepoSettings) =>
    `This job already spent its limit of $${settings.maxCostUsd.toFixed(2)} (maxCostUsd).`,
};

/** Whose budget a job spends: its repository's, or a conversation owner's scratch workspace's. */
export type BudgetScope = { repositoryId: number } | { scratchOwner: ConversationOwner };

/**
 * Reserves what this attempt may spend under the settings: the day's limit of its scope, the job's
 * own, and its spender's monthly one where the settings cap it. A refusal says which was reached.
 */
async function reserve(
  deps: Pick<JobDeps, "db">,
  jobId: number,
  scope: BudgetScope,
  settings: RepoSettings,
  /** Whom a refusal speaks to: the person at a chat client, or about an issue's requester. */
  told: "requester" | "you",
  now: Date,
): Promise<{ budgetUsd: number } | { refused: string }> {
  const cap = settings.maxMonthlyCostUsdPerUser;
  const budget = await reserveBudget(deps.db.pool, {
    ...("repositoryId" in scope
      ? { repositoryId: scope.repositoryId }
      : { scratchOwner: scope.scratchOwner }),
    jobId,
    since: startOfUtcDay(now),
    maxDailyUsd: settings.maxDailyCostUsd,
    maxJobUsd: settings.maxCostUsd,
    ...(cap !== null && { monthly: { since: startOfUtcMonth(now), maxUsd: cap } }),
  });
  const scratch = "scratchOwner" in scope;
  if (budget.dailyLeftUsd <= 0) {
    const whose = scratch ? "Your scratch conversations" : "This repository";
    return { refused: limitText.daily(settings, whose) };
  }
  if (budget.monthlyLeftUsd !== undefined && budget.monthlyLeftUsd <= 0) {
    return { refused: limitText.monthly(settings, told) };
  }
  if (budget.jobLeftUsd <= 0) return { refused: limitText.job(settings) };
  return { budgetUsd: budget.grantUsd };
}

/** The settings a job's work runs with, resolved once, and what this attempt may spend. */
export interface Granted {
  settings: RepoSettings;
  /** Where each value comes from. */
  sources: ResolvedSettings["sources"];
  /** The repository's file as read for the job; null on scratch or when it has none. */
  file: RepoConfig | null;
  budgetUsd: number;
}

/** Why the settings refuse the work. */
export type SettingsRefusal =
  | { invalid: Extract<RepoConfigLoad, { ok: false }> }
  | { disabled: true }
  | { limit: string };

/** What a refusal says, in a job's log or to a person at a chat client. */
export function refusalText(refusal: SettingsRefusal): string {
  if ("limit" in refusal) return refusal.limit;
  if ("disabled" in refusal) return "vmpilot is turned off for this repository (`enabled: false`).";
  return `invalid ${refusal.invalid.source}: ${refusal.invalid.message}`;
}

/**
 * The settings of a job's work: the file as read for it over the page and the defaults (the
 * defaults alone on scratch), then its budget reserved. An attempt that delivers the run an
 * earlier one kept (`spends: false`, kept.ts) calls no model: it reserves nothing, and no limit
 * the kept run itself reached stops its delivery.
 */
export async function grant(
  deps: Pick<JobDeps, "db" | "defaults">,
  job: { id: number },
  scope: BudgetScope,
  fresh: Promise<RepoConfigLoad> | undefined,
  told: "requester" | "you",
  { spends = true, now = new Date() }: { spends?: boolean; now?: Date } = {},
): Promise<Granted | SettingsRefusal> {
  let file: RepoConfig | null = null;
  let repository: Repository | undefined;
  if (fresh) {
    const load = await fresh;
    if (!load.ok) return { invalid: load };
    file = load.config;
    if ("repositoryId" in scope) repository = await getRepository(deps.db.pool, scope.repositoryId);
  }
  const resolved = settingsOver(repository, file, deps.defaults);
  const settings = resolved.values;
  if (!settings.enabled) return { disabled: true };
  if (!spends) return { settings, sources: resolved.sources, file, budgetUsd: 0 };
  const budget = await reserve(deps, job.id, scope, settings, told, now);
  if ("refused" in budget) return { limit: budget.refused };
  return { settings, sources: resolved.sources, file, budgetUsd: budget.budgetUsd };
}
