// The issue job: work asked for on an issue or a pull request (a label, a mention, `/vmpilot …`, a
// review), or started by the app on its own pull request (a failed check, a moved base) or by an
// automation on a new issue. It answers at once (👀 and a comment it keeps up to date), then works
// in the mode its request asks for (modes/).
import { type IssueJob, isIssueJob } from "../../../store/jobs.ts";
import type { JobKind } from "../../run/kind.ts";
import { acknowledgeIssue, issuePlace, issueRefused, issueUnwanted } from "./acknowledge.ts";
import { type IssueAttempt, openAttempt } from "./attempt.ts";
import { workOnIssue } from "./run.ts";

export const issueJob: JobKind<IssueJob, IssueAttempt> = {
  name: "issue job",
  freshGate: false,
  told: "requester",
  claims: isIssueJob,
  place: issuePlace,
  unwanted: issueUnwanted,
  refused: issueRefused,
  async open(job, ctx) {
    const answered = await acknowledgeIssue(job, ctx);
    return "ended" in answered ? answered : openAttempt(ctx.deps, answered.acknowledged);
  },
  work: workOnIssue,
};
