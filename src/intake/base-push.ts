// A push to the branch vmpilot's pull requests are based on may leave them conflicting. The intake
// records one job per such pull request and pushed commit, on the pull request's conversation, so
// it runs in turn with the conversation's other work; the worker asks GitHub whether the pull
// request still merges. No GitHub call here, as everywhere in the intake.
import type { Context } from "probot";
import { BRANCH_PREFIX } from "../github/branch-name.ts";
import { conversationKey } from "../store/conversations.ts";
import { recordDelivery } from "../store/deliveries.ts";
import { type JobContext, readJobContext } from "../store/job-context.ts";
import { insertJob } from "../store/jobs.ts";
import { pullRequestConversations } from "../store/pull-request-conversations.ts";
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
    const conversations = await pullRequestConversations(client, repository.id, BRANCH_PREFIX);
    const queued: Array<{ jobId: number; conversationKey: string }> = [];
    for (const conversation of conversations) {
      const { unknownVerb: _, ...asked } = readJobContext({
        id: conversation.jobId,
        context: conversation.context,
      });
      const context: JobContext = {
        ...asked,
        itemKind: "pull_request",
        htmlUrl: `${repository.html_url}/pull/${conversation.prNumber}`,
        cloneUrl: repository.clone_url,
        defaultBranch: repository.default_branch,
        target: { type: "issue" },
      };
      const job = await insertJob(client, {
        conversationId: conversation.conversationId,
        installationId,
        repositoryId: repository.id,
        repo: repository.full_name,
        number: conversation.prNumber,
        trigger: "base_push",
        command: MERGE_BASE_VERB,
        requester: conversation.requester,
        deliveryId,
        context,
        branch: conversation.branch,
        prNumber: conversation.prNumber,
      });
      queued.push({ jobId: job.id, conversationKey: conversationKey(conversation.conversationId) });
    }
    await deps.queue.enqueueJobs(client, queued);
    return queued.map((entry) => entry.jobId);
  });
  if (ids.length > 0) deps.queue.wake();
  return ids;
}
