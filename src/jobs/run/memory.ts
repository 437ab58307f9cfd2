// Lessons from review, kept in the repository (memory-file.ts says the file's form). Every job, chat
// turn and `vmpilot run` reads the file from the default branch into its prompt, next to AGENTS.md
// (prompt.ts). A lesson gets in only through one pull request from vmpilot's own branch
// `vmpilot/memory`, holding the lessons not merged yet: vmpilot opens it or updates it, and
// merging it is the approval. The branch is never pushed over: a branch with commits the default
// branch lacks (a person's too) gets the next commit on top; one merged already starts again from
// the default branch. Lessons whose files are all gone from the default branch are marked stale in
// the next such pull request, never dropped.
import type { ProbotOctokit } from "probot";
import {
  MAX_REPO_CONFIG_BYTES,
  parseRepoConfig,
  type RepoSettings,
} from "../../config/repo-config.ts";
import { quietMentions } from "../../github/markdown.ts";
import {
  citedFiles,
  type FileLesson,
  type Lesson,
  readLessons,
  updateLessons,
} from "../../github/memory-file.ts";
import { type PullRequestRef, publishPullRequest } from "../../github/pull-request.ts";
import { REPO_CONFIG_PATH } from "../../github/repo-config-loader.ts";
import { redact } from "../../log/redact.ts";
import type { CommitIdentity } from "../../workspace/git/commit.ts";
import { gitClient } from "../../workspace/git/git.ts";
import { mirrorRefs, syncMirror } from "../../workspace/git/mirror.ts";
import { commitFile, missingPaths, readMirrorFile } from "../../workspace/git/mirror-files.ts";
import { pushCommit } from "../../workspace/git/publish.ts";
import type { JobDeps } from "./deps.ts";
import { settingsOver } from "./settings.ts";

export const MEMORY_BRANCH = "vmpilot/memory";
/** Larger lessons files are not read: nobody keeps a megabyte of lessons. */
const MAX_FILE_BYTES = 1_000_000;
/** Lessons the pull request lists, at most. */
const LISTED = 100;
/** Pushes tried when someone else moved the branch in between: once more on top of theirs. */
const PUSH_TRIES = 2;

/**
 * The lessons file as the default branch has it (the mirror's HEAD), for the prompt. A file that
 * cannot be read (a default branch the mirror no longer has) leaves the work without lessons
 * rather than stopping it.
 */
export async function readMemory(
  mirror: string,
  memory: RepoSettings["memory"],
  failed: (error: unknown) => void,
): Promise<{ path: string; text: string } | undefined> {
  if (!memory.enabled) return undefined;
  try {
    const text = await readMirrorFile(mirror, "HEAD", memory.path, MAX_FILE_BYTES);
    return text?.trim() ? { path: memory.path, text } : undefined;
  } catch (error) {
    failed(error);
    return undefined;
  }
}

/**
 * The lessons file of a repository with no settings but its own file (`vmpilot run`): where its
 * default branch's `.github/vmpilot.yml` says, if it says, as a job would read it.
 */
export async function repositoryMemory(
  mirror: string,
  failed: (error: unknown) => void,
): Promise<{ path: string; text: string } | undefined> {
  const yml = await readMirrorFile(mirror, "HEAD", REPO_CONFIG_PATH, MAX_REPO_CONFIG_BYTES).catch(
    () => undefined,
  );
  const parsed = yml === undefined ? undefined : parseRepoConfig(yml);
  const file = parsed?.ok ? parsed.config : null;
  return readMemory(mirror, settingsOver(undefined, file, undefined).values.memory, failed);
}

export interface LessonsInput {
  octokit: ProbotOctokit;
  owner: string;
  repo: string;
  cloneUrl: string;
  installationId: number;
  defaultBranch: string;
  /** The lessons file (`memory.path`). */
  path: string;
  lessons: readonly Lesson[];
  author: CommitIdentity;
  /** The job that proposes them, for the pull request's footer. */
  jobUrl: string;
}

export type Proposed =
  | { pullRequest: PullRequestRef & { created: boolean } }
  /** The branch holds every lesson already, and nothing turned stale. */
  | { unchanged: true };

