// What a job remembers about the GitHub item that triggered it (stored in jobs.context), so the
// worker can answer without re-reading the webhook.
import { z } from "zod";
import { parseStored } from "./stored-value.ts";

const id = z.number().int();

/** Where the trigger was written; the 👀 reaction goes there. */
const triggerTargetSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("issue") }),
  z.object({ type: z.literal("issue_comment"), id }),
  z.object({ type: z.literal("review_comment"), id }),
  /** Reviews take no reactions; the pull request itself gets it. */
  z.object({ type: z.literal("review"), id }),
]);
export type TriggerTarget = z.infer<typeof triggerTargetSchema>;

const jobContextSchema = z.object({
  owner: z.string(),
  name: z.string(),
  itemKind: z.enum(["issue", "pull_request"]),
  title: z.string(),
  htmlUrl: z.string(),
  cloneUrl: z.string(),
  defaultBranch: z.string(),
  target: triggerTargetSchema,
  /** The app's slug when the job was created, for help texts. */
  appSlug: z.string(),
  /** The command word, e.g. "vmpilot" for `/vmpilot fix`. */
  command: z.string(),
  /** The requester's GitHub user id, for their `Co-authored-by` address. */
  requesterId: id.optional(),
  /** The label that triggers work on this repository. */
  label: z.string(),
  /** `/vmpilot <word>` with a word that is not a verb. */
  unknownVerb: z.string().optional(),
  /** A CI fix: the head commit whose checks failed. */
  headSha: z.string().optional(),
  /**
   * A run of the repository's automation `name` on an item (trigger "automation"): whose issues
   * may start it, who opened this one, and the only labels a triage may apply, when it names them.
   */
  automation: z
    .object({
      name: z.string(),
      authors: z.enum(["write", "any"]),
      author: z.string(),
      labels: z.array(z.string()).optional(),
    })
    .optional(),
});
export type JobContext = z.infer<typeof jobContextSchema>;

export function readJobContext(job: { id: number; context: unknown }): JobContext {
  return parseStored(jobContextSchema, job.context, `jobs.context of job ${job.id}`);
}
