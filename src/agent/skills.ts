// The repository's skills (config/skills.ts), found in the workspace for the system prompt: only
// each one's name, description and path go there; the model reads a skill's SKILL.md, and the
// files beside it, when a task needs it. A skill whose front matter is malformed is left out (the
// "vmpilot config" check run points at its line); a name found twice is the first one's.

import {
  MAX_SKILL_BYTES,
  parseSkill,
  SKILL_FILE,
  SKILL_ROOTS,
  type Skill,
} from "../config/skills.ts";
import { stripInvisible } from "../github/sanitize.ts";
import type { Workspace } from "../workspace/types.ts";

/** Skills shown at most: each costs every request its description. */
const MAX_SKILLS = 50;

/** Where skills are read: the workspace, or files that cannot be listed (none are found there). */
type SkillFiles = Pick<Workspace, "readFile"> & Partial<Pick<Workspace, "listDir">>;

async function entries(files: SkillFiles, dir: string): Promise<string[]> {
  return files.listDir ? files.listDir(dir).catch(() => []) : [];
}

export async function findSkills(workspace: SkillFiles): Promise<Skill[]> {
  const found: Skill[] = [];
  for (const root of SKILL_ROOTS) {
    for (const entry of await entries(workspace, root)) {
      if (!entry.endsWith("/") || found.length >= MAX_SKILLS) continue;
      const path = `${root}/${entry}${SKILL_FILE}`;
      const text = await workspace
        .readFile(path, MAX_SKILL_BYTES)
        .then((bytes) => bytes.toString("utf8"))
        .catch(() => undefined);
      const parsed = text === undefined ? undefined : parseSkill(path, text);
      if (!parsed?.ok || found.some((skill) => skill.name === parsed.skill.name)) continue;
      found.push(parsed.skill);
    }
  }
  return found;
}

/** The system prompt's section on the skills, or undefined when there are none. */
export function skillsSection(skills: readonly Skill[]): string | undefined {
  if (skills.length === 0) return undefined;
  const lines = skills.map(
    (skill) =>
      `- ${skill.name} (${skill.path}): ${stripInvisible(skill.description).replace(/\s+/g, " ")}`,
  );
  return `# Skills

The maintainers keep instructions for some tasks as skills. Only their names and descriptions are here: when your task matches one, read its SKILL.md first (the editor's view, or cat), then the files beside it that it points to.

${lines.join("\n")}`;
}
