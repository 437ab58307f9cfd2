// Lessons from review, as an issue job proposes them (jobs/run/memory.ts keeps them). A review of
// vmpilot's own pull request that asks for a change holding beyond it ("we always use X here") can
// teach it: the job that addresses the review gets propose_lesson, which takes only the review
// comments of the person the gate let in, told by their numeric user id, so no one else's text
// ever becomes a lesson. `/vmpilot remember <text>` proposes one directly. Either way the lesson
// goes into the pull request from `vmpilot/memory`, and merging that is the approval.
import { z } from "zod";
import type { Plugin } from "../../../agent/plugins.ts";
import { isPermanent } from "../../../errors.ts";
import { codeSpan } from "../../../github/markdown.ts";
import { type Lesson, lessonOf } from "../../../github/memory-file.ts";
import type { ReviewThread } from "../../../github/review-threads.ts";
import type { JobRun } from "../../run/agent.ts";
import { commitAuthor } from "../../run/deliver.ts";
import { MEMORY_BRANCH, type Proposed, proposeLessons } from "../../run/memory.ts";
import type { PipelineOutcome } from "./attempt.ts";
import type { ModeJob } from "./modes/mode.ts";

const LESSONS_REPORT = "lessons";
const Proposal = z.object({
  lesson: z
    .string()
    .trim()
    .min(1, "must not be empty")
    .max(1000, "must be at most 1000 characters"),
  citation: z.string().trim(),
  files: z.array(z.string()).max(20, "must be at most 20").default([]),
});
const Reported = z.array(
  z.object({ text: z.string(), citation: z.string(), files: z.array(z.string()) }),
);

/**
 * The comments a review job may learn from, by URL: the review or comment that started it and
 * the requester's own comments in the open threads, theirs by user id (the one the gate let in).
 */
export function citableComments(
  job: Pick<ModeJob, "attempt">,
  threads: readonly ReviewThread[],
): Map<string, string> {
  const { context } = job.attempt;
  const citable = new Map<string, string>();
  if (context.target.type === "review" || context.target.type === "review_comment") {
    citable.set(context.htmlUrl, "the review that started this job");
  }
  if (context.requesterId === undefined) return citable;
  for (const thread of threads) {
    for (const comment of thread.comments) {
      if (comment.authorId === context.requesterId && comment.url) {
        citable.set(comment.url, `in thread ${thread.label} (${thread.path})`);
      }
    }
  }
  return citable;
}

/** propose_lesson, which takes a lesson citing one of `citable` and records it for the job's end. */
export function lessonPlugin(citable: ReadonlyMap<string, string>): Plugin {
  const proposed: Lesson[] = [];
  const list = [...citable].map(([url, where]) => `- ${url} (${where})`).join("\n");
  return {
    name: "lessons",
    description: "Proposes lessons from review for the repository's lessons file.",
    guidance: "",
    tools: [
      {
        name: "propose_lesson",
        description: `Propose a lesson for the repository's lessons file, which every later vmpilot job reads, when a review comment states a rule that holds beyond this pull request ("we always use X here", "never Y in this repo"); not for a change only this pull request needs. Make the change it asks for too. The lesson goes into a pull request the maintainers merge to approve it. Cite the comment it comes from; only these can be cited:\n${list}`,
        input_schema: {
          type: "object",
          properties: {
            lesson: {
              type: "string",
              description:
                "The rule, in one line or a short paragraph, as it should guide later work.",
            },
            citation: {
              type: "string",
              description: "The URL of the review comment it was learned from, from the list.",
            },
            files: {
              type: "array",
              items: { type: "string" },
              description: "The repository's files it is about, when it is about code.",
            },
          },
          required: ["lesson", "citation"],
        },
        runsIn: "worker",
        async handler(input, can) {
          const asked = Proposal.safeParse(input);
          if (!asked.success) {
            const why = asked.error.issues.map((i) => `${i.path.join(".")} ${i.message}`);
            return { content: `Not proposed: ${why.join("; ")}.`, isError: true };
          }
          const { lesson, citation, files } = asked.data;
          if (!citable.has(citation)) {
            return {
              content: `Not proposed: ${citation} is not a comment this job may learn from. Only the comments listed in this tool's description can be cited; what others wrote never becomes a lesson.`,
              isError: true,
            };
          }
          proposed.push(lessonOf(lesson, citation, files));
          can.report(LESSONS_REPORT, [...proposed]);
          return `Recorded: it is proposed in the pull request from ${MEMORY_BRANCH} when this job ends.`;
        },
      },
    ],
  };
}

/** The lessons the run proposed. */
function proposedBy(result: JobRun): Lesson[] {
  return Reported.catch([]).parse(result.reports[LESSONS_REPORT]);
}

/** Proposes `lessons` in the memory pull request, for the job's repository. */
function propose(job: ModeJob, lessons: readonly Lesson[]): Promise<Proposed> {
  const { deps, attempt } = job;
  const { context } = attempt;
  return proposeLessons(deps, {
    octokit: attempt.octokit,
    owner: context.owner,
    repo: context.name,
    cloneUrl: context.cloneUrl,
    installationId: attempt.job.installationId,
    defaultBranch: context.defaultBranch,
    path: job.granted.settings.memory.path,
    lessons,
    author: commitAuthor(deps, context.appSlug),
    jobUrl: attempt.url,
  });
}

function proposedText(proposed: Proposed, count: number): string {
  if ("unchanged" in proposed) {
    const what = count === 1 ? "this lesson" : "these lessons";
    return `The lessons file, or the pull request from \`${MEMORY_BRANCH}\` proposing lessons, holds ${what} already.`;
  }
  const pr = proposed.pullRequest;
  const what = count === 1 ? "1 lesson" : `${count} lessons`;
  return `Proposed ${what} from review in [#${pr.number}](${pr.url}); merging it approves ${count === 1 ? "it" : "them"}.`;
}

/**
 * The note the job's final comment gets for the lessons its run proposed, once they are in the
 * memory pull request; none when it proposed none. A refusal that would come again is said there
 * rather than failing the work the job did.
 */
export async function learn(job: ModeJob, result: JobRun): Promise<string | undefined> {
  const lessons = proposedBy(result);
  if (lessons.length === 0 || !job.granted.settings.memory.enabled) return undefined;
  try {
    return proposedText(await propose(job, lessons), lessons.length);
  } catch (error) {
    if (!isPermanent(error)) throw error;
    return `The lessons from this review were not proposed: ${(error as Error).message}`;
  }
}

/** `/vmpilot remember <text>`: the requester's lesson, proposed as it is. */
export async function remember(job: ModeJob): Promise<PipelineOutcome> {
  const { attempt, request, granted } = job;
  const command = `/${attempt.context.command} remember`;
  if (!granted.settings.memory.enabled) {
    const text = "This repository's settings say `memory: false`: vmpilot keeps no lessons here.";
    return attempt.notice("succeeded", "ℹ️", "Lessons are off", text);
  }
  if (!request.request.trim()) {
    const text = `Write the lesson after ${codeSpan(command)}, on the same line or the lines below.`;
    return attempt.notice("succeeded", "ℹ️", "Nothing to remember", text);
  }
  const lesson = lessonOf(request.request, attempt.context.htmlUrl);
  const proposed = await propose(job, [lesson]);
  return attempt.notice("succeeded", "🧠", "Lesson proposed", proposedText(proposed, 1));
}
