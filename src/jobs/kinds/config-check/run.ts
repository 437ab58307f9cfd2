// The "vmpilot config" check run on a head that changes `.github/vmpilot.yml` or a skill: the file
// as that commit has it, checked as a job would read it, and the front matter of the skills it
// adds or changes. The run shows the file alone: check runs are public, and the settings page and
// the operator's defaults are not.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import { type ConfigIssue, parseRepoConfig } from "../../../config/repo-config.ts";
import { isSkillFile, parseSkill } from "../../../config/skills.ts";
import { configFailureRun, configSuccessRun } from "../../../github/config-check-run.ts";
import {
  REPO_CONFIG_PATH,
  readRepoConfigFile,
  readRepoFile,
} from "../../../github/repo-config-loader.ts";
import { githubStatus } from "../../../github/request-status.ts";
import type { Logger } from "../../../log/logger.ts";
import { MAX_SKILL_CHECKS } from "../../queue/config-checks.ts";
import type { ConfigCheckRequest } from "../../queue/queue.ts";

export interface ConfigCheckDeps {
  auth(installationId: number): Promise<ProbotOctokit>;
  logger: Logger;
}

const ChangedFiles = z.array(
  z.object({
    filename: z.string(),
    previous_filename: z.string().optional(),
    status: z.string().optional(),
  }),
);

/** Whether the pull request changes the file, and the skills it adds or changes. */
async function pullRequestChanges(
  octokit: ProbotOctokit,
  check: ConfigCheckRequest,
  number: number,
): Promise<{ config: boolean; skills: string[] }> {
  const route = "GET /repos/{owner}/{repo}/pulls/{pull_number}/files";
  const files = ChangedFiles.parse(
    await octokit.paginate(route, {
      owner: check.owner,
      repo: check.repo,
      pull_number: number,
      per_page: 100,
    }),
  );
  const config = files.some(
    (file) => file.filename === REPO_CONFIG_PATH || file.previous_filename === REPO_CONFIG_PATH,
  );
  const skills = files
    .filter((file) => file.status !== "removed" && isSkillFile(file.filename))
    .map((file) => file.filename);
  return { config, skills: skills.slice(0, MAX_SKILL_CHECKS) };
}

/** What is wrong with the front matter of each skill that the head has, at its line. */
async function skillIssues(
  octokit: ProbotOctokit,
  check: ConfigCheckRequest,
  paths: readonly string[],
): Promise<ConfigIssue[]> {
  const issues: ConfigIssue[] = [];
  for (const path of paths) {
    const { owner, repo, headSha: ref } = check;
    const text = await readRepoFile(octokit, { owner, repo, path, ref });
    if (text === undefined) continue;
    const parsed = parseSkill(path, text);
    if (!parsed.ok) issues.push(...parsed.issues.map((issue) => ({ ...issue, file: path })));
  }
  return issues;
}

export async function runConfigCheck(
  deps: ConfigCheckDeps,
  check: ConfigCheckRequest,
  signal: AbortSignal,
): Promise<void> {
  const { owner, repo, headSha, changes } = check;
  const octokit = await deps.auth(check.installationId);
  let skills = changes.kind === "push" ? (changes.skills ?? []) : [];
  if (changes.kind === "pull_request") {
    const changed = await pullRequestChanges(octokit, check, changes.number);
    if (!changed.config && changed.skills.length === 0) return;
    skills = changed.skills;
  }
  const text = await readRepoConfigFile(octokit, owner, repo, headSha);
  // A push of too many commits to tell may not have touched the file: without one there, nothing
  // to check.
  if (text === undefined && changes.kind === "push" && !changes.listed) return;
  const parsed = parseRepoConfig(text ?? "");
  const issues = [
    ...(parsed.ok ? [] : parsed.issues),
    ...(await skillIssues(octokit, check, skills)),
  ];
  const body =
    issues.length > 0
      ? configFailureRun(headSha, issues)
      : configSuccessRun(headSha, parsed.ok ? parsed.config : {}, text !== undefined, skills);
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
