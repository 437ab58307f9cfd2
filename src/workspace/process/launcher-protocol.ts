/** A process to start: no shell lookup beyond env.PATH, no inherited environment. */
export interface LaunchSpec {
  file: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  /**
   * Own process group: a kill reaches its background children too, and they are killed when the
   * leader exits.
   */
  group: boolean;
  /** Written to stdin, which is then closed; without it stdin is /dev/null. */
  input?: string;
  /** Stdin stays open until the input arrives later (`Launched.write`): a process started ahead. */
  inputLater?: boolean;
  /**
   * Stdin stays open for as long as the process runs, and every write goes through: a process
   * talked to over its stdin and stdout (an MCP server).
   */
  stream?: boolean;
  /**
   * Starts the process as this user, with no supplementary groups: the workspace agent's commands
   * (agent/identity.ts). The launcher then needs CAP_SETUID and CAP_SETGID, and CAP_KILL to stop it.
   */
  user?: { uid: number; gid: number };
}

export type LauncherRequest =
  | { type: "launch"; id: number; spec: LaunchSpec }
  | { type: "kill"; id: number; signal: NodeJS.Signals }
  | { type: "input"; id: number; input: string };

export type LauncherReply =
  | { type: "output"; id: number; stream: 1 | 2; chunk: Uint8Array }
  | { type: "ended"; id: number }
  | { type: "exited"; id: number; code: number | null; signal: NodeJS.Signals | null }
  | { type: "failed"; id: number; code?: string; message: string };

const hasNul = (value: unknown): boolean => typeof value !== "string" || value.includes("\0");

/** Node's spawn takes 32-bit signed ids. */
const isId = (value: unknown): boolean =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 && value < 2 ** 31;

function isUser(user: unknown): boolean {
  if (typeof user !== "object" || user === null) return false;
  const { uid, gid } = user as Record<string, unknown>;
  return isId(uid) && isId(gid);
}

/**
 * Why a launch request cannot be started, or undefined when it can. Node's spawn throws on these
 * (a NUL byte cannot cross exec), so both sides check: the worker to give its caller a clear
 * error, the launcher so that no request can take it down. Only built-ins: the launcher uses it.
 */
export function specProblem(spec: unknown): string | undefined {
  if (typeof spec !== "object" || spec === null) return "the launch spec is not an object";
  const { file, args, cwd, env, group, input, inputLater, stream, user } = spec as Record<
    string,
    unknown
  >;
  if (hasNul(file) || file === "") return "the program is not a string without NUL bytes";
  if (!Array.isArray(args) || args.some(hasNul)) {
    return "an argument is not a string without NUL bytes";
  }
  if (hasNul(cwd)) return "the working directory is not a string without NUL bytes";
  if (typeof env !== "object" || env === null || Array.isArray(env)) {
    return "the environment is not an object";
  }
  for (const [name, value] of Object.entries(env)) {
    if (name === "" || name.includes("=") || hasNul(name) || hasNul(value)) {
      return "an environment variable is not a name and string value without NUL bytes";
    }
  }
  if (typeof group !== "boolean") return "group is not a boolean";
  if (input !== undefined && typeof input !== "string") return "the input is not a string";
  if (inputLater !== undefined && (typeof inputLater !== "boolean" || input !== undefined)) {
    return "inputLater is not a boolean, or comes with an input";
  }
  if (stream !== undefined && (typeof stream !== "boolean" || input !== undefined || inputLater)) {
    return "stream is not a boolean, or comes with an input";
  }
  if (user !== undefined && !isUser(user)) return "the user is not a uid and a gid";
  return undefined;
}
