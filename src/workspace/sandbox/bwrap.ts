import { lstat, readlink, realpath } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve } from "node:path";
import { PermanentError } from "../../errors.ts";
import { type LaunchError, launchAndCollect } from "../process/launcher.ts";
import { UNPRIVILEGED_OWNER } from "./owner.ts";

/** The sandbox cannot be used; the message names the fix and fits on one line. */
export class SandboxUnavailableError extends PermanentError {
  override name = "SandboxUnavailableError";
}

/** Where things live inside every sandbox. */
export const SANDBOX_HOME = "/home/sandbox";
export const SANDBOX_PROXY_SOCKET = "/run/vmpilot/proxy.sock";
/** The workspace agent's own directory (its socket and key): hidden from its commands. */
export const AGENT_DIR = "/run/vmpilot/agent";

/** Commands run as this uid and gid inside the sandbox's user namespace, never as root. */
export const SANDBOX_ID = 1000;

/** The sandbox's own account files: the host's users and groups are none of its business. */
export const SANDBOX_PASSWD = [
  "root:x:0:0:root:/root:/usr/sbin/nologin",
  `sandbox:x:${SANDBOX_ID}:${SANDBOX_ID}:sandbox:${SANDBOX_HOME}:/bin/bash`,
  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
  "",
].join("\n");
export const SANDBOX_GROUP = ["root:x:0:", `sandbox:x:${SANDBOX_ID}:`, "nogroup:x:65534:", ""].join(
  "\n",
);

/** Top-level host directories that hold programs and libraries, exposed read-only. */
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/** Files under /etc that hold secrets of the machine; masked inside the sandbox. */
const ETC_SECRETS = [
  "/etc/shadow",
  "/etc/shadow-",
  "/etc/gshadow",
  "/etc/gshadow-",
  "/etc/sudoers",
  "/etc/sudoers.d",
  "/etc/ssh",
  "/etc/ssl/private",
  "/etc/security/opasswd",
];

export interface SandboxLayout {
  /** The checkout: the only host directory the sandbox may write, mounted at the same path. */
  root: string;
  /** Private, per-workspace /tmp and HOME that persist between commands. */
  tmpDir: string;
  homeDir: string;
  /** Read-only extras: the Node install, the mirror objects a shared clone borrows. */
  readOnly: readonly string[];
  /** Paths hidden under an empty tmpfs even when inside a bound path (the data dir). */
  hidden: readonly string[];
  proxySocket?: string;
  /** Holds `passwd` and `group`, bound over the host's. */
  accounts: string;
  /** The worker is root: bwrap mounts as root, then commands drop to UNPRIVILEGED_OWNER. */
  asRoot: boolean;
  /**
   * The workspace agent runs here, and starts each command in a sandbox of its own inside this one
   * (commandSandbox): set to the host directory bound at AGENT_DIR for it. The workspace agent may
   * make the user namespace its commands need, and their /proc: so its own /proc is one that shows
   * all (as root: made by the unprivileged bwrap of dropPrivileges), and kernel knobs are made
   * read-only by the command's sandbox.
   */
  agentDir?: string;
}

