// A few started VMs held ready, so a job does not wait for a boot. A pooled VM has nothing of any
// repository until a job takes it; it then serves that job only and is destroyed with it, never
// returned, so no VM is reused across jobs or repositories. Pooled VMs are labelled
// `pool-<worker>-<boot>`: a restarted worker destroys its previous boot's (sweep.ts).
import { randomBytes } from "node:crypto";
import type { Logger } from "../../github/logger.ts";
import { waitForAgent } from "../remote.ts";
import type { Vm, VmEngine } from "./engine.ts";

interface StartedVm {
  vm: Vm;
  secret: string;
}

export interface VmPool {
  /** The engine's name: a pool serves only workspaces of that provider. */
  readonly provider: VmEngine["name"];
  /** A started VM whose agent answers, or undefined when none is ready; refills behind it. */
  take(): StartedVm | undefined;
  /** Resolves once the pool is full (or a fill failed). */
  filled(): Promise<void>;
  /** Destroys the idle VMs. */
  close(): Promise<void>;
}

const READY_MS = 60_000;

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
): VmPool {
  const idle: StartedVm[] = [];
  let starting = 0;
  let closed = false;
  let pending: Promise<void> = Promise.resolve();

  async function startOne(): Promise<void> {
    const secret = randomBytes(32).toString("base64url");
    const vm = await engine.create({ owner, secret });
    try {
      await waitForAgent({ baseUrl: vm.baseUrl }, READY_MS);
    } catch (error) {
      await engine.destroy(vm.id).catch(() => undefined);
      throw error;
    }
    if (closed) await engine.destroy(vm.id);
    else idle.push({ vm, secret });
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

  fill();
  return {
    provider: engine.name,
    take() {
      const started = idle.shift();
      if (!closed) fill();
      return started;
    },
    filled: () => pending,
    async close() {
      closed = true;
      await pending;
      const all = idle.splice(0);
      await Promise.all(all.map(({ vm }) => engine.destroy(vm.id).catch(() => undefined)));
    },
  };
}
