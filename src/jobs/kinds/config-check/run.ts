// The "vmpilot config" check run on a head that changes `.github/vmpilot.yml`: the file as that
// commit has it, checked as a job would read it. The run shows the file alone: check runs are
// public, and the settings page and the operator's defaults are not.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import { parseRepoConfig } from "../../../config/repo-config.ts";
import { configFailureRun, configSuccessRun } from "../../../github/config-check-run.ts";
import { REPO_CONFIG_PATH, readRepoConfigFile } from "../../../github/repo-config-loader.ts";
import { githubStatus } from "../../../github/request-status.ts";
import type { Logger } from "../../../log/logger.ts";
import type { ConfigCheckRequest } from "../../queue/queue.ts";

export interface ConfigCheckDeps {
  auth(installationId: number): Promise<ProbotOctokit>;
  logger: Logger;
}

const ChangedFiles = z.array(
  z.object({ filename: z.string(), previous_filename: z.string().optional() }),
);

async function pullRequestChangesConfig(
  octokit: ProbotOctokit,
  check: ConfigCheckRequest,
  number: number,
): Promise<boolean> {
  const route = "GET /repos/{owner}/{repo}/pulls/{pull_number}/files";
  const files = ChangedFiles.parse(
    await octokit.paginate(route, {
      owner: check.owner,
      repo: check.repo,
      pull_number: number,
      per_page: 100,
    }),
  );
  return files.some(
    (file) => file.filename === REPO_CONFIG_PATH || file.previous_filename === REPO_CONFIG_PATH,
  );
}

export async function runConfigCheck(
  deps: ConfigCheckDeps,
  check: ConfigCheckRequest,
  signal: AbortSignal,
): Promise<void> {
  const { owner, repo, headSha, changes } = check;
  const octokit = await deps.auth(check.installationId);
  if (changes.kind === "pull_request") {
    if (!(await pullRequestChangesConfig(octokit, check, changes.number))) return;
  }
  const text = await readRepoConfigFile(octokit, owner, repo, headSha);
  // A push of too many commits to tell may not have touched the file: without one there, nothing
  // to check.
  if (text === undefined && changes.kind === "push" && !changes.listed) return;
  const parsed = parseRepoConfig(text ?? "");
  const body = parsed.ok
    ? configSuccessRun(headSha, parsed.config, text !== undefined)
    : configFailureRun(headSha, parsed.issues);
  signal.throwIfAborted();
  try {
    await octokit.request("POST /repos/{owner}/{repo}/check-runs", { owner, repo, ...body });
  } catch (error) {
    // An installation that has not accepted the checks permission yet: a retry cannot help.
    if (githubStatus(error) !== 403) throw error;
    deps.logger.warn(
      { repo: `${owner}/${repo}`, headSha },
      "cannot create the vmpilot config check run: the installation lacks the checks permission",
    );
  }
}
