// Commit statuses on vmpilot's own heads. Jenkins, Buildkite, CircleCI, Travis and many apps
// report CI through the status API, not check runs; a repository whose only CI they are would
// otherwise look like one without CI. A status names no pull request, only the branches whose
// history holds its commit: it counts when one of them is a vmpilot branch at that very commit,
// the head vmpilot pushed there last. Then it ends as a check does (ci.ts): a failure is the head's
// one fix job, a success a ready-for-review check. What the status says (its context, description
// and link) is read by the fix job from GitHub, not from here.
import { z } from "zod";
import { BRANCH_PREFIX } from "../github/branch-name.ts";
import { type CiIntakeDeps, type CiIntakeResult, common, recordCiOutcome } from "./ci.ts";
import { parsePayload } from "./deliveries.ts";

const StatusPayload = z.object({
  ...common,
  id: z.number().int(),
  sha: z.string(),
  state: z.string(),
  branches: z.array(z.object({ name: z.string(), commit: z.object({ sha: z.string() }) })),
});
type StatusPayload = z.infer<typeof StatusPayload>;

const FAILED: ReadonlySet<string> = new Set(["failure", "error"]);

export function fromStatus(raw: unknown): StatusPayload {
  return parsePayload(StatusPayload, raw, "status");
}

export async function recordStatus(
  deps: CiIntakeDeps,
  deliveryId: string,
  status: StatusPayload,
): Promise<CiIntakeResult> {
  const failed = FAILED.has(status.state);
  if (!failed && status.state !== "success") return { ignored: `state ${status.state}` };
  // Only a vmpilot branch whose head the commit is: a branch a person pushed to since is theirs.
  const branches = status.branches
    .filter((branch) => branch.name.startsWith(BRANCH_PREFIX) && branch.commit.sha === status.sha)
    .map((branch) => branch.name);
  if (branches.length === 0) return { ignored: "not the head of a vmpilot branch" };
  if (!status.installation) return { ignored: "not a GitHub App delivery" };
  return recordCiOutcome(deps, deliveryId, {
    event: "status",
    action: null,
    installationId: status.installation.id,
    repository: status.repository,
    sha: status.sha,
    branches,
    prNumbers: null,
    failed,
    readyKey: `ready:status:${status.id}`,
  });
}
