// Decides whether a webhook asks vmpilot to act, and what for. Pure: no I/O, linear time.
import { sanitize } from "../github/sanitize.ts";

const VERBS = ["fix", "plan", "review", "remember", "stop", "retry", "status", "help"] as const;
type Verb = (typeof VERBS)[number];

type TriggerKind = "label" | "assigned" | "mention" | "command" | "review";

export interface Trigger {
  kind: TriggerKind;
  verb: Verb;
  /** The requester's words after the trigger, sanitized; empty when the item itself is the task. */
  instruction: string;
  /** Set when `/command <word>` named a verb that does not exist; the verb is then `help`. */
  unknownVerb?: string;
}

export type ParseResult = { trigger: Trigger } | { ignored: string };

export interface TriggerOptions {
  /** The app's slug from GET /app; its bot user is `<slug>[bot]`. */
  appSlug: string;
  label: string;
  command: string;
}

export interface TriggerInput {
  event: "issues" | "issue_comment" | "pull_request_review_comment" | "pull_request_review";
  action: string;
  sender: { login: string; type: string };
  /** Issue body, comment body or review body. */
  text?: string | null;
  /** issues.labeled: the label added. */
  label?: string;
  /** issues.assigned: the user assigned. */
  assignee?: string;
  /** pull_request_review.submitted: approved, changes_requested or commented. */
  reviewState?: string;
  item: { locked: boolean; state: string; authorLogin?: string };
}

const VERB_SET: ReadonlySet<string> = new Set(VERBS);
// Verbs that still make sense on a locked or closed item.
const CONTROL_VERBS: ReadonlySet<Verb> = new Set(["stop", "status", "help"]);
const HANDLED_ACTIONS: Record<TriggerInput["event"], string> = {
  issues: "opened|labeled|assigned",
  issue_comment: "created",
  pull_request_review_comment: "created",
  pull_request_review: "submitted",
};

export function isBot(sender: { login: string; type: string }): boolean {
  return sender.type === "Bot" || sender.login.toLowerCase().endsWith("[bot]");
}

function botLogin(appSlug: string): string {
  return `${appSlug}[bot]`;
}

export function parseTrigger(input: TriggerInput, options: TriggerOptions): ParseResult {
  if (!HANDLED_ACTIONS[input.event].split("|").includes(input.action)) {
    return { ignored: `action ${input.action}` };
  }
  if (isBot(input.sender)) return { ignored: "sender is a bot" };
  const trigger = findTrigger(input, options);
  if (!trigger) return { ignored: "no trigger" };
  if (!CONTROL_VERBS.has(trigger.verb)) {
    if (input.item.locked) return { ignored: "item is locked" };
    if (input.item.state !== "open") return { ignored: "item is closed" };
  }
  return { trigger };
}

function findTrigger(input: TriggerInput, options: TriggerOptions): Trigger | null {
  const bot = botLogin(options.appSlug).toLowerCase();
  if (input.event === "issues" && input.action === "labeled") {
    const matches = input.label?.toLowerCase() === options.label.toLowerCase();
    return matches ? { kind: "label", verb: "fix", instruction: "" } : null;
  }
  if (input.event === "issues" && input.action === "assigned") {
    const matches = input.assignee?.toLowerCase() === bot;
    return matches ? { kind: "assigned", verb: "fix", instruction: "" } : null;
  }
  const text = sanitize(input.text ?? "");
  const found = parseText(text, options);
  if (found) return found;
  // A review of vmpilot's own pull request asks it to address the review without a mention.
  if (
    input.event === "pull_request_review" &&
    input.item.authorLogin?.toLowerCase() === bot &&
    (input.reviewState === "changes_requested" || input.reviewState === "commented")
  ) {
    return { kind: "review", verb: "fix", instruction: text };
  }
  return null;
}

/**
 * Finds `/command [verb] [text]` at the start of a line, else the first `@slug` mention.
 * Fenced and indented code, inline code, HTML <pre>/<code> and block quotes are not read: quoting
 * or showing a trigger must not re-run it. The text is expected to be sanitized already.
 */
