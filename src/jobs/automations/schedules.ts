// The repositories' scheduled automations: their pg-boss schedules kept in line with the file, and
// each slot of a schedule turned into a job on a conversation of its own.
//
// Where the schedules come from: repositories.file_settings, what `.github/vmpilot.yml` said when
// last read (every job reads it; so does this module). They are set from it in two places only:
// after a push to the default branch that changed the file (the intake forgets what it knew and
// queues a sync, which reads the file again), and at every installation sync, which reads the
// files nobody has read since they changed and sets the schedules of every repository, dropping
// those of repositories the app lost. A job reading the file in between changes the schedules at
// the next sync; a fire reads the file once more before it makes a job, so a schedule that
// outlived its automation runs nothing and is dropped.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import {
  type Automation,
  checkRepoConfig,
  type RepoConfig,
  type RepoSettings,
} from "../../config/repo-config.ts";
import { loadRepoConfig } from "../../github/repo-config-loader.ts";
import type { Logger } from "../../log/logger.ts";
import {
  type AutomationRepository,
  activeRepositories,
  unfinishedScheduledRun,
} from "../../store/automation-runs.ts";
import { conversationKey, createAutomationConversation } from "../../store/conversations.ts";
import type { Database } from "../../store/database.ts";
import { recordDelivery } from "../../store/deliveries.ts";
import { insertJob, type Job } from "../../store/jobs.ts";
import { withTransaction } from "../../store/sql.ts";
import { parseStored } from "../../store/stored-value.ts";
import type {
  AutomationMessage,
  AutomationSync,
  Queue,
  ScheduledAutomation,
} from "../queue/queue.ts";
import { rememberFileSettings, settingsOver } from "../run/settings.ts";

export interface AutomationDeps {
  db: Database;
  queue: Pick<Queue, "setSchedules" | "scheduledRepositories" | "enqueueJob" | "wake">;
  auth(installationId: number): Promise<ProbotOctokit>;
  /** The app's slug: a scheduled run's requester is the app itself, `<slug>[bot]`. */
  appSlug(): Promise<string>;
  /** The worker's defaults, under the settings page and the file. */
  defaults?: RepoSettings;
  logger: Logger;
}

/** What a scheduled run's job remembers (jobs.context): it has no item to read it from. */
const scheduledContextSchema = z.object({
  owner: z.string(),
  name: z.string(),
  cloneUrl: z.string(),
  defaultBranch: z.string(),
  appSlug: z.string(),
  automation: z.object({ name: z.string() }),
});
export type ScheduledContext = z.infer<typeof scheduledContextSchema>;

export function readScheduledContext(job: Pick<Job, "id" | "context">): ScheduledContext {
  return parseStored(scheduledContextSchema, job.context, `jobs.context of job ${job.id}`);
}

/** The automations the file named when last read; undefined when that is unknown. */
export function knownAutomations(
  repository: Pick<AutomationRepository, "fileSettings">,
): Automation[] | undefined {
  if (!repository.fileSettings) return undefined;
  const known = checkRepoConfig(repository.fileSettings);
  return known.ok ? (known.config.automations ?? []) : undefined;
}

function scheduled(automations: readonly Automation[]): ScheduledAutomation[] {
  return automations.flatMap((a) =>
    a.schedule === undefined ? [] : [{ name: a.name, cron: a.schedule }],
  );
}

/** Runs an automation message: a schedule's slot, or a sync after the file changed. */
export function handleAutomationMessage(
  deps: AutomationDeps,
  message: AutomationMessage,
  id: string,
  signal: AbortSignal,
): Promise<void> {
  return message.kind === "schedule"
    ? fireSchedule(deps, message, id)
    : syncAutomations(deps, message, signal);
}

/**
 * Reads the file of every repository in scope whose file is unknown, and sets the schedules of
 * every repository in scope whose file is known. A sync of everything also drops the schedules of
 * repositories the app can no longer act on.
 */
export async function syncAutomations(
  deps: AutomationDeps,
  scope: Partial<Omit<AutomationSync, "kind">>,
  signal?: AbortSignal,
): Promise<void> {
  const repositories = await activeRepositories(deps.db.pool, scope);
  for (const repository of repositories) {
    signal?.throwIfAborted();
    const automations = knownAutomations(repository) ?? (await readAutomations(deps, repository));
    // Still unknown (unreadable, or invalid): its schedules stay until the file can be read.
    if (automations === undefined) continue;
    try {
      await deps.queue.setSchedules(repository.id, scheduled(automations));
    } catch (error) {
      deps.logger.warn(
        { err: error, repositoryId: repository.id },
        "could not set a repository's automation schedules",
      );
    }
  }
  if (scope.installationId !== undefined || scope.repositoryId !== undefined) return;
  const active = new Set(repositories.map((repository) => repository.id));
  for (const id of await deps.queue.scheduledRepositories()) {
    if (!active.has(id)) await deps.queue.setSchedules(id, []);
  }
}

