// The one gate of every door (issues, pull requests, the chat face, automations, CI): who a job acts
// for, and whether they may make vmpilot act on the repository. ALLOWED_USERS and the repository's
// allowedUsers always; anyone with write, maintain or admin access too, unless the repository's
// triggerPolicy is allow-list. A job with no person behind it is the app's own, and acts with the
// least it needs (its kind's say).
import type { ProbotOctokit } from "probot";
import type { RepoSettings } from "../../config/repo-config.ts";
import {
  checkPermission,
  type PermissionQuery,
  type PermissionResult,
} from "../../github/permissions.ts";

/** Who a job acts for, as the gate sees it. */
export type Starter =
  /** A person asked: known by GitHub's numeric id where the door had it, and the login with it. */
  | { person: { login: string; id?: number } }
  /** The operator's own chat key: theirs is every repository. */
  | { operator: true }
  /** Nobody asked (a moved base, a failed check on vmpilot's head, a schedule): why the app acts. */
  | { app: string };

export type GateResult = PermissionResult & {
  starter: Starter;
  /** Who may trigger on the repository, for the refusal to say. */
  policy: RepoSettings["triggerPolicy"];
};

/** Whether a person may make vmpilot act on a repository. */
export function mayTrigger(
  octokit: ProbotOctokit,
  query: Omit<PermissionQuery, "policy">,
  settings: Pick<RepoSettings, "allowedUsers" | "triggerPolicy">,
): Promise<PermissionResult> {
  return checkPermission(octokit, {
    ...query,
    allowedUsers: [...query.allowedUsers, ...settings.allowedUsers],
    policy: settings.triggerPolicy,
  });
}

/** The gate's answer for a job's starter on a repository. */
export async function gate(
  starter: Starter,
  repository: { owner: string; name: string; octokit: ProbotOctokit } | undefined,
  settings: Pick<RepoSettings, "allowedUsers" | "triggerPolicy">,
  allowedUsers: readonly string[],
): Promise<GateResult> {
  const policy = settings.triggerPolicy;
  if ("operator" in starter) return { allowed: true, via: "operator", starter, policy };
  if ("app" in starter) return { allowed: true, via: "app", starter, policy };
  // A scratch workspace is its owner's alone: the door let only them in.
  if (!repository) return { allowed: true, via: "owner", starter, policy };
  const query = {
    owner: repository.owner,
    repo: repository.name,
    username: starter.person.login,
    ...(starter.person.id !== undefined && { userId: starter.person.id }),
    allowedUsers,
  };
  return { ...(await mayTrigger(repository.octokit, query, settings)), starter, policy };
}
