// What a job remembers about the GitHub item that triggered it (stored in jobs.context), so the
// worker can answer without re-reading the webhook.

/** Where the trigger was written; the 👀 reaction goes there. */
export type TriggerTarget =
  | { type: "issue" }
  | { type: "issue_comment"; id: number }
  | { type: "review_comment"; id: number }
  /** Reviews take no reactions; the pull request itself gets it. */
  | { type: "review"; id: number };

export interface JobContext {
  owner: string;
  name: string;
  itemKind: "issue" | "pull_request";
  title: string;
  htmlUrl: string;
  cloneUrl: string;
  defaultBranch: string;
  target: TriggerTarget;
  /** The app's slug when the job was created, for help texts. */
  appSlug: string;
  /** The command word, e.g. "vmpilot" for `/vmpilot fix`. */
  command: string;
  /** The requester's GitHub user id, for their `Co-authored-by` address. */
  requesterId?: number;
  /** The label that triggers work on this repository. */
  label: string;
  /** `/vmpilot <word>` with a word that is not a verb. */
  unknownVerb?: string;
}

export function readJobContext(value: Record<string, unknown>): JobContext {
  return value as unknown as JobContext;
}
