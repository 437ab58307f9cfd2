// The combined commit status of a head: what CI that reports through the status API (Jenkins,
// Buildkite, CircleCI and the like) says of it, the latest status of each context.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import { githubStatus } from "./request-status.ts";

const CombinedStatus = z.object({
  /** success once every context's latest status passed; pending also when there is none. */
  state: z.string(),
  total_count: z.number().int(),
  statuses: z.array(
    z.object({
      state: z.string(),
      context: z.string(),
      description: z.string().nullable(),
      target_url: z.string().nullable(),
    }),
  ),
});
export type CombinedStatus = z.infer<typeof CombinedStatus>;

/**
 * The head's combined status, with up to `perPage` of its statuses; undefined when the
 * installation has not accepted the statuses permission yet (the settings page says so).
 */
export async function combinedStatus(
  octokit: ProbotOctokit,
  query: { owner: string; repo: string; sha: string },
  perPage: number,
): Promise<CombinedStatus | undefined> {
  try {
    const { data } = await octokit.rest.repos.getCombinedStatusForRef({
      owner: query.owner,
      repo: query.repo,
      ref: query.sha,
      per_page: perPage,
    });
    return CombinedStatus.parse(data);
  } catch (error) {
    if (githubStatus(error) === 403) return undefined;
    throw error;
  }
}
