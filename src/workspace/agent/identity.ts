// Who the agent's commands run as. Sharing the agent's uid, a command could stop or replace the
// agent, and read its memory and environment, where the workspace's secret is. So the agent runs
// as root holding only CAP_SETUID, CAP_SETGID and CAP_KILL, under no_new_privs; its launcher
// (started while it is still root) starts every command as the command user, which leaves a
// command no capability and no way back; and the agent itself then takes the command user as its
// effective uid, so the files it reads and writes are the commands' own and nothing more. Its real
// uid stays root: a process of the command user cannot signal it, trace it or read its /proc.
import type { Owner } from "../sandbox/owner.ts";

/** What the agent's commands run as: VMPILOT_AGENT_COMMAND_USER, `uid:gid`. */
export function parseCommandUser(text: string): Owner | undefined {
  const match = /^(\d{1,9}):(\d{1,9})$/.exec(text);
  if (!match) return undefined;
  const [uid, gid] = [Number(match[1]), Number(match[2])];
  return uid === 0 || gid === 0 ? undefined : { uid, gid };
}

/** Capability numbers (linux/capability.h). */
const NEEDED = { CAP_KILL: 5, CAP_SETGID: 6, CAP_SETUID: 7 };

/**
 * Why this process cannot start commands as another user, or undefined when it can. `status`:
 * /proc/self/status.
 */
export function commandUserProblem(uid: number, status: string): string | undefined {
  if (uid !== 0) return `the agent runs as uid ${uid}, not root`;
  const held = BigInt(`0x${/^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1] ?? "0"}`);
  const missing = Object.entries(NEEDED)
    .filter(([, bit]) => ((held >> BigInt(bit)) & 1n) === 0n)
    .map(([name]) => name);
  if (missing.length > 0) return `the agent lacks ${missing.join(", ")}`;
  if (!/^NoNewPrivs:\s*1$/m.test(status)) {
    return "no_new_privs is not set, so a setuid program would give commands root back";
  }
  return undefined;
}

/** The agent's own effective identity becomes the command user's; its real uid stays root. */
export function becomeCommandUser(user: Owner): void {
  // In this order: each step but the last needs root's effective uid.
  process.setgroups?.([user.gid]);
  process.setegid?.(user.gid);
  process.seteuid?.(user.uid);
}
