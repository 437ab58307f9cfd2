// The Probot application: webhook handlers of the intake. They touch only the database; GitHub
// and the model are called later, by the worker.
import type { ApplicationFunction, Context } from "probot";
import type { Queue } from "../jobs/queue/queue.ts";
import { annotate } from "../log/trace.ts";
import { deliveries } from "../metrics.ts";
import { recordIssueAutomations } from "./automations.ts";
import { recordBasePush } from "./base-push.ts";
import {
  type CiIntakeDeps,
  type CiIntakeResult,
  fromCheckRun,
  fromCheckSuite,
  fromWorkflowRun,
  recordCiRun,
} from "./ci.ts";
import { fromStatus, recordStatus } from "./ci-status.ts";
import { type ConfigCheckIntake, recordPullRequestCheck } from "./config-check.ts";
import { recordConfigPush } from "./config-push.ts";
import {
  fromIssueComment,
  fromIssues,
  fromReview,
  fromReviewComment,
  type TriggerDelivery,
} from "./deliveries.ts";
import { recordInstallation } from "./installations.ts";
import { createIntake, type IntakeDeps, type IntakeResult } from "./record.ts";

export function intakeApp(
  deps: IntakeDeps &
    ConfigCheckIntake &
    CiIntakeDeps & { queue: Pick<Queue, "enqueueAutomationSync"> },
): ApplicationFunction {
  return (app) => {
    const recordTrigger = createIntake(deps);
    const intake = async (context: Context, delivery: TriggerDelivery) => {
      const result = await recordTrigger(context.id, delivery);
      counted(context, outcomeOf(result), "jobId" in result ? result.jobId : undefined);
      // Debug, not info: a line per delivery costs the intake a measurable share of its
      // throughput, and the worker logs each job at info when it acknowledges or refuses it.
      context.log.debug({ delivery: context.id, result }, "delivery recorded");
    };
    app.on(["issues.labeled", "issues.assigned"], (context) =>
      intake(context, fromIssues(context.payload)),
    );
    // The repository's automations on new issues: jobs of their own, apart from any trigger in
    // the issue's body. Not counted in the deliveries metric: the trigger intake counts each once.
    // One handler for both: Probot makes each handler of a delivery a context and a logger of its
    // own, and the payload is read once.
    app.on("issues.opened", (context) => {
      const delivery = fromIssues(context.payload);
      const automations = async () => {
        const jobs = await recordIssueAutomations(deps, context.id, delivery);
        if (jobs.length > 0)
          context.log.debug({ delivery: context.id, jobs }, "automations queued");
      };
      return together([intake(context, delivery), automations()]);
    });
    app.on("issue_comment.created", (context) =>
      intake(context, fromIssueComment(context.payload)),
    );
    app.on("pull_request_review_comment.created", (context) =>
      intake(context, fromReviewComment(context.payload)),
    );
    app.on("pull_request_review.submitted", (context) =>
      intake(context, fromReview(context.payload)),
    );
    // One handler, as for an opened issue; the delivery counts once.
    app.on("push", (context) =>
      recorded(
        context,
        together([
          recordConfigPush(deps, context.payload),
          recordBasePush(deps, context.id, context.payload),
        ]),
      ),
    );
    app.on(
      ["pull_request.opened", "pull_request.synchronize", "pull_request.reopened"],
      (context) => recorded(context, recordPullRequestCheck(deps, context.payload)),
    );
    app.on("check_run.completed", (context) =>
      ci(context, recordCiRun(deps, context.id, fromCheckRun(context.payload))),
    );
    app.on("check_suite.completed", (context) =>
      ci(context, recordCiRun(deps, context.id, fromCheckSuite(context.payload))),
    );
    app.on("workflow_run.completed", (context) =>
      ci(context, recordCiRun(deps, context.id, fromWorkflowRun(context.payload))),
    );
    app.on("status", (context) =>
      ci(context, recordStatus(deps, context.id, fromStatus(context.payload))),
    );
    app.on("installation", (context) =>
      recorded(context, recordInstallation(deps.db, context.id, "installation", context.payload)),
    );
    app.on("installation_repositories", (context) =>
      recorded(
        context,
        recordInstallation(deps.db, context.id, "installation_repositories", context.payload),
      ),
    );
  };
}

function outcomeOf(result: IntakeResult): string {
  if ("jobId" in result) return "job";
  return "ignored" in result ? "ignored" : "duplicate";
}

async function ci(context: Context, work: Promise<CiIntakeResult>): Promise<void> {
  const result = await work;
  const outcome = "jobId" in result ? "job" : "ready" in result ? "recorded" : "ignored";
  counted(context, outcome, "jobId" in result ? result.jobId : undefined);
  context.log.debug({ delivery: context.id, result }, "check recorded");
}

/** Waits for all the work, as for as many handlers, and fails as they failed. */
async function together(work: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(work)).flatMap((outcome) =>
    outcome.status === "rejected" ? [outcome.reason] : [],
  );
  if (failed.length === 1) throw failed[0];
  if (failed.length > 1) throw new AggregateError(failed, "the delivery's handlers failed");
}

async function recorded(context: Context, work: Promise<unknown>): Promise<void> {
  await work;
  counted(context, "recorded");
}

/** Counts the delivery, and says on its span (the request's) what became of it. */
function counted(context: Context, outcome: string, jobId?: number): void {
  deliveries.inc({ event: context.name, outcome });
  annotate({
    "github.event": context.name,
    "github.delivery": context.id,
    "vmpilot.delivery.outcome": outcome,
    ...(jobId !== undefined && { "vmpilot.job.id": jobId }),
  });
}
