// The Probot application: webhook handlers of the intake. They touch only the database; GitHub
// and the model are called later, by the worker.
import type { ApplicationFunction, Context } from "probot";
import { deliveries } from "../metrics.ts";
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

export function intakeApp(deps: IntakeDeps): ApplicationFunction {
  return (app) => {
    const recordTrigger = createIntake(deps);
    const intake = async (context: Context, delivery: TriggerDelivery) => {
      const result = await recordTrigger(context.id, delivery);
      deliveries.inc({ event: context.name, outcome: outcomeOf(result) });
      // Debug, not info: a line per delivery costs the intake a measurable share of its
      // throughput, and the worker logs each job at info when it acknowledges or refuses it.
      context.log.debug({ delivery: context.id, result }, "delivery recorded");
    };
    app.on(["issues.opened", "issues.labeled", "issues.assigned"], (context) =>
      intake(context, fromIssues(context.payload)),
    );
    app.on("issue_comment.created", (context) =>
      intake(context, fromIssueComment(context.payload)),
    );
    app.on("pull_request_review_comment.created", (context) =>
      intake(context, fromReviewComment(context.payload)),
    );
    app.on("pull_request_review.submitted", (context) =>
      intake(context, fromReview(context.payload)),
    );
    app.on("push", (context) => recorded(context, recordConfigPush(deps.db, context.payload)));
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

async function recorded(context: Context, work: Promise<unknown>): Promise<void> {
  await work;
  deliveries.inc({ event: context.name, outcome: "recorded" });
}
