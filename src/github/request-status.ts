import { RequestError } from "@octokit/request-error";

/** GitHub's HTTP status for a request Octokit made; undefined for anything else. */
export function githubStatus(error: unknown): number | undefined {
  return error instanceof RequestError ? error.status : undefined;
}
