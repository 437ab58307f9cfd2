// A key names its owner by GitHub's user id; the gate asks GitHub by login. The login the key was
// made under may have changed hands since (renamed, then registered by someone else), so the login
// is GitHub's answer for the id now, remembered a while.
import type { ProbotOctokit } from "probot";
import { loginOf } from "../github/users.ts";
import type { TtlCache } from "../http/cache.ts";
import type { CallBudget } from "./permits.ts";

/** The person's login now; null when GitHub has no such user any more. */
export function currentLogin(
  octokit: ProbotOctokit,
  logins: TtlCache<string | null>,
  budget: CallBudget,
  userId: number,
): Promise<string | null> {
  return logins.get(String(userId), async () => {
    budget.spend(userId);
    return loginOf(octokit, userId);
  });
}