function isWithin(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

async function kind(path: string): Promise<"dir" | "file" | "link" | undefined> {
  const stat = await lstat(path).catch(() => undefined);
  if (!stat) return undefined;
  if (stat.isSymbolicLink()) return "link";
  return stat.isDirectory() ? "dir" : "file";
}

/**
 * The bwrap arguments shared by every command of one workspace, computed once. Order matters:
 * later mounts cover earlier ones.
 */
export async function sandboxArgs(layout: SandboxLayout): Promise<string[]> {
  const args: string[] = [];
  const bound: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    const type = await kind(dir);
    if (type === "link") args.push("--symlink", await readlink(dir), dir);
    else if (type === "dir") {
      args.push("--ro-bind", dir, dir);
      bound.push(dir);
    }
  }
  args.push("--ro-bind", "/etc", "/etc");
  bound.push("/etc");
  args.push("--ro-bind", `${layout.accounts}/passwd`, "/etc/passwd");
  args.push("--ro-bind", `${layout.accounts}/group`, "/etc/group");
  for (const secret of ETC_SECRETS) {
    const type = await kind(secret);
    if (type === "dir") args.push("--tmpfs", secret);
    else if (type === "file") args.push("--ro-bind", "/dev/null", secret);
  }
  // As root under the workspace agent, the unprivileged bwrap of dropPrivileges mounts the /proc
  // the workspace agent sees: this bwrap's would hide parts of itself, and a user namespace made
  // below could then mount no /proc of its own. Until then, the host's serves (this bwrap runs no
  // command).
  const rootAgent = layout.asRoot && layout.agentDir !== undefined;
  args.push(
    // A fresh /proc for the new PID namespace.
    ...(rootAgent ? ["--dev-bind", "/proc", "/proc"] : ["--proc", "/proc"]),
    // As root, and under the workspace agent, the inner bwrap makes these read-only: it must first
    // disable user namespaces there.
    ...(layout.asRoot || layout.agentDir ? [] : READ_ONLY_KNOBS),
    "--dev",
    "/dev",
    "--bind",
    layout.tmpDir,
    "/tmp",
    ...mountPoint(SANDBOX_HOME, layout.asRoot),
    "--bind",
    layout.homeDir,
    SANDBOX_HOME,
  );
  // After /tmp: these (and the root) may live under the host's /tmp, which the private one covers.
  for (const path of layout.readOnly) {
    const real = await realpath(path);
    // Where it was named too, when a symlink led there (a symlinked node_modules: a git worktree,
    // pnpm): Node looks for the workspace agent's zod under the project's node_modules.
    for (const at of new Set([real, resolve(path)])) {
      if (bound.some((b) => isWithin(b, at))) continue;
      args.push(...mountPoint(at, layout.asRoot), "--ro-bind", real, at);
      bound.push(at);
    }
  }
  args.push(...mountPoint(layout.root, layout.asRoot), "--bind", layout.root, layout.root);
  bound.push(layout.root);
  if (layout.proxySocket) {
    args.push(...mountPoint(SANDBOX_PROXY_SOCKET, layout.asRoot));
    args.push("--ro-bind", layout.proxySocket, SANDBOX_PROXY_SOCKET);
  }
  if (layout.agentDir) {
    args.push(...mountPoint(AGENT_DIR, layout.asRoot), "--bind", layout.agentDir, AGENT_DIR);
  }
  for (const path of layout.hidden) {
    if (bound.some((b) => isWithin(b, path))) args.push("--tmpfs", path);
  }
  args.push(
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--hostname",
    "sandbox",
    "--die-with-parent",
    "--new-session",
    // As root, bwrap would otherwise keep every capability inside.
    "--cap-drop",
    "ALL",
    ...(layout.asRoot
      ? ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
      : ["--unshare-user", ...(layout.agentDir ? IDENTITY : USER_NAMESPACE)]),
    "--clearenv",
  );
  return args;
}

/** Kernel knobs stay read-only, even for the user namespace's root during setup. */
const READ_ONLY_KNOBS = [
  "--ro-bind-try",
  "/proc/sys",
  "/proc/sys",
  "--ro-bind-try",
  "/proc/sysrq-trigger",
  "/proc/sysrq-trigger",
];

const IDENTITY = ["--uid", String(SANDBOX_ID), "--gid", String(SANDBOX_ID)];

/** A fixed identity, and no nested user namespaces (kernel attack surface, and a way to root). */
const USER_NAMESPACE = [...IDENTITY, "--disable-userns", "--assert-userns-disabled"];

/**
 * What runs between bwrap and the command. As root, bwrap made its mounts with root's access (the
 * checkout may sit under a 0700 directory); the command then drops to an unprivileged host uid
 * without a way back, and a second bwrap gives it the same user namespace as a non-root worker:
 * for the workspace agent (`agent`), with the PID namespace and the /proc the first one left out.
 */
