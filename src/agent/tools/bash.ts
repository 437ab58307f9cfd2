import { DEFAULT_TIMEOUT_MS } from "../../workspace/exec.ts";
import type { ExecResult, Workspace } from "../../workspace/types.ts";
import { type AgentTool, type ToolOutcome, toolError } from "./types.ts";

export interface BashToolOptions {
  /** Per-command timeout; default 120 s. */
  timeoutMs?: number;
}

const CWD_MARK = "__VMPILOT_CWD__";
const CWD_LINE = new RegExp(`\\n${CWD_MARK}\\t([^\\t\\n]*)\\t([^\\n]*)\\n$`);

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

  return {
    name: "bash",
    definition: { type: "bash_20250124", name: "bash" },
    async run(input, context) {
      const { command, restart } = (input ?? {}) as { command?: unknown; restart?: unknown };
      let prefix = "";
      if (restart === true) {
        cwd = ".";
        prefix = "Shell restarted in the workspace root.";
        if (typeof command !== "string" || command.trim() === "") {
          return { content: prefix, isError: false };
        }
      }
      if (typeof command !== "string" || command.trim() === "") {
        return toolError("Provide a non-empty `command`, or `restart: true`.");
      }
      const limit = Math.min(timeoutMs, context.remainingMs);
      const result = await workspace.exec(script(cwd, command), {
        timeoutMs: limit,
        signal: context.signal,
      });
      const moved = CWD_LINE.exec(result.fullStdout);
      if (moved) cwd = relativeCwd(moved[1] as string, moved[2] as string);
      const outcome = describe(result, limit);
      return prefix ? { ...outcome, content: `${prefix}\n${outcome.content}` } : outcome;
    },
  };
}

function script(cwd: string, command: string): string {
  const enter =
    cwd === "."
      ? ""
      : `cd -- ${shellQuote(cwd)} 2>/dev/null || echo ${shellQuote(
          `note: ${cwd} no longer exists; running in the workspace root`,
        )} >&2\n`;
  return [
    "__vmpilot_root=$PWD",
    `${enter}trap 'printf "\\n${CWD_MARK}\\t%s\\t%s\\n" "$__vmpilot_root" "$PWD"' EXIT`,
    command,
  ].join("\n");
}

function relativeCwd(root: string, pwd: string): string {
  if (pwd === root) return ".";
  if (pwd.startsWith(`${root}/`)) return pwd.slice(root.length + 1);
  return pwd;
}

function stripMark(text: string): string {
  return text.replace(CWD_LINE, "");
}

function describe(result: ExecResult, timeoutMs: number): ToolOutcome {
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
