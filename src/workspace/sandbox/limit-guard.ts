import type { Logger } from "../../log/logger.ts";
import type { ExecResult, SpawnOptions, WorkspaceProcess } from "../types.ts";
import type { JobCgroup } from "./cgroup.ts";
import type { DiskMeter } from "./disk-meter.ts";
import {
  cgroupNotice,
  diskNotice,
  limitNotice,
  type SandboxLimits,
  ulimitPrefix,
  withNotice,
} from "./limits.ts";

/** `overDisk`: the workspace is over its disk limit, so the command must not write files. */
type Run = (signal: AbortSignal, overDisk: boolean) => Promise<ExecResult>;

/** How often a running command's filesystem is looked at (statfs: one cheap call). */
export const FAST_CHECK_MS = 100;
/** Every this many looks, disk use is measured in full (`du`) whatever the filesystem shows. */
const FULL_CHECK_EVERY = 10;

const MIB = 1024 * 1024;

/**
 * Watches a running command's disk use and calls `over` once it passes `limitMb`. A full
 * measurement costs a `du` of the checkout, so it runs every second, and at once when the
 * checkout's filesystem has grown by more than the room that was left: a fast writer is caught
 * within a tenth of a second, not a second.
 */
function watchDisk(
  meter: DiskMeter,
  start: { mb: number; hostBytes: number | undefined },
  limitMb: number,
  over: (mb: number) => void,
  logger: Logger,
): () => void {
  let base = start;
  let busy = false;
  let ticks = 0;
  let closed = false;
  const look = async () => {
    ticks++;
    const hostBytes = await meter.hostUsedBytes().catch(() => undefined);
    const grownMb =
      hostBytes === undefined || base.hostBytes === undefined
        ? 0
        : (hostBytes - base.hostBytes) / MIB;
    if (ticks % FULL_CHECK_EVERY !== 0 && base.mb + grownMb <= limitMb) return;
    const mb = await meter.usedMb();
    base = { mb, hostBytes };
    if (mb > limitMb && !closed) {
      closed = true;
      over(mb);
    }
  };
  const timer = setInterval(() => {
    if (busy || closed) return;
    busy = true;
    look()
      .catch((error: unknown) => logger.warn({ err: error }, "could not measure disk use"))
      .finally(() => {
        busy = false;
      });
  }, FAST_CHECK_MS);
  return () => {
    closed = true;
    clearInterval(timer);
  };
}

/** Runs one command of the job's (`run`) under the disk limit; see limitGuard. */
export type LimitGuard = (run: Run) => Promise<ExecResult>;

/** A full measurement, and what the filesystems showed in use when it began. */
interface Measured {
  mb: number | undefined;
  hostBytes: number | undefined;
}

type Hits = { oomKills: number; forksRefused: number } | undefined;

/**
 * Runs commands under the disk limit and explains any limit a command hit. Disk use is measured
 * in full from the start and after commands that changed what the filesystems hold; while one
 * runs, it is watched (watchDisk) and the command stopped when over. Once over, commands run
 * unable to write files until deletions bring the workspace back under: a string of quick
 * commands cannot add up past the limit. The measurement after a command runs while its result
 * goes back (the next command waits for it), unless all the filesystems grew (at least what the
 * workspace did, unless files freed elsewhere on them hide it) could have taken the workspace
 * over. So a command costs no `du` of its own, and the one that went over says so.
 */
