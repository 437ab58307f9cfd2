// Destroys VMs nobody will use again: those of a job attempt that ended or died with its worker.
// Every worker sweeps at startup and then now and again, so a crash leaves a VM behind only until
// some worker runs; on Kubernetes the pod's activeDeadlineSeconds is a backstop as well.
import type { VmEngine } from "./engine.ts";

const JOB_OWNER = /^job-(\d+)-(\d+)$/;

/** Parses `job-<id>-<attempt>`; undefined for a CLI run's VM, which the sweeper leaves alone. */
function jobOwner(owner: string | undefined): { jobId: number; attempt: number } | undefined {
  const match = owner ? JOB_OWNER.exec(owner) : null;
  return match ? { jobId: Number(match[1]), attempt: Number(match[2]) } : undefined;
}

/**
 * Resolves to the number of VMs destroyed. `live` says whether an attempt still runs; `stale`
 * names this worker's pool VMs of an earlier boot (pool.ts), idle or taken by a job that died.
 */
export async function sweepVms(
  engine: VmEngine,
  live: (jobId: number, attempt: number) => Promise<boolean>,
  stale: (owner: string) => boolean = () => false,
): Promise<number> {
  let destroyed = 0;
  for (const vm of await engine.list()) {
    const owner = jobOwner(vm.owner);
    const dead = owner ? !(await live(owner.jobId, owner.attempt)) : stale(vm.owner ?? "");
    if (!dead) continue;
    await engine.destroy(vm.id);
    destroyed += 1;
  }
  return destroyed;
}

/**
 * Before a job's later attempt makes its VM: the earlier attempts' VMs are dead (their worker
 * crashed or gave up), so they go at once rather than at the next sweep.
 */
export async function destroyEarlierAttempts(engine: VmEngine, owner: string): Promise<void> {
  const current = jobOwner(owner);
  if (!current || current.attempt === 1) return;
  await sweepVms(
    engine,
    async (jobId, attempt) => jobId !== current.jobId || attempt >= current.attempt,
  );
}
