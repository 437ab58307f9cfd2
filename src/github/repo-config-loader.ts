// Reads `.github/vmpilot.yml` from the default branch the way Probot's context.config does: the
// repository's own file, else the owner's `.github` repository, else nothing (defaults apply).

import type { ProbotOctokit } from "probot";
import { type ConfigIssue, parseRepoConfig, type RepoConfig } from "../config/repo-config.ts";
import { jobMarker } from "./comments.ts";
import { codeSpan, quietMentions } from "./markdown.ts";
import { githubStatus } from "./request-status.ts";

export const REPO_CONFIG_PATH = ".github/vmpilot.yml";

export type RepoConfigLoad =
  | { ok: true; config: RepoConfig; source: string | undefined }
  | { ok: false; issues: ConfigIssue[]; message: string; source: string };

/**
 * The file's text on the default branch, or at `ref`; undefined when there is none (404, or a
 * directory).
 */
export function readRepoConfigFile(
  octokit: ProbotOctokit,
  owner: string,
  repo: string,
  ref?: string,
): Promise<string | undefined> {
  return readRepoFile(octokit, { owner, repo, path: REPO_CONFIG_PATH, ref });
}

/** A file's text on the default branch, or at `ref`; undefined when there is none. */
export async function readRepoFile(
  octokit: ProbotOctokit,
  { owner, repo, path, ref }: { owner: string; repo: string; path: string; ref?: string },
): Promise<string | undefined> {
  try {
    const response = await octokit.request("GET /repos/{owner}/{repo}/contents/{path}", {
      owner,
      repo,
      path,
      ...(ref ? { ref } : {}),
      mediaType: { format: "raw" },
    });
    const data: unknown = response.data;
    if (typeof data === "string") return data;
    // Octokit hands over bodies without a text content type as bytes.
    if (data instanceof ArrayBuffer) return Buffer.from(data).toString("utf8");
    // A directory or submodule answers with JSON metadata instead of the raw file.
    return undefined;
  } catch (error) {
    if (githubStatus(error) === 404) return undefined;
    throw error;
  }
}

export async function loadRepoConfig(
  octokit: ProbotOctokit,
  input: { owner: string; repo: string },
): Promise<RepoConfigLoad> {
  const candidates = [input.repo, ...(input.repo === ".github" ? [] : [".github"])];
  for (const repo of candidates) {
    const text = await readRepoConfigFile(octokit, input.owner, repo);
    if (text === undefined) continue;
    const source = `${input.owner}/${repo}/${REPO_CONFIG_PATH}`;
    const parsed = parseRepoConfig(text);
    return parsed.ok
      ? { ok: true, config: parsed.config, source }
      : { ok: false, issues: parsed.issues, message: parsed.message, source };
  }
  return { ok: true, config: {}, source: undefined };
}

/** The comment that tells the maintainers which key to fix. */
export function renderConfigError(
  load: Extract<RepoConfigLoad, { ok: false }>,
  view: { jobId: number; jobUrl: string; command: string },
): string {
  const lines = load.issues.slice(0, 20).map((issue) => `- ${issueMarkdown(issue)}`);
  return [
    `❌ **vmpilot cannot start: \`${load.source}\` is invalid** — [job #${view.jobId}](${view.jobUrl})`,
    "",
    ...lines,
    "",
    `Fix the file on the default branch, then comment \`/${view.command} retry\`.`,
    "",
    jobMarker(view.jobId),
  ].join("\n");
}

/** An issue for Markdown: the key (whatever it holds) in a code span, then the message. */
export function issueMarkdown(issue: ConfigIssue): string {
  return `${issue.path ? `${codeSpan(issue.path)}: ` : ""}${quietMentions(issue.message)}`;
}
