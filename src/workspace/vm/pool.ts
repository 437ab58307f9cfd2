// A few started VMs held ready, so a job does not wait for a boot. A pooled VM has nothing of any
// repository until a job takes it; it then serves that job only and is destroyed with it, never
// returned, so no VM is reused across jobs or repositories. Pooled VMs are labelled
// `pool-<worker>-<boot>`: a restarted worker destroys its previous boot's (sweep.ts).
import { randomBytes } from "node:crypto";
import type { Logger } from "../../log/logger.ts";
import { agentHealthy, waitForAgent } from "../agent/remote.ts";
import { endpointOf, type Vm, type VmEngine } from "./engine.ts";

interface StartedVm {
  vm: Vm;
  secret: string;
}

interface IdleVm extends StartedVm {
  startedAt: number;
}

export interface VmPool {
  /** The engine's name: a pool serves only workspaces of that engine. */
  readonly engine: VmEngine["name"];
  /**
   * A started VM whose workspace agent answers, or undefined when none is ready; refills behind it.
   */
  take(): StartedVm | undefined;
  /** Resolves once the pool is full (or a fill failed). */
  filled(): Promise<void>;
  /**
   * Replaces the idle VMs that stopped answering or waited too long (run every minute): a pod's
   * deadline counts from its start, and a Fly Machine's workspace agent exits at its own.
   */
  refresh(): Promise<void>;
  /** Destroys the idle VMs. */
  close(): Promise<void>;
}

const READY_MS = 60_000;
const REFRESH_EVERY_MS = 60_000;
/** Short against the engines' deadlines (4 h by default), so a job taking a VM keeps most of it. */
const MAX_IDLE_MS = 30 * 60_000;

export interface VmPoolOptions {
  maxIdleMs?: number;
  /** The clock idle time is read from. */
  now?: () => number;
}

/** The label of this boot's pool VMs, and a test for the same worker's earlier boots'. */
export function poolOwner(workerId: string, boot: string) {
  const prefix = `pool-${workerId.replace(/[^A-Za-z0-9]/g, "").slice(0, 24)}-`;
  const owner = `${prefix}${boot}`;
  return { owner, stale: (other: string) => other.startsWith(prefix) && other !== owner };
}

export function createVmPool(
  engine: VmEngine,
  size: number,
  owner: string,
  logger: Logger,
  options: VmPoolOptions = {},
): VmPool {
  const now = options.now ?? Date.now;
  const maxIdleMs = options.maxIdleMs ?? MAX_IDLE_MS;
  const idle: IdleVm[] = [];
  let starting = 0;
  let closed = false;
  let pending: Promise<void> = Promise.resolve();

  async function startOne(): Promise<void> {
    const secret = randomBytes(32).toString("base64url");
    const vm = await engine.create({ owner, secret });
    try {
      await waitForAgent(endpointOf(vm), READY_MS);
    } catch (error) {
      await engine.destroy(vm.id).catch(() => undefined);
      throw error;
    }
    if (closed) await engine.destroy(vm.id);
    else idle.push({ vm, secret, startedAt: now() });
  }

  function fill(): void {
    const wanted = size - idle.length - starting;
    const starts: Promise<void>[] = [];
    for (let i = 0; i < wanted; i++) {
      starting += 1;
      starts.push(
        startOne()
          .catch((error: Error) => logger.warn({ err: error }, "could not start a pooled VM"))
          .finally(() => {
            starting -= 1;
          }),
      );
    }
    if (starts.length > 0) pending = Promise.all(starts).then(() => undefined);
  }

  async function refresh(): Promise<void> {
    const checked = await Promise.all(
      idle.map(async (entry) => ({
        entry,
        keep: now() - entry.startedAt < maxIdleMs && (await agentHealthy(endpointOf(entry.vm))),
      })),
    );
    const dropped = checked.filter(({ entry, keep }) => !keep && idle.includes(entry));
    for (const { entry } of dropped) idle.splice(idle.indexOf(entry), 1);
    await Promise.all(
      dropped.map(({ entry }) => engine.destroy(entry.vm.id).catch(() => undefined)),
    );
    if (!closed) fill();
  }

  fill();
  const timer = setInterval(() => {
    refresh().catch((error: Error) => logger.warn({ err: error }, "could not check pooled VMs"));
  }, REFRESH_EVERY_MS);
  timer.unref();
  return {
    engine: engine.name,
    take() {
      const entry = idle.shift();
      if (!closed) fill();
      return entry && { vm: entry.vm, secret: entry.secret };
    },
    filled: () => pending,
    refresh,
    async close() {
      clearInterval(timer);
      closed = true;
      await pending;
      const all = idle.splice(0);
      await Promise.all(all.map(({ vm }) => engine.destroy(vm.id).catch(() => undefined)));
    },
  };
}