function lessonLine(lesson: FileLesson): string {
  const files = lesson.files.length ? ` (${lesson.files.map((f) => `\`${f}\``).join(", ")})` : "";
  const stale = lesson.stale ? "**Stale**, its files are gone: " : "";
  return `- ${stale}${quietMentions(lesson.text)}${files} — learned from ${lesson.citation}`;
}

/** The pull request's body: the lessons it holds that the default branch does not. */
function memoryBody(path: string, pending: readonly FileLesson[], jobUrl: string): string {
  const listed = pending.slice(0, LISTED).map(lessonLine);
  if (pending.length > LISTED) listed.push(`- … and ${pending.length - LISTED} more`);
  return redact(
    [
      `Lessons vmpilot learned from review, for \`${path}\`. Every vmpilot job reads that file from the default branch: merging this pull request is what approves them. Edit or drop a lesson on this branch first if it is wrong; vmpilot adds later lessons on top.`,
      "",
      ...listed,
      "",
      `<sub>Proposed by vmpilot · [job log](${jobUrl})</sub>`,
    ].join("\n"),
  );
}

/** The lessons of `file` the default branch's file lacks (by text and citation, stale or not). */
function notMerged(file: string, onDefault: string | undefined): FileLesson[] {
  const merged = readLessons(onDefault ?? "");
  return readLessons(file).filter(
    (lesson) =>
      !merged.some(
        (had) =>
          had.text === lesson.text &&
          had.citation === lesson.citation &&
          had.stale === lesson.stale,
      ),
  );
}

/**
 * Proposes `lessons` in the pull request from `vmpilot/memory`, opened or updated, with the
 * lessons there that are not merged yet and the stale ones marked.
 */
export async function proposeLessons(
  deps: Pick<JobDeps, "dataDir" | "installationToken" | "logger">,
  input: LessonsInput,
): Promise<Proposed> {
  for (let tried = 1; ; tried++) {
    const auth = { token: await deps.installationToken(input.installationId) };
    const mirror = await syncMirror(deps.dataDir, input.cloneUrl, auth, deps.logger);
    const { heads } = await mirrorRefs(mirror);
    const tip = heads.get(input.defaultBranch);
    if (!tip) throw new Error(`${mirror.url} has no branch ${input.defaultBranch}`);
    const branch = heads.get(MEMORY_BRANCH);
    // What the branch holds that the default branch does not; none once it was merged.
    const ahead = branch
      ? Number(
          (await gitClient(mirror.path).raw(["rev-list", "--count", `${tip}..${branch}`])).trim(),
        )
      : 0;
    const parent = branch && ahead > 0 ? branch : tip;
    const onDefault = await readMirrorFile(mirror.path, tip, input.path, MAX_FILE_BYTES);
    const current =
      parent === tip
        ? onDefault
        : ((await readMirrorFile(mirror.path, parent, input.path, MAX_FILE_BYTES)) ?? onDefault);
    const gone = await missingPaths(mirror.path, tip, citedFiles(current));
    const next = updateLessons(current, input.lessons, gone);
    if (next === null) return { unchanged: true };
    const added = input.lessons.length;
    const sha = await commitFile(mirror.path, {
      parent,
      path: input.path,
      content: next,
      message: `Lessons from review: ${added} proposed${gone.size ? ", stale ones marked" : ""}`,
      author: input.author,
    });
    try {
      await pushCommit({
        mirror: mirror.path,
        url: mirror.url,
        auth,
        sha,
        branch: MEMORY_BRANCH,
        defaultBranch: input.defaultBranch,
        // From what it was, or from nothing: a push in between is never overwritten.
        lease: branch ?? null,
      });
    } catch (error) {
      if (tried >= PUSH_TRIES) throw error;
      deps.logger.info({ err: error }, "the lessons branch moved; proposing on top of it again");
      continue;
    }
    const pullRequest = await publishPullRequest(input.octokit, {
      owner: input.owner,
      repo: input.repo,
      head: MEMORY_BRANCH,
      base: input.defaultBranch,
      title: "Lessons from review",
      body: memoryBody(input.path, notMerged(next, onDefault), input.jobUrl),
      draft: false,
    });
    return { pullRequest };
  }
}