export function parseText(text: string, options: Omit<TriggerOptions, "label">): Trigger | null {
  const lines = hideHtmlCode(text).split("\n");
  const command = `/${options.command.toLowerCase()}`;
  let inFence = false;
  let mention: { line: number; end: number; start: number } | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const trimmed = line.replace(/^ {0,3}/, "");
    if (/^(?:```|~~~)/.test(trimmed)) {
      inFence = !inFence;
      continue;
    }
    if (inFence || trimmed.startsWith(">") || /^(?: {4}|\t)/.test(line)) continue;
    if (trimmed.slice(0, command.length).toLowerCase() === command) {
      const after = trimmed.slice(command.length);
      if (after === "" || /^\s/.test(after)) {
        return commandTrigger(after, lines.slice(i + 1));
      }
    }
    if (!mention) {
      const at = findMention(line, options.appSlug);
      if (at) mention = { line: i, ...at };
    }
  }
  if (!mention) return null;
  return mentionTrigger(lines, mention);
}

const HTML_CODE = /<(pre|code)(?=[\s>])/gi;

/**
 * The text with the contents of <pre> and <code> elements blanked out, line breaks kept. An
 * unclosed element hides the rest of the text, as it would when rendered. Linear: each search
 * starts where the previous one ended.
 */
function hideHtmlCode(text: string): string {
  if (!text.includes("<")) return text;
  const lower = text.toLowerCase();
  let out = "";
  let from = 0;
  HTML_CODE.lastIndex = 0;
  for (let open = HTML_CODE.exec(text); open; open = HTML_CODE.exec(text)) {
    const close = `</${(open[1] ?? "").toLowerCase()}>`;
    const closeAt = lower.indexOf(close, HTML_CODE.lastIndex);
    const end = closeAt === -1 ? text.length : closeAt + close.length;
    out += text.slice(from, open.index) + text.slice(open.index, end).replace(/[^\n]/g, " ");
    from = end;
    HTML_CODE.lastIndex = end;
  }
  return out + text.slice(from);
}

function commandTrigger(rest: string, following: string[]): Trigger {
  const lineRest = rest.trim();
  const tail = following.join("\n").trim();
  const word = /^([A-Za-z][\w-]*)[:,.!]?(?=\s|$)/.exec(lineRest);
  if (word) {
    const name = (word[1] ?? "").toLowerCase();
    if (VERB_SET.has(name)) {
      return {
        kind: "command",
        verb: name as Verb,
        instruction: joinText(lineRest.slice(word[0].length), tail),
      };
    }
    // A single word that is not a verb reads as a mistyped command, not as an instruction.
    if (word[0].length === lineRest.length) {
      return { kind: "command", verb: "help", instruction: tail, unknownVerb: name };
    }
  }
  return { kind: "command", verb: "fix", instruction: joinText(lineRest, tail) };
}

function mentionTrigger(lines: string[], at: { line: number; start: number; end: number }) {
  const line = lines[at.line] ?? "";
  // "@bot, plan it" and "@bot: plan it" read as "plan it".
  const after = joinText(
    line.slice(at.end).replace(/^[\s,:;]+/, ""),
    lines.slice(at.line + 1).join("\n"),
  );
  // "Could you look at this, @bot?" carries its instruction before the mention.
  const instruction = /[\p{L}\p{N}]/u.test(after)
    ? after
    : [...lines.slice(0, at.line), line.slice(0, at.start)].join("\n").trim();
  const word = /^([A-Za-z]+)[:,.!]?(?=\s|$)/.exec(instruction);
  const name = word?.[1]?.toLowerCase() ?? "";
  if (word && VERB_SET.has(name)) {
    return {
      kind: "mention" as const,
      verb: name as Verb,
      instruction: instruction.slice(word[0].length).trim(),
    };
  }
  return { kind: "mention" as const, verb: "fix" as const, instruction };
}

const MENTION_CACHE = new Map<string, RegExp>();

function mentionPattern(appSlug: string): RegExp {
  let pattern = MENTION_CACHE.get(appSlug);
  if (!pattern) {
    const escaped = appSlug.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    // Whole word: not inside an email or a longer name, optional "[bot]" suffix.
    pattern = new RegExp(`(?<![\\w.@/-])@${escaped}(?:\\[bot\\])?(?![\\w-])`, "gi");
    MENTION_CACHE.set(appSlug, pattern);
  }
  pattern.lastIndex = 0;
  return pattern;
}

/** Index range of the first `@slug` mention in a line outside inline code, or null. */
export function findMention(line: string, appSlug: string): { start: number; end: number } | null {
  if (!line.includes("@")) return null;
  // Blank out inline code spans, keeping offsets, so mentions inside them are not seen.
  const visible = line.includes("`") ? line.replace(/`[^`]*`/g, (m) => " ".repeat(m.length)) : line;
  const match = mentionPattern(appSlug).exec(visible);
  return match ? { start: match.index, end: match.index + match[0].length } : null;
}

function joinText(head: string, tail: string): string {
  const a = head.trim();
  const b = tail.trim();
  return a && b ? `${a}\n${b}` : a || b;
}
