// Branch names vmpilot creates and pushes. Names are built from an allow-list of characters, so
// nothing from an issue title can reach git as an option, a revision expression or a path trick.

export const BRANCH_PREFIX = "vmpilot/";

const SLUG_MAX = 40;
const NAME_MAX = 200;
const ALLOWED = /^[A-Za-z0-9._/-]+$/;

/** Lowercase ASCII words joined by "-", at most `max` characters, cut at a word boundary. */
export function slugify(text: string, max = SLUG_MAX): string {
  const words = text
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
  let slug = "";
  for (const word of words) {
    const next = slug ? `${slug}-${word}` : word;
    if (next.length > max) {
      if (!slug) slug = word.slice(0, max);
      break;
    }
    slug = next;
  }
  return slug;
}

/** `vmpilot/issue-<N>-<slug>`, or `vmpilot/issue-<N>` when the title has no usable words. */
export function issueBranchName(number: number, title: string): string {
  if (!Number.isSafeInteger(number) || number < 1) throw new Error(`bad issue number ${number}`);
  const slug = slugify(title);
  return `${BRANCH_PREFIX}issue-${number}${slug ? `-${slug}` : ""}`;
}

/**
 * A branch name git accepts and that is safe to put on a command line: allow-listed characters,
 * and none of git's forbidden forms (check-ref-format) nor a leading "-".
 */
export function isValidBranchName(name: string): boolean {
  if (name.length === 0 || name.length > NAME_MAX || !ALLOWED.test(name)) return false;
  if (name.startsWith("-") || name.startsWith("/") || name.endsWith("/")) return false;
  if (name.endsWith(".") || name.endsWith(".lock") || name.includes("..")) return false;
  if (name.includes("//") || name === "HEAD") return false;
  return name.split("/").every((part) => !part.startsWith(".") && !part.endsWith(".lock"));
}

export function isVmpilotBranch(name: string): boolean {
  return name.startsWith(BRANCH_PREFIX) && isValidBranchName(name);
}

/**
 * The branch an issue's job works on: the one its conversation already uses when there is one, so
 * follow-ups land on the same branch and pull request, else a new name from the issue.
 */
export function chooseIssueBranch(input: {
  existing?: string | null;
  number: number;
  title: string;
}): string {
  if (input.existing && isVmpilotBranch(input.existing)) return input.existing;
  return issueBranchName(input.number, input.title);
}