/** Reads the file and remembers it; its automations, or undefined when it cannot be read. */
async function readAutomations(
  deps: AutomationDeps,
  repository: AutomationRepository,
): Promise<Automation[] | undefined> {
  const [owner = "", repo = ""] = repository.fullName.split("/");
  try {
    const load = await loadRepoConfig(await deps.auth(repository.installationId), { owner, repo });
    await rememberFileSettings(deps.db.pool, repository.id, load);
    return load.ok ? (load.config.automations ?? []) : undefined;
  } catch (error) {
    deps.logger.warn(
      { err: error, repositoryId: repository.id },
      "could not read a repository's vmpilot.yml for its automations",
    );
    return undefined;
  }
}

const RepositoryFacts = z.object({ clone_url: z.string(), default_branch: z.string() });

/**
 * A schedule's slot came: makes the automation's job, if the file (read now) still has it with
 * this schedule, vmpilot is enabled there, and the automation's previous run has finished. The
 * message id makes it once per slot, even when the message is run again.
 */
async function fireSchedule(
  deps: AutomationDeps,
  fire: Extract<AutomationMessage, { kind: "schedule" }>,
  messageId: string,
): Promise<void> {
  const db = deps.db.pool;
  const log = { repositoryId: fire.repositoryId, automation: fire.name };
  const [repository] = await activeRepositories(db, { repositoryId: fire.repositoryId });
  if (!repository) {
    // Removed, or its installation is gone: nothing of it should run.
    await deps.queue.setSchedules(fire.repositoryId, []);
    return;
  }
  const [owner = "", repo = ""] = repository.fullName.split("/");
  const octokit = await deps.auth(repository.installationId);
  const load = await loadRepoConfig(octokit, { owner, repo });
  await rememberFileSettings(db, repository.id, load);
  if (!load.ok) {
    deps.logger.warn({ ...log, error: load.message }, "scheduled automation skipped: invalid file");
    return;
  }
  const automations = load.config.automations ?? [];
  const automation = automations.find((a) => a.name === fire.name && a.schedule === fire.cron);
  if (!automation) {
    await deps.queue.setSchedules(repository.id, scheduled(automations));
    return;
  }
  if (!enabled(repository, load.config, deps.defaults)) {
    deps.logger.info(log, "scheduled automation skipped: vmpilot is disabled here");
    return;
  }
  const running = await unfinishedScheduledRun(db, repository.id, automation.name);
  if (running !== undefined) {
    deps.logger.info({ ...log, running }, "scheduled automation skipped: its last run goes on");
    return;
  }
  const facts = RepositoryFacts.parse((await octokit.rest.repos.get({ owner, repo })).data);
  const slug = await deps.appSlug();
  const deliveryId = `schedule:${messageId}`;
  const jobId = await withTransaction(db, async (client) => {
    const fresh = await recordDelivery(client, {
      id: deliveryId,
      event: "schedule",
      installationId: repository.installationId,
      repositoryId: repository.id,
    });
    if (!fresh) return undefined;
    const conversationId = await createAutomationConversation(client, repository.id);
    const context: ScheduledContext = {
      owner,
      name: repo,
      cloneUrl: facts.clone_url,
      defaultBranch: facts.default_branch,
      appSlug: slug,
      automation: { name: automation.name },
    };
    const job = await insertJob(client, {
      conversationId,
      installationId: repository.installationId,
      repositoryId: repository.id,
      repo: repository.fullName,
      number: null,
      trigger: "automation",
      command: "fix",
      requester: `${slug}[bot]`,
      instruction: automation.prompt,
      deliveryId,
      context,
    });
    await deps.queue.enqueueJob(client, {
      jobId: job.id,
      conversationKey: conversationKey(conversationId),
    });
    return job.id;
  });
  if (jobId === undefined) return;
  deps.queue.wake();
  deps.logger.info({ ...log, jobId }, "scheduled automation queued");
}

function enabled(
  repository: AutomationRepository,
  file: RepoConfig,
  defaults: RepoSettings | undefined,
): boolean {
  return settingsOver(repository, file, defaults).values.enabled;
}
