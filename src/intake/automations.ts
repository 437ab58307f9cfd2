// Automations at the intake. An issue opened on a repository whose file names automations
// `on: issues.opened` makes one job per automation, on the issue's conversation; a push that
// changed the file on the default branch queues a re-read of it, for the schedules. No GitHub call
// here, as everywhere in the intake: what the file says is what vmpilot last read of it
// (file_settings). While that is unknown (the file changed and no one has read it since; the
// re-read comes within seconds), an opened issue starts no automation.
import { knownAutomations } from "../jobs/automations/schedules.ts";
import { conversationKey, findOrCreateConversation } from "../store/conversations.ts";
import { recordDelivery } from "../store/deliveries.ts";
import { getRepository, type Repository } from "../store/installations.ts";
import type { JobContext } from "../store/job-context.ts";
import { insertJob } from "../store/jobs.ts";
import { withTransaction } from "../store/sql.ts";
import type { TriggerDelivery } from "./deliveries.ts";
import type { IntakeDeps } from "./record.ts";
import { isBot } from "./trigger.ts";

/** The file over the settings page, as the trigger intake decides it. */
function enabled(repository: Repository): boolean {
  const file = repository.fileSettings;
  const value = file && "enabled" in file ? file.enabled : repository.settings.enabled;
  return value !== false;
}

/** Records the automations' jobs for an opened issue (read by fromIssues); resolves to their ids. */
export async function recordIssueAutomations(
  deps: IntakeDeps,
  deliveryId: string,
  delivery: TriggerDelivery,
): Promise<number[]> {
  const { input } = delivery;
  // The app's own issues, and other apps', would start automations of automations.
  if (input.action !== "opened" || delivery.itemKind !== "issue" || isBot(input.sender)) return [];
  if (input.item.locked) return [];
  const repository = await getRepository(deps.db.pool, delivery.repository.id);
  if (!repository || !enabled(repository)) return [];
  const automations = (knownAutomations(repository) ?? []).filter(
    (automation) => automation.on === "issues.opened",
  );
  if (automations.length === 0) return [];
  // The trigger intake may record this very delivery (a mention in the issue's body): the
  // automations record one of their own, keyed by the issue, so a replay makes no second run.
  const id = `${deliveryId}:automations`;
  const repo = delivery.repository;
  const ids = await withTransaction(deps.db.pool, async (client) => {
    const fresh = await recordDelivery(client, {
      id,
      event: input.event,
      action: input.action,
      installationId: delivery.installationId,
      repositoryId: repo.id,
      triggerKey: `automations:${delivery.triggerKey}`,
    });
    if (!fresh) return [];
    const conversation = await findOrCreateConversation(client, {
      repositoryId: repo.id,
      number: delivery.number,
      kind: "issue",
    });
    const queued: Array<{ jobId: number; conversationKey: string }> = [];
    for (const automation of automations) {
      const authors = automation.authors ?? "write";
      const context: JobContext = {
        owner: repo.owner,
        name: repo.name,
        itemKind: "issue",
        title: delivery.title,
        htmlUrl: delivery.htmlUrl,
        cloneUrl: repo.cloneUrl,
        defaultBranch: repo.defaultBranch,
        target: delivery.target,
        appSlug: deps.appSlug,
        command: deps.command,
        label: deps.label,
        automation: {
          name: automation.name,
          authors,
          author: input.item.authorLogin ?? delivery.requester,
          ...(automation.labels && { labels: automation.labels }),
        },
        // Anyone's issue: its author (the sender of issues.opened), by user id, spends it, under
        // their monthly budget (spenders.ts). The app stays the requester: the author asked nothing.
        ...(authors === "any" && { requesterId: delivery.requesterId }),
      };
      const job = await insertJob(client, {
        conversationId: conversation.id,
        installationId: delivery.installationId,
        repositoryId: repo.id,
        repo: repo.fullName,
        number: delivery.number,
        trigger: "automation",
        command: automation.mode ?? "fix",
        // The app's own run: the automation is in the file, the issue's author asked nothing.
        requester: `${deps.appSlug}[bot]`,
        instruction: automation.prompt,
        deliveryId: id,
        context,
      });
      queued.push({ jobId: job.id, conversationKey: conversationKey(conversation.id) });
    }
    await deps.queue.enqueueJobs(client, queued);
    return queued.map((entry) => entry.jobId);
  });
  if (ids.length > 0) deps.queue.wake();
  return ids;
}
