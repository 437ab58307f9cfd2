// A job out of attempts: the requester is told it gave up, in the job's own comment when it has one.
import { readJobContext } from "../../../store/job-context.ts";
import { getJob, isIssueJob } from "../../../store/jobs.ts";
import type { DeadJob } from "../../queue/queue.ts";
import type { OpenDeps } from "../../run/deps.ts";
import { writeJobComment } from "../../run/final.ts";
import { deadBody } from "./acknowledge-messages.ts";

export async function reportDead(
  deps: Pick<OpenDeps, "db" | "auth" | "publicUrl">,
  dead: DeadJob,
): Promise<void> {
  const job = await getJob(deps.db.pool, dead.jobId);
  // A chat turn's client saw the failure in its stream; there is no comment to write.
  if (!job || !isIssueJob(job)) return;
  const context = readJobContext(job);
  const item = { owner: context.owner, repo: context.name, number: job.number };
  const octokit = await deps.auth(job.installationId);
  const body = deadBody(job, context, dead.error, deps.publicUrl);
  await writeJobComment(deps, octokit, item, job, body);
}
