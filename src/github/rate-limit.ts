import { RequestError } from "@octokit/request-error";
import type { ProbotOctokit } from "probot";
import { githubRateLimit } from "../metrics.ts";

type Hooks = Pick<InstanceType<typeof ProbotOctokit>, "hook">;

/** Keeps the rate-limit gauge at what GitHub's latest response to this client said. */
export function watchRateLimit(octokit: Hooks, installation: string): void {
  const note = (headers: Record<string, unknown> | undefined) => {
    const remaining = Number(headers?.["x-ratelimit-remaining"] ?? Number.NaN);
    if (Number.isFinite(remaining)) githubRateLimit.set({ installation }, remaining);
  };
  octokit.hook.after("request", (response) => note(response.headers));
  octokit.hook.error("request", (error) => {
    if (error instanceof RequestError) note(error.response?.headers);
    throw error;
  });
}
