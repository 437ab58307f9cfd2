// The worker role: jobs from the queue, run in workspaces (sandboxes or VMs), and the periodic
// reconciliation of the installations with GitHub, which also sets the automations' schedules.
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { Probot } from "probot";
import { attachmentPolicy } from "../github/images.ts";
import { watchRateLimit } from "../github/rate-limit.ts";
import { syncAutomations } from "../jobs/automations/schedules.ts";
import type { JobDeps, WorkDeps } from "../jobs/run/deps.ts";
import { startWorker } from "../jobs/worker.ts";
import { workspaceErrors } from "../metrics.ts";
import {
  checkWorkspace,
  type LimitEnforcement,
  limitEnforcement,
  type WorkspaceChoice,
} from "../workspace/index.ts";
import { workspaceFor } from "../workspace/isolation.ts";
import { createVmPool, poolOwner, type VmPool } from "../workspace/vm/pool.ts";
import { engineFor, startFlyNetwork } from "../workspace/vm/settings.ts";
import { fetchAppSlug, type RoleContext } from "./context.ts";
import { startInstallationSync } from "./installation-sync.ts";
import type { Readiness } from "./readiness.ts";
import { startVmSweeper } from "./vm-sweeper.ts";
import type { WorkerIdentity } from "./worker-identity.ts";

export interface WorkerRoleOptions {
  /** This worker's identity, kept across restarts. */
  identity: WorkerIdentity | undefined;
  /** The app's slug, when the web role of this process fetched it already. */
  appSlug: string | undefined;
  /** Overrides for the jobs' deps (tests point them at fakes); false ends jobs once answered. */
  work: Partial<JobDeps> | false | undefined;
  /** What the kernel holds of the sandbox limits, once known (for /healthz). */
  onSandboxLimits(found: LimitEnforcement): void;
}

export async function startWorkerRole(ctx: RoleContext, options: WorkerRoleOptions) {
  const { config, db, queue, probot, logger } = ctx;
  const vmPool =
    options.work === false
      ? undefined
      : startWorkspaces(ctx, options.work?.workspace ?? config.workspace, options);
  const auth = async (installationId: number) => {
    const octokit = await probot.auth(installationId);
    watchRateLimit(octokit, String(installationId));
    return octokit;
  };
  const appSlug = knownSlug(probot, options.appSlug);
  const overrides = options.work || {};
  await startWorker({
    db,
    auth,
    appSlug,
    allowedUsers: config.allowedUsers,
    defaults: ctx.defaults,
    publicUrl: config.publicUrl,
    logger,
    ...overrides,
    queue,
    work: options.work === false ? undefined : { ...workDeps(ctx, vmPool), ...overrides },
  });
  const automations = { db, queue, auth, appSlug, defaults: ctx.defaults, logger };
  const sync = await startInstallationSync(queue, config.installationSyncMinutes, {
    pool: db.pool,
    app: () => probot.auth(),
    auth,
    logger,
    afterSync: (signal) => syncAutomations(automations, {}, signal),
  });
  ctx.cleanup.push(sync);
}

/**
 * Checks the workspace every job gets at least, starts what VMs need (the Fly network, the warm
 * pool) and the sweeper of VMs left behind; resolves to the warm pool, if any.
 */
function startWorkspaces(
  ctx: RoleContext,
  allowed: WorkspaceChoice,
  options: Pick<WorkerRoleOptions, "identity" | "onSandboxLimits">,
): VmPool | undefined {
  const { config, logger, cleanup } = ctx;
  const least = workspaceFor(allowed, "sandbox");
  checkSandbox(least, ctx.readiness, logger);
  if (least.isolation === "sandbox") void reportSandboxLimits(logger).then(options.onSandboxLimits);
  if (allowed.engine === "fly") void startFlyNetwork(logger);
  const pool = options.identity && poolOwner(options.identity.id, randomBytes(4).toString("hex"));
  let vmPool: VmPool | undefined;
  if (pool && config.warmPool > 0 && least.engine !== "local") {
    try {
      const started = createVmPool(engineFor(least.engine), config.warmPool, pool.owner, logger);
      cleanup.push(() => started.close());
      vmPool = started;
    } catch {
      // Bad engine settings: checkSandbox logs them and keeps the worker unready.
    }
  }
  cleanup.push(startVmSweeper(allowed.engine, ctx.db.pool, logger, pool?.stale));
  return vmPool;
}

function workDeps(ctx: RoleContext, vmPool: VmPool | undefined): WorkDeps {
  const { config, probot } = ctx;
  return {
    installationToken: (id) => installationToken(probot, id),
    dataDir: config.dataDir,
    spareCheckouts: config.spareCheckouts,
    workspace: config.workspace,
    vmPool,
    allowPrivate: config.networkAllowPrivate,
    mcpSecrets: config.mcpSecrets,
    sandboxLimits: config.sandboxLimits,
    plugins: ctx.plugins,
    anthropic: { apiKey: config.anthropicApiKey },
    providers: config.providers,
    readyQueue: ctx.queue,
    imageFetch: { policy: attachmentPolicy(config.baseUrl) },
  };
}

/** Scheduled automations' jobs are the app's own: the web role knows its slug already. */
function knownSlug(probot: Probot, known: string | undefined): () => Promise<string> {
  let slug = known === undefined ? undefined : Promise.resolve(known);
  return () => {
    slug ??= fetchAppSlug(probot).catch((error: unknown) => {
      slug = undefined;
      throw error;
    });
    return slug;
  };
}

async function installationToken(probot: Probot, installationId: number): Promise<string> {
  const octokit = await probot.auth(installationId);
  const { token } = (await octokit.auth({ type: "installation" })) as { token: string };
  return token;
}

/** Finds out at startup whether jobs can get a workspace, and keeps the worker unready if not. */
function checkSandbox(least: WorkspaceChoice, readiness: Readiness, logger: Logger): void {
  readiness.wait("sandbox", "checking");
  checkWorkspace(least).then(
    () => readiness.ready("sandbox"),
    (error: Error) => {
      workspaceErrors.inc({ kind: "sandbox_unavailable" });
      readiness.wait("sandbox", "unavailable");
      logger.error(`jobs cannot run: ${error.message}`);
    },
  );
}

/** Says once at startup how each sandbox limit is held here: by the kernel, or why not. */
async function reportSandboxLimits(logger: Logger): Promise<LimitEnforcement> {
  const found = await limitEnforcement();
  if (!found.kernel) {
    logger.warn({ sandboxLimits: found }, "some sandbox limits are only best effort on this host");
  } else logger.info({ sandboxLimits: found }, "the kernel holds every sandbox limit on this host");
  return found;
}
