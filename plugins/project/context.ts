import type { ContextHook } from "../../src/agent/plugin-api.ts";

/** The files maintainers write for coding agents, in the order they are shown. */
export const INSTRUCTION_FILES = ["AGENTS.md", "CLAUDE.md", ".github/vmpilot.md"];

export const context: ContextHook = async (readTextFile) => {
  const found: string[] = [];
  for (const path of INSTRUCTION_FILES) {
    const text = (await readTextFile(path))?.trim();
    if (text) found.push(`## ${path}\n\n${text}`);
  }
  if (found.length === 0) return undefined;
  return `# Repository instructions\n\n${found.join("\n\n")}`;
};