export function dropPrivileges(asRoot: boolean, agent = false): string[] {
  if (!asRoot) return [];
  return [
    "setpriv",
    `--reuid=${UNPRIVILEGED_OWNER.uid}`,
    `--regid=${UNPRIVILEGED_OWNER.gid}`,
    "--clear-groups",
    "--inh-caps=-all",
    "--no-new-privs",
    "bwrap",
    // The outer bwrap's view, devices included (a plain bind would make /dev/null unusable).
    "--dev-bind",
    "/",
    "/",
    ...(agent
      ? ["--unshare-pid", "--proc", "/proc", "--die-with-parent", "--unshare-user", ...IDENTITY]
      : [...READ_ONLY_KNOBS, "--unshare-user", ...USER_NAMESPACE]),
  ];
}

/**
 * What the workspace agent starts each command under, inside its own sandbox: the sandbox's
 * identity in a user namespace of the command's own that can make no other, a PID namespace and
 * /proc of its own, an IPC namespace of its own (SysV shared memory and semaphores go with the
 * command), the kernel knobs read-only and the workspace agent's directory hidden. So a
 * command can neither signal, trace nor see the workspace agent (a process of an outer user and PID
 * namespace), nor reach its socket, and whatever it leaves running dies with it, as in a sandbox
 * per command.
 */
export function commandSandbox(bwrapPath = "bwrap"): string[] {
  return [
    bwrapPath,
    "--dev-bind",
    "/",
    "/",
    "--proc",
    "/proc",
    ...READ_ONLY_KNOBS,
    "--tmpfs",
    AGENT_DIR,
    "--unshare-user",
    ...USER_NAMESPACE,
    "--unshare-pid",
    "--unshare-ipc",
    "--die-with-parent",
    "--new-session",
    "--",
  ];
}

/**
 * The directories above a mount point, made world-searchable: bwrap as root would otherwise create
 * them with root-only permissions, and the unprivileged command could not reach what is mounted.
 */
function mountPoint(path: string, asRoot: boolean): string[] {
  if (!asRoot) return [];
  const args: string[] = [];
  let dir = dirname(path);
  const dirs: string[] = [];
  while (dir !== "/" && !SYSTEM_DIRS.some((system) => isWithin(system, dir))) {
    dirs.unshift(dir);
    dir = dirname(dir);
  }
  for (const each of dirs) args.push("--perms", "0755", "--dir", each);
  return args;
}

const probes = new Map<string, Promise<void>>();

/**
 * Starts one sandbox with `true` the first time a bwrap binary is used for a kind of sandbox (per
 * command, or the workspace agent's with a command's inside), and remembers the outcome, so a
 * missing or unusable bwrap is reported once, clearly, and never per command.
 */
export function probeBwrap(
  bwrapPath: string,
  args: readonly string[],
  kind: "sandbox" | "agent" = "sandbox",
): Promise<void> {
  const key = `${kind} ${bwrapPath}`;
  let probe = probes.get(key);
  if (!probe) {
    probe = runProbe(bwrapPath, args);
    probes.set(key, probe);
    probe.catch(() => probes.delete(key));
  }
  return probe;
}

async function runProbe(bwrapPath: string, args: readonly string[]): Promise<void> {
  const result = await launchAndCollect({
    file: bwrapPath,
    args: [...args, "true"],
    cwd: "/",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    group: false,
  }).catch((error: LaunchError) => {
    const why = error.code === "ENOENT" ? `${bwrapPath} not found` : error.message;
    throw new SandboxUnavailableError(
      `bubblewrap is required for the sandbox (${why}); install it with: apt-get install bubblewrap`,
    );
  });
  if (result.code === 0) return;
  throw new SandboxUnavailableError(
    `bubblewrap cannot start a sandbox here (${result.stderr.trim() || `exit code ${result.code}`}); ` +
      "install or update it (0.8 or later) with: apt-get install bubblewrap util-linux, and allow user namespaces",
  );
}
