// Skills: folders of instructions a repository keeps for its agents, `<root>/<name>/SKILL.md`
// under `.github/vmpilot/skills` (vmpilot's) or `.claude/skills` (which many repositories have
// already). A SKILL.md opens with YAML front matter naming the skill and saying when it applies;
// the model is shown only that, and reads the rest when a task needs it. A malformed front matter
// is refused with its line, as a bad vmpilot.yml is.
import { LineCounter, parseDocument } from "yaml";
import { z } from "zod";
import type { ConfigIssue } from "./repo-config.ts";
import { lineOf } from "./yaml-lines.ts";

/** Where skills live, in the order a name is looked for. */
export const SKILL_ROOTS = [".github/vmpilot/skills", ".claude/skills"] as const;
/** A skill's own file, in its folder. */
export const SKILL_FILE = "SKILL.md";
/** A SKILL.md larger than this is left out unread. */
export const MAX_SKILL_BYTES = 256 * 1024;

// Other keys (Claude's license, allowed-tools, metadata) are allowed and not read.
const frontMatter = z.object({
  name: z
    .string()
    .max(64, "must be at most 64 characters")
    .regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/, "must be lowercase letters, digits and single hyphens"),
  description: z
    .string()
    .trim()
    .min(1, "must not be empty")
    .max(1024, "must be at most 1024 characters"),
});

export interface Skill {
  name: string;
  description: string;
  /** Its SKILL.md, relative to the checkout. */
  path: string;
}

export type SkillResult = { ok: true; skill: Skill } | { ok: false; issues: ConfigIssue[] };

/** Whether a repository path is a skill's SKILL.md. */
export function isSkillFile(path: string): boolean {
  return SKILL_ROOTS.some((root) => {
    const [name, file, ...rest] = path.startsWith(`${root}/`)
      ? path.slice(root.length + 1).split("/")
      : [];
    return name !== undefined && file === SKILL_FILE && rest.length === 0;
  });
}

/** The front matter of the SKILL.md at `path`, checked; issues carry their line in the file. */
export function parseSkill(path: string, text: string): SkillResult {
  const fail = (message: string, line = 1, key = ""): SkillResult => ({
    ok: false,
    issues: [{ path: key, message, line }],
  });
  const opening = /^---[ \t]*\r?\n/.exec(text);
  if (!opening) return fail("must start with front matter: a line ---, name: and description:");
  const rest = text.slice(opening[0].length);
  const closing = /^---[ \t]*$/m.exec(rest);
  if (!closing) return fail("its front matter has no closing --- line");
  const yaml = rest.slice(0, closing.index);
  // The front matter's first line is the file's second.
  const lines = new LineCounter();
  const doc = parseDocument(yaml, { uniqueKeys: true, lineCounter: lines });
  const error = doc.errors[0];
  if (error) {
    const line = (error.linePos?.[0].line ?? 0) + 1;
    return fail(`invalid YAML: ${error.message.split("\n")[0]?.replace(/:$/, "")}`, line);
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 10 });
  } catch {
    return fail("invalid YAML: aliases expand too much", 2);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return fail("its front matter must be a mapping with name: and description:", 2);
  }
  const parsed = frontMatter.safeParse(value);
  if (!parsed.success) {
    return {
      ok: false,
      issues: parsed.error.issues.map((issue) => ({
        path: issue.path.map(String).join("."),
        message: issue.message.replace(/^Invalid input: /, ""),
        line: lineOf(doc, lines, issue.path) + 1,
      })),
    };
  }
  return {
    ok: true,
    skill: { name: parsed.data.name, description: parsed.data.description, path },
  };
}
