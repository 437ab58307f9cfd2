// Acknowledgements of jobs that wait behind their conversation's running job (acknowledge.ts),
// queued with the job (job-queue.ts): short, never held by a key.
import { z } from "zod";
import type { SideQueue } from "./side-queue.ts";

const NoticeData = z.object({ jobId: z.number().int() });

/** Runs the notices of this process's share; a throw retries the notice, not the job. */
export type NoticeHook = (jobId: number, signal: AbortSignal) => Promise<void>;

export const notices: SideQueue<NoticeHook> = {
  name: "vmpilot-notices",
  options: { retryLimit: 2, retryDelay: 2, notify: false },
  inTransactions: true,
  handler: (onNotice) => (notice) => onNotice(NoticeData.parse(notice.data).jobId, notice.signal),
};
