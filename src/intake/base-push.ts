// A push to the branch vmpilot's pull requests are based on may leave them conflicting. The
// intake records one job per such pull request and pushed commit, on the pull request's chat, so
// it runs in turn with the chat's other work; the worker asks GitHub whether the pull request
// still merges. No GitHub call here, as everywhere in the intake.
import type { Context } from "probot";
import { BRANCH_PREFIX } from "../github/branch-name.ts";
import { chatKey } from "../store/chats.ts";
import { recordDelivery } from "../store/deliveries.ts";
import { type JobContext, readJobContext } from "../store/job-context.ts";
import { insertJob } from "../store/jobs.ts";
import { pullRequestChats } from "../store/pull-request-chats.ts";
import { withTransaction } from "../store/sql.ts";
import type { IntakeDeps } from "./record.ts";

type PushPayload = Context<"push">["payload"];

/** The verb of the jobs it makes; no comment can name it (it is no trigger verb). */
const MERGE_BASE_VERB = "merge-base";

/** Records the push and its jobs; returns the new jobs' ids (none for a push not to a base). */
export async function recordBasePush(
  deps: Pick<IntakeDeps, "db" | "queue">,
  deliveryId: string,
  payload: PushPayload,
): Promise<number[]> {
  const repository = payload.repository;
  // vmpilot bases its pull requests on the default branch (deliver.ts); the worker checks the
  // pull request's actual base.
  if (
    payload.deleted ||
    !payload.installation ||
    payload.ref !== `refs/heads/${repository.default_branch}`
  ) {
    return [];
  }
  const installationId = payload.installation.id;
  const ids = await withTransaction(deps.db.pool, async (client) => {
    const fresh = await recordDelivery(client, {
      id: deliveryId,
      event: "push",
      installationId,
      repositoryId: repository.id,
      // A push is one commit landing on the base: a replayed body makes no second job.
      triggerKey: `base:${payload.ref}:${payload.after}`,
    });
    if (!fresh) return [];
    const chats = await pullRequestChats(client, repository.id, BRANCH_PREFIX);
    const queued: Array<{ jobId: number; chatKey: string }> = [];
    for (const chat of chats) {
      const { unknownVerb: _, ...asked } = readJobContext({
        id: chat.jobId,
        context: chat.context,
      });
      const context: JobContext = {
        ...asked,
        itemKind: "pull_request",
        htmlUrl: `${repository.html_url}/pull/${chat.prNumber}`,
        cloneUrl: repository.clone_url,
        defaultBranch: repository.default_branch,
        target: { type: "issue" },
      };
      const job = await insertJob(client, {
        chatId: chat.chatId,
        installationId,
        repositoryId: repository.id,
        repo: repository.full_name,
        number: chat.prNumber,
        trigger: "base_push",
        command: MERGE_BASE_VERB,
        requester: chat.requester,
        deliveryId,
        context,
        branch: chat.branch,
        prNumber: chat.prNumber,
      });
      queued.push({ jobId: job.id, chatKey: chatKey(chat.chatId) });
    }
    await deps.queue.enqueueJobs(client, queued);
    return queued.map((entry) => entry.jobId);
  });
  if (ids.length > 0) deps.queue.wake();
  return ids;
}
