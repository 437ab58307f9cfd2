import { randomBytes } from "node:crypto";
import { z } from "zod";
import { DEFAULT_TIMEOUT_MS } from "../../workspace/process/run.ts";
import type { ExecResult, Workspace } from "../../workspace/types.ts";
import { type AgentTool, defineTool, type ToolOutcome, toolError } from "./types.ts";

export const BashInput = z.object({
  command: z.string().optional().describe("The command to run."),
  restart: z.boolean().optional().describe("Start over in the repository root."),
});

export interface BashToolOptions {
  /** Per-command timeout; default 120 s. */
  timeoutMs?: number;
}

/**
 * The line the EXIT trap prints, under a fresh random mark per command: output the command did
 * not choose (a file it cats, a test's log) cannot forge it, since the mark did not exist yet.
 */
function cwdLine(mark: string): RegExp {
  return new RegExp(`\\n${mark}\\t([^\\t\\n]*)\\t([^\\n]*)\\n$`);
}

function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * Each command is a fresh `bash -c` in the workspace, so a real persistent shell is emulated only
 * where it matters most: the working directory carries over between calls (an EXIT trap reports
 * where the command ended up). Variables and functions do not persist; the system prompt says so.
 * `restart` drops the remembered directory.
 */
export function bashTool(workspace: Workspace, options: BashToolOptions = {}): AgentTool {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // Relative to the root ("." is the root), or absolute when a command cd'ed outside it.
  let cwd = ".";

  return defineTool({
    name: "bash",
    definition: { type: "bash_20250124", name: "bash" },
    input: BashInput,
    async execute({ command, restart }, context) {
      let prefix = "";
      if (restart) {
        cwd = ".";
        prefix = "Shell restarted in the workspace root.";
        if (command === undefined || command.trim() === "") {
          return { content: prefix, isError: false };
        }
      }
      if (command === undefined || command.trim() === "") {
        return toolError("Provide a non-empty `command`, or `restart: true`.");
      }
      if (command.includes("\0")) {
        return toolError("The command contains a NUL byte, which a command line cannot carry.");
      }
      const limit = Math.min(timeoutMs, context.remainingMs);
      const mark = `__VMPILOT_CWD_${randomBytes(16).toString("hex")}__`;
      const result = await workspace.exec(script(cwd, command, mark), {
        timeoutMs: limit,
        signal: context.signal,
      });
      const line = cwdLine(mark);
      const moved = line.exec(result.fullStdout);
      if (moved) cwd = relativeCwd(moved[1] as string, moved[2] as string) ?? cwd;
      const outcome = {
        ...describe(result, limit, line),
        exec: { command, exitCode: result.exitCode },
      };
      return prefix ? { ...outcome, content: `${prefix}\n${outcome.content}` } : outcome;
    },
  });
}

function script(cwd: string, command: string, mark: string): string {
  const enter =
    cwd === "."
      ? ""
      : `cd -- ${shellQuote(cwd)} 2>/dev/null || echo ${shellQuote(
          `note: ${cwd} no longer exists; running in the workspace root`,
        )} >&2\n`;
  return [
    "readonly __vmpilot_root=$PWD",
    `${enter}trap 'printf "\\n${mark}\\t%s\\t%s\\n" "$__vmpilot_root" "$PWD"' EXIT`,
    command,
  ].join("\n");
}

/**
 * Where the next command starts, relative to the root; undefined (keep the current one) for a
 * directory outside the checkout or a report the command could still have tampered with.
 */
function relativeCwd(root: string, pwd: string): string | undefined {
  if (pwd === root) return ".";
  if (!root.startsWith("/") || !pwd.startsWith(`${root}/`)) return undefined;
  const inside = pwd.slice(root.length + 1);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\x00-\x1f]/.test(inside)) return undefined;
  if (inside.split("/").some((part) => part === ".." || part === "." || part === "")) {
    return undefined;
  }
  return inside;
}

function describe(result: ExecResult, timeoutMs: number, line: RegExp): ToolOutcome {
  const stripMark = (text: string) => text.replace(line, "");
  const stdout = stripMark(result.stdout);
  const parts: string[] = [];
  if (stdout) parts.push(stdout.trimEnd());
  if (result.stderr)
    parts.push(stdout ? `stderr:\n${result.stderr.trimEnd()}` : result.stderr.trimEnd());
  if (result.timedOut) {
    const after = timeoutMs < 1000 ? `${timeoutMs} ms` : `${Math.round(timeoutMs / 1000)} s`;
    parts.push(`Command timed out after ${after}; its processes were killed.`);
  } else if (result.exitCode !== 0) {
    parts.push(result.exitCode === null ? "Command was killed." : `Exit code: ${result.exitCode}`);
  }
  const content = parts.length > 0 ? parts.join("\n") : "(no output)";
  const log = result.truncated
    ? [stripMark(result.fullStdout), result.fullStderr].filter(Boolean).join("\n")
    : undefined;
  return { content, isError: result.timedOut || result.exitCode !== 0, log };
}
