// Periodic tasks shared by all processes on the database (Queue.every in queue.ts says how).
import type { PgBoss } from "pg-boss";
import type { Logger } from "../../log/logger.ts";

export async function every(
  boss: PgBoss,
  logger: Logger,
  name: string,
  seconds: number,
  task: (signal: AbortSignal) => Promise<void>,
): Promise<() => void> {
  await boss.createQueue(name, {
    policy: "exclusive",
    retryLimit: 0,
    heartbeatSeconds: 30,
    expireInSeconds: Math.max(seconds, 3600),
  });
  // The asking process wakes its own worker; polling only backs that up.
  const worker = await boss.work(name, { pollingIntervalSeconds: 60 }, async ([job]) => {
    if (job) await task(job.signal);
  });
  const ask = async (throttle: { singletonSeconds?: number }) => {
    try {
      if (await boss.send(name, {}, throttle)) boss.notifyWorker(worker);
    } catch (error) {
      logger.warn({ err: error, queue: name }, "could not queue a periodic task");
    }
  };
  await ask({});
  const timer = setInterval(() => void ask({ singletonSeconds: seconds }), seconds * 1000);
  timer.unref();
  return () => clearInterval(timer);
}
