// A person is their GitHub user id; a login is only what GitHub calls them now. A login can change
// hands (renamed, then registered by someone else), so it is asked for right before a call that
// takes one.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import { parseAnswer } from "./answer.ts";
import { githubStatus } from "./request-status.ts";

const User = z.object({ login: z.string().min(1), id: z.number().int() });

/** The login of user `userId` now; null when GitHub has no such user any more. */
export async function loginOf(octokit: ProbotOctokit, userId: number): Promise<string | null> {
  try {
    const { data } = await octokit.request("GET /user/{account_id}", { account_id: userId });
    const user = parseAnswer(User, data, "GET /user/{account_id}");
    return user.id === userId ? user.login : null;
  } catch (error) {
    if (githubStatus(error) === 404) return null;
    throw error;
  }
}
