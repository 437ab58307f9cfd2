// A key names its owner by GitHub's user id; the gate asks GitHub by login. The login the key was
// made under may have changed hands since (renamed, then registered by someone else), so the login
// is GitHub's answer for the id now, remembered a while.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import { parseAnswer } from "../github/answer.ts";
import { githubStatus } from "../github/request-status.ts";
import type { TtlCache } from "../http/cache.ts";
import type { CallBudget } from "./permits.ts";

const User = z.object({ login: z.string().min(1), id: z.number().int() });

/** The person's login now; null when GitHub has no such user any more. */
export function currentLogin(
  octokit: ProbotOctokit,
  logins: TtlCache<string | null>,
  budget: CallBudget,
  userId: number,
): Promise<string | null> {
  return logins.get(String(userId), async () => {
    budget.spend();
    try {
      const { data } = await octokit.request("GET /user/{account_id}", { account_id: userId });
      const user = parseAnswer(User, data, "GET /user/{account_id}");
      return user.id === userId ? user.login : null;
    } catch (error) {
      if (githubStatus(error) === 404) return null;
      throw error;
    }
  });
}