export function limitGuard(
  meter: DiskMeter,
  limits: SandboxLimits,
  logger: Logger,
  cgroup?: JobCgroup,
): LimitGuard {
  const hostUsed = () => meter.hostUsedBytes().catch(() => undefined);
  const measure = async (): Promise<Measured> => {
    // Before `du`: what grows meanwhile counts as growth after it.
    const hostBytes = await hostUsed();
    const mb = await meter.usedMb().catch((error: unknown) => {
      logger.warn({ err: error }, "could not measure disk use");
      return undefined;
    });
    return { mb, hostBytes };
  };
  /** At most what the workspace uses, given the filesystems' growth since `base`. */
  const estimate = (base: Measured, hostBytes: number | undefined) =>
    hostBytes === undefined || base.hostBytes === undefined || base.mb === undefined
      ? undefined
      : base.mb + Math.max(0, hostBytes - base.hostBytes) / MIB;
  /** The latest full measurement to have ended, once one has. */
  let latest: Measured | undefined;
  let started = 0;
  let ended = 0;
  /** The measurement under way in the background, if any. */
  let running: Promise<Measured> | undefined;
  const remeasure = (): Promise<Measured> => {
    const order = ++started;
    const next = measure().then((measured) => {
      // One that began earlier and ended later is older.
      if (order > ended) [latest, ended] = [measured, order];
      if (running === next) running = undefined;
      return measured;
    });
    running = next;
    return next;
  };
  remeasure();
  let hits: Promise<Hits> | undefined;

  return async function guarded(run: Run): Promise<ExecResult> {
    await running;
    let base = latest as Measured;
    let [hostBytes, hitsBefore] = await Promise.all([hostUsed(), hits ?? cgroup?.hits()]);
    if ((estimate(base, hostBytes) ?? 0) > limits.diskMb && (base.mb ?? 0) <= limits.diskMb) {
      base = await remeasure();
      hostBytes = base.hostBytes;
    }
    const startMb = base.mb ?? 0;
    const overDisk = startMb > limits.diskMb;
    const stop = new AbortController();
    let stoppedMb: number | undefined;
    // Over the limit already, the command may still delete: only growth past the start stops it.
    const close = watchDisk(
      meter,
      { mb: Math.ceil(estimate(base, hostBytes) ?? startMb), hostBytes },
      Math.max(limits.diskMb, startMb),
      (mb) => {
        stoppedMb = mb;
        stop.abort();
      },
      logger,
    );
    let result: ExecResult;
    try {
      result = await run(stop.signal, overDisk);
    } finally {
      close();
    }
    hits = cgroup?.hits();
    const [after, hitsAfter] = await Promise.all([hostUsed(), hits]);
    const grown = estimate(base, after);
    let usedMb: number | undefined;
    if (stoppedMb !== undefined || grown === undefined || grown > limits.diskMb || overDisk) {
      usedMb = (await remeasure()).mb;
    } else if (after !== (latest ?? base).hostBytes && running === undefined) {
      void remeasure();
    }
    const notices: string[] = [];
    if (stoppedMb !== undefined) notices.push(diskNotice(stoppedMb, limits, "stopped"));
    else if (overDisk) notices.push(diskNotice(startMb, limits, "before"));
    else if (usedMb !== undefined && usedMb > limits.diskMb) {
      notices.push(diskNotice(usedMb, limits, "after"));
    }
    const kernel =
      hitsBefore &&
      hitsAfter &&
      cgroupNotice(
        {
          oomKills: hitsAfter.oomKills - hitsBefore.oomKills,
          forksRefused: hitsAfter.forksRefused - hitsBefore.forksRefused,
        },
        limits,
      );
    // Over the disk limit, a write fails on the file size limit of 0, which the notice explains.
    const explained = kernel || (overDisk ? undefined : limitNotice(result, limits));
    if (explained) notices.push(explained);
    if (notices.length === 0) return result;
    const notice = notices.join("\n");
    logger.warn({ notice }, "a sandbox command reached a limit");
    return withNotice(result, notice);
  };
}

/** What a long-running command reports to the guard once it ended: only its exit code counts. */
const ENDED: Omit<ExecResult, "exitCode"> = {
  stdout: "",
  stderr: "",
  timedOut: false,
  truncated: false,
  fullStdout: "",
  fullStderr: "",
  durationMs: 0,
};

/**
 * Starts a long-running command of the job's (Workspace.spawn) as exec runs one: with the job's
 * rlimits on its line, and under the guard for as long as it runs, which stops it when the
 * workspace goes over its disk limit.
 */
export function spawnGuarded(
  guarded: LimitGuard,
  limits: SandboxLimits,
  command: string,
  options: SpawnOptions,
  start: (command: string, options: SpawnOptions) => Promise<WorkspaceProcess>,
): Promise<WorkspaceProcess> {
  return new Promise((resolve, reject) => {
    guarded(async (stop, overDisk) => {
      const signal = options.signal ? AbortSignal.any([stop, options.signal]) : stop;
      let started: WorkspaceProcess;
      try {
        started = await start(ulimitPrefix(limits, overDisk) + command, { ...options, signal });
      } catch (error) {
        reject(error);
        return { ...ENDED, exitCode: null };
      }
      resolve(started);
      return { ...ENDED, exitCode: (await started.exited).code };
    }).catch(reject);
  });
}
