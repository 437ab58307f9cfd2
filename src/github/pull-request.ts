// The draft pull request a conversation opens, and keeps updating on later runs: one per
// conversation and branch.
import { RequestError } from "@octokit/request-error";
import type { ProbotOctokit } from "probot";
import { redact } from "../log/redact.ts";
import { inSpan } from "../log/trace.ts";
import { costLine, quietMentions, type RunCost, type TestsSummary } from "./progress-comment.ts";
import { githubStatus } from "./request-status.ts";

export interface PullRequestRef {
  number: number;
  url: string;
}

export interface PublishPullRequestInput {
  owner: string;
  repo: string;
  /** Branch in the same repository. */
  head: string;
  base: string;
  title: string;
  body: string;
  /** The pull request the conversation opened earlier, if any. */
  knownNumber?: number | null;
  /** Opened as a draft (the default), or ready to merge. */
  draft?: boolean;
}

export interface ChangedFile {
  /** git's status letter: A, M, D, R, ... */
  status: string;
  path: string;
}

export interface PullRequestBodyInput {
  summary: string;
  tests?: TestsSummary;
  files: readonly ChangedFile[];
  /** What the run took; null when the repository turned the line off (`showCost: false`). */
  cost: RunCost | null;
  durationMs: number;
  /** The issue the pull request resolves. */
  fixes?: number;
  /** Who asked; null for the operator's key, which is no one's login. */
  requester: string | null;
  jobUrl: string;
  /** What the model's second look at the diff found and changed, when it took one. */
  look?: string;
}

const FILES_SHOWN = 50;
const SUMMARY_CAP = 20_000;
// GitHub rejects bodies over 65536 characters.
const BODY_CAP = 65_000;

function errorText(error: unknown): string {
  const data = error instanceof RequestError ? error.response?.data : undefined;
  return `${error instanceof Error ? error.message : ""} ${JSON.stringify(data ?? "")}`;
}

function testsText(tests: TestsSummary | undefined): string {
  if (!tests) return "not reported";
  const command = tests.command ? ` (\`${tests.command.replaceAll("`", "'")}\`)` : "";
  const why = tests.explanation ? `: ${tests.explanation.replace(/\s+/g, " ")}` : "";
  if (tests.outcome === "passed") return `✔ passed${command}`;
  if (tests.outcome === "failed") return `✖ failed${command}${why}`;
  return `not run${why}`;
}

/** The second look's section: one line, or its heading above a list. */
function lookLines(look: string | undefined): string[] {
  const text = look?.trim();
  if (!text) return [];
  const quiet = quietMentions(text);
  return text.includes("\n")
    ? ["**Second look:**", "", quiet, ""]
    : [`**Second look:** ${quiet}`, ""];
}

export function renderPullRequestBody(input: PullRequestBodyInput): string {
  const summary = input.summary.trim() || "(no summary)";
  const files = input.files.slice(0, FILES_SHOWN).map((f) => `- \`${f.status}\` ${f.path}`);
  if (input.files.length > FILES_SHOWN)
    files.push(`- … and ${input.files.length - FILES_SHOWN} more`);
  const lines = [
    quietMentions(
      summary.length > SUMMARY_CAP ? `${summary.slice(0, SUMMARY_CAP)}\n\n…(cut)` : summary,
    ),
    "",
    "---",
    "",
    `**Tests:** ${testsText(input.tests)}`,
    "",
    ...lookLines(input.look),
    `**Files changed (${input.files.length}):**`,
    ...files,
    "",
    ...(input.cost ? [`**Run:** ${costLine(input.cost, input.durationMs)}`, ""] : []),
    `${input.requester === null ? "Asked with the operator's key" : `Asked by @${input.requester}`} · [job log](${input.jobUrl})`,
    "",
    "Draft opened by vmpilot. Review it like any other pull request before merging.",
  ];
  if (input.fixes !== undefined) lines.push("", `Fixes #${input.fixes}`);
  const body = redact(lines.join("\n"));
  return body.length > BODY_CAP ? body.slice(0, BODY_CAP) : body;
}

async function getOpenPullRequest(
  octokit: ProbotOctokit,
  input: { owner: string; repo: string; number: number },
): Promise<PullRequestRef | undefined> {
  try {
    const { data } = await octokit.rest.pulls.get({
      owner: input.owner,
      repo: input.repo,
      pull_number: input.number,
    });
    return data.state === "open" ? { number: data.number, url: data.html_url } : undefined;
  } catch (error) {
    if (githubStatus(error) === 404) return undefined;
    throw error;
  }
}

/** The open pull request from `head` (a branch of the same repository). */
async function findPullRequestByHead(
  octokit: ProbotOctokit,
  input: { owner: string; repo: string; head: string },
): Promise<PullRequestRef | undefined> {
  const { data } = await octokit.rest.pulls.list({
    owner: input.owner,
    repo: input.repo,
    head: `${input.owner}:${input.head}`,
    state: "open",
    per_page: 10,
  });
  const found = data.find((pr) => pr.head.ref === input.head) ?? data[0];
  return found && { number: found.number, url: found.html_url };
}

/**
 * Updates the conversation's open pull request, or the open one from the branch, or opens a draft.
 * A creation that GitHub answered 5xx is retried by the client; if the first try had in fact
 * succeeded, GitHub says the pull request exists and that one is updated instead.
 */
export function publishPullRequest(
  octokit: ProbotOctokit,
  input: PublishPullRequestInput,
): Promise<PullRequestRef & { created: boolean }> {
  return inSpan("pull request", {}, async (span) => {
    const published = await publish(octokit, input);
    span.setAttributes({
      "vmpilot.pull_request.number": published.number,
      "vmpilot.pull_request.created": published.created,
    });
    return published;
  });
}

async function publish(
  octokit: ProbotOctokit,
  input: PublishPullRequestInput,
): Promise<PullRequestRef & { created: boolean }> {
  const repo = { owner: input.owner, repo: input.repo };
  const existing =
    (input.knownNumber
      ? await getOpenPullRequest(octokit, { ...repo, number: input.knownNumber })
      : undefined) ?? (await findPullRequestByHead(octokit, { ...repo, head: input.head }));
  if (existing) {
    await octokit.rest.pulls.update({ ...repo, pull_number: existing.number, body: input.body });
    return { ...existing, created: false };
  }
  const create = (draft: boolean) =>
    octokit.rest.pulls.create({
      ...repo,
      head: input.head,
      base: input.base,
      title: redact(input.title),
      body: input.body,
      draft,
    });
  try {
    const { data } = await create(input.draft ?? true).catch((error: unknown) => {
      // Some plans have no draft pull requests; open a normal one there.
      if (githubStatus(error) === 422 && /draft/i.test(errorText(error))) return create(false);
      throw error;
    });
    return { number: data.number, url: data.html_url, created: true };
  } catch (error) {
    if (githubStatus(error) === 422 && /already exists/i.test(errorText(error))) {
      const found = await findPullRequestByHead(octokit, { ...repo, head: input.head });
      if (found) {
        await octokit.rest.pulls.update({ ...repo, pull_number: found.number, body: input.body });
        // There was none before this run, so this run opened it.
        return { ...found, created: true };
      }
    }
    throw error;
  }
}
