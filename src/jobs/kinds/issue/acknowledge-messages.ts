// The texts of the bot's first answer. Each carries the job's marker so a retry finds it.
import { jobMarker } from "../../../github/comments.ts";
import { codeSpan } from "../../../github/markdown.ts";
import type { JobContext } from "../../../store/job-context.ts";
import type { Job, JobStatus } from "../../../store/jobs.ts";
import { jobUrl } from "../../run/progress.ts";

function withMarker(jobId: number, lines: string[]): string {
  return [...lines, "", jobMarker(jobId)].join("\n");
}

export function progressBody(job: Job, publicUrl: string): string {
  const verb = job.command ?? "fix";
  // An automation's run is the app's own: no one to name.
  const forWhom =
    job.trigger === "automation" ? "by this repository's automation" : `for @${job.requester}`;
  return withMarker(job.id, [
    `👀 **vmpilot is on it** — [job #${job.id}](${jobUrl(publicUrl, job.id)})`,
    "",
    `Acknowledged ${codeSpan(verb)} ${forWhom}; starting work. This comment is updated as ` +
      "the job goes on.",
  ]);
}

export function refusalBody(job: Job, policy: "write" | "allow-list"): string {
  const who =
    policy === "allow-list"
      ? "the users on this repository's vmpilot allow-list"
      : "people with write, maintain or admin access to this repository, and the users on its " +
        "vmpilot allow-list";
  return withMarker(job.id, [
    `Sorry @${job.requester}, vmpilot only acts when asked by ${who}. ` +
      "A maintainer can trigger it for you.",
  ]);
}

export function helpBody(job: Job, context: JobContext): string {
  const c = `/${context.command}`;
  const intro = context.unknownVerb
    ? `${codeSpan(context.unknownVerb)} is not a vmpilot command. These are:`
    : "vmpilot commands (write them at the start of a line in a comment):";
  return withMarker(job.id, [
    intro,
    "",
    `- \`${c} fix [instructions]\` — work on this issue or pull request and open or update a ` +
      `draft pull request. The \`${context.label}\` label, assigning @${context.appSlug}[bot] and ` +
      `mentioning @${context.appSlug} do the same; \`${c} <instructions>\` too.`,
    `- \`${c} plan [instructions]\` — post a plan only, change nothing.`,
    `- \`${c} review\` — review this pull request.`,
    `- \`${c} remember <lesson>\` — propose a lesson for every later job, in the pull request ` +
      "from `vmpilot/memory`; merging it approves the lesson.",
    `- \`${c} retry\` — run the last request again.`,
    `- \`${c} stop\` — cancel the job that is running here.`,
    `- \`${c} status\` — show the state of the latest job here.`,
    `- \`${c} help\` — show this list.`,
    "",
    "They work for people with write, maintain or admin access to the repository and for users " +
      "on its vmpilot allow-list.",
  ]);
}

const STATUS_TEXT: Record<JobStatus, string> = {
  queued: "waiting to start",
  running: "running",
  acknowledged: "acknowledged, starting work",
  refused: "refused (the requester may not trigger vmpilot)",
  ignored: "ignored (not a trigger under the repository's settings)",
  succeeded: "finished",
  failed: "failed",
  cancelled: "cancelled",
  dead: "failed after retries",
};

/** A job as one line: its link, what was asked and by whom. */
function jobLine(job: Job, publicUrl: string): string {
  return `[#${job.id}](${jobUrl(publicUrl, job.id)}) (${codeSpan(job.command ?? "fix")}, asked by @${job.requester})`;
}

/** `queued`: the jobs waiting behind `latest`, oldest first. */
export function statusBody(job: Job, latest: Job | undefined, queued: Job[], publicUrl: string) {
  if (!latest) {
    return withMarker(job.id, ["There is no vmpilot job in this conversation yet."]);
  }
  const lines = [`Job ${jobLine(latest, publicUrl)} is ${STATUS_TEXT[latest.status]}.`];
  if (queued.length > 0) {
    lines.push("", "Queued behind it, in the order they will run:");
    for (const waiting of queued) lines.push(`- ${jobLine(waiting, publicUrl)}`);
  }
  return withMarker(job.id, lines);
}

/** The notice of a job that waits behind `ahead` (and `more` others) in the same conversation. */
export function queuedBody(job: Job, ahead: number, more: number, publicUrl: string): string {
  const others = more === 0 ? "" : more === 1 ? " and 1 more" : ` and ${more} more`;
  return withMarker(job.id, [
    `👀 **vmpilot got it** — [job #${job.id}](${jobUrl(publicUrl, job.id)})`,
    "",
    `Queued ${codeSpan(job.command ?? "fix")} for @${job.requester} behind ` +
      `[job #${ahead}](${jobUrl(publicUrl, ahead)})${others}. It continues the same conversation ` +
      "when those are done; this comment is updated then.",
  ]);
}

export function stopBody(job: Job, stopped: number[], publicUrl: string): string {
  if (stopped.length === 0) {
    return withMarker(job.id, ["Nothing to stop: no vmpilot job is running or waiting here."]);
  }
  const links = stopped.map((id) => `[#${id}](${jobUrl(publicUrl, id)})`).join(", ");
  return withMarker(job.id, [`Stopped job ${links} as asked by @${job.requester}.`]);
}

export function deadBody(
  job: Job,
  context: JobContext,
  error: string | null,
  publicUrl: string,
): string {
  const reason = error ? `: ${error.replace(/\s+/g, " ").slice(0, 300)}` : "";
  return withMarker(job.id, [
    `❌ vmpilot [job #${job.id}](${jobUrl(publicUrl, job.id)}) failed after retries${reason}`,
    "",
    `Comment \`/${context.command} retry\` to try again.`,
  ]);
}
