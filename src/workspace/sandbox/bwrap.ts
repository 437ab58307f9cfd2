import { lstat, readlink, realpath } from "node:fs/promises";
import { dirname, isAbsolute, relative } from "node:path";
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

/** Commands run as this uid and gid inside the sandbox's user namespace, never as root. */
const SANDBOX_ID = 1000;

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
   * As root, commands stay root with CAP_SETUID, CAP_SETGID and CAP_KILL only and no user
   * namespace: the workspace agent, which starts its own commands as UNPRIVILEGED_OWNER.
   */
  supervisor?: boolean;
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
  args.push(
    // A fresh /proc for the new PID namespace.
    "--proc",
    "/proc",
    // As root, the inner bwrap makes these read-only: it must first disable user namespaces there.
    ...(layout.asRoot ? [] : READ_ONLY_KNOBS),
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
    if (bound.some((b) => isWithin(b, real))) continue;
    args.push(...mountPoint(real, layout.asRoot), "--ro-bind", real, real);
    bound.push(real);
  }
  args.push(...mountPoint(layout.root, layout.asRoot), "--bind", layout.root, layout.root);
  bound.push(layout.root);
  if (layout.proxySocket) {
    args.push(...mountPoint(SANDBOX_PROXY_SOCKET, layout.asRoot));
    args.push("--ro-bind", layout.proxySocket, SANDBOX_PROXY_SOCKET);
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
      : ["--unshare-user", ...USER_NAMESPACE]),
    ...(layout.asRoot && layout.supervisor ? ["--cap-add", "CAP_KILL"] : []),
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

/** A fixed identity, and no nested user namespaces (kernel attack surface, and a way to root). */
const USER_NAMESPACE = [
  "--uid",
  String(SANDBOX_ID),
  "--gid",
  String(SANDBOX_ID),
  "--disable-userns",
  "--assert-userns-disabled",
];

/**
 * What runs between bwrap and the command. As root, bwrap made its mounts with root's access (the
 * checkout may sit under a 0700 directory); the command then drops to an unprivileged host uid
 * without a way back, and a second bwrap gives it the same user namespace as a non-root worker.
 */
export function dropPrivileges(asRoot: boolean): string[] {
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
    ...READ_ONLY_KNOBS,
    "--unshare-user",
    ...USER_NAMESPACE,
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
 * Starts one sandbox with `true` the first time a bwrap binary is used, and remembers the
 * outcome, so a missing or unusable bwrap is reported once, clearly, and never per command.
 */
export function probeBwrap(bwrapPath: string, args: readonly string[]): Promise<void> {
  let probe = probes.get(bwrapPath);
  if (!probe) {
    probe = runProbe(bwrapPath, args);
    probes.set(bwrapPath, probe);
    probe.catch(() => probes.delete(bwrapPath));
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
