import { access, mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fallbackLogger, type Logger } from "../../log/logger.ts";
import { fileOps } from "../files.ts";
import { resolveInside } from "../paths.ts";
import { baseEnv, NODE_BIN_DIR, proxyEnv, withExtraEnv } from "../process/env.ts";
import { launch } from "../process/launcher.ts";
import { programPath } from "../process/program.ts";
import { runProcess } from "../process/run.ts";
import { spawnedProcess } from "../process/spawned.ts";
import { type SocketPath, socketPathIn } from "../socket-path.ts";
import type {
  BlockedConnection,
  ExecResult,
  SpawnOptions,
  Workspace,
  WorkspaceProcess,
} from "../types.ts";
import {
  commandSandbox,
  dropPrivileges,
  probeBwrap,
  SANDBOX_GROUP,
  SANDBOX_HOME,
  SANDBOX_PASSWD,
  SANDBOX_PROXY_SOCKET,
  SandboxUnavailableError,
  sandboxArgs,
} from "./bwrap.ts";
import { createJobCgroup, inCgroup, type JobCgroup } from "./cgroup.ts";
import { diskMeter } from "./disk-meter.ts";
import { type LimitGuard, limitGuard, spawnGuarded } from "./limit-guard.ts";
import { DEFAULT_LIMITS, kernelSupport, type SandboxLimits, ulimitPrefix } from "./limits.ts";
import { handOver, UNPRIVILEGED_OWNER } from "./owner.ts";
import { type AllowListProxy, startAllowListProxy } from "./proxy.ts";
import { mountScratchDisk, type ScratchDisk } from "./scratch-disk.ts";

export interface SandboxWorkspaceOptions {
  logger?: Logger;
  /** Hosts reachable through the proxy (`host`, `host:port`, `*.domain`). Default: none, and
   * then the sandbox has no network at all (no proxy runs, so nothing is recorded). */
  allowHosts?: readonly string[];
  /** Loopback/private ranges the proxy may reach anyway (NETWORK_ALLOW_PRIVATE); default none. */
  allowPrivate?: readonly string[];
  /** The app's data directory: never visible inside, even if a bound path contains it. */
  dataDir?: string;
  /** The mirror a shared checkout borrows objects from (`Checkout.mirror`); bound read-only. */
  mirror?: string;
  /** More host paths to hide (config files, key directories). */
  hidePaths?: readonly string[];
  /** More host paths to expose read-only (toolchains outside /usr). */
  readOnlyPaths?: readonly string[];
  /** Processes, memory, file size and disk; default DEFAULT_LIMITS. */
  limits?: SandboxLimits;
  /**
   * Where the private /tmp and HOME live; default a fresh directory under the OS temp dir. As
   * root, a filesystem of the disk limit's size is mounted over it for the workspace's lifetime.
   */
  stateDir?: string;
  /**
   * The job's disk (prepareCheckout's diskMb), mounted by the caller with the checkout and
   * `stateDir` on it:
   * then no other is mounted, and the kernel holds the checkout to the disk limit too.
   */
  disk?: ScratchDisk;
  bwrapPath?: string;
  socatPath?: string;
}

/** One run of `bash -c` in the sandbox, as the job's processes run: in its cgroup. */
interface SandboxRun {
  env?: Record<string, string>;
  /** Absolute, inside the checkout; default the checkout. */
  cwd?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * A job's sandbox: its layout, cgroup, scratch disk and proxy, made once. Each command may run in
 * a sandbox of its own (createSandboxWorkspace), or the workspace agent runs in it for the whole
 * job and starts the commands (agent/local.ts).
 */
export interface Sandbox {
  readonly root: string;
  readonly limits: SandboxLimits;
  /**
   * The host directory the workspace agent has for its socket and key (with `agent`), else
   * undefined.
   */
  readonly agentDir: string | undefined;
  /** Runs `command` under bash in the sandbox; its rlimits are the command's own business. */
  run(command: string, options?: SandboxRun): Promise<ExecResult>;
  /** Starts `command` like run, its stdin kept open (Workspace.spawn). */
  start(command: string, options: SpawnOptions): Promise<WorkspaceProcess>;
  /** Runs one of the job's commands under the disk limit and explains the limits it hit. */
  guarded: LimitGuard;
  blockedConnections(): readonly BlockedConnection[];
  dispose(): Promise<void>;
}

/** Inside the sandbox, the proxy's unix socket is reached at this loopback port. */
const PROXY_PORT = 3128;

/**
 * Starts socat to bridge the sandbox's loopback to the proxy socket, waits until it accepts a
 * connection, then runs the command. Polling with bash's /dev/tcp costs no fork per attempt;
 * reading /proc/net/tcp instead costs milliseconds per read.
 */
function bridgeScript(socatPath: string): string {
  return [
    `${socatPath} TCP-LISTEN:${PROXY_PORT},bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:${SANDBOX_PROXY_SOCKET} 2>/dev/null &`,
    `until { exec 3<>/dev/tcp/127.0.0.1/${PROXY_PORT}; } 2>/dev/null; do`,
    '  kill -0 $! 2>/dev/null || { echo "vmpilot: the sandbox network bridge did not start" >&2; exit 125; }',
    "done",
    "exec 3>&-",
    'exec bash -c "$1"',
  ].join("\n");
}

/**
 * The mirror object directory a `clone --shared` checkout borrows; git inside needs to read it.
 * Given `mirror`, exactly its objects. Otherwise the checkout's alternates file is read, but it
 * is agent-writable once commands have run there, so only a mirror's object directory under
 * `<dataDir>/mirrors` is accepted, never an arbitrary path.
 */
async function borrowedObjects(root: string, options: SandboxWorkspaceOptions): Promise<string[]> {
  if (options.mirror) return [join(options.mirror, "objects")];
  if (!options.dataDir) return [];
  const mirrors = await realpath(join(options.dataDir, "mirrors")).catch(() => undefined);
  if (!mirrors) return [];
  const objects = join(root, ".git", "objects");
  const text = await readFile(join(objects, "info", "alternates"), "utf8").catch(() => "");
  const first = text.split("\n").find((line) => line.trim() !== "" && !line.startsWith("#"));
  if (!first) return [];
  const real = await realpath(resolve(objects, first.trim())).catch(() => "");
  const mirror = dirname(real);
  const isMirrorObjects =
    basename(real) === "objects" && dirname(mirror) === mirrors && mirror.endsWith(".git");
  return isMirrorObjects ? [real] : [];
}

/**
 * The running Node's install, so commands get the same Node (and its npm). The whole prefix when
 * it is a Node install (nvm and tarball layouts: bin/ beside lib/node_modules/npm), else bin only
 * — never a broader directory such as a home holding `~/bin/node`.
 */
async function nodeInstall(): Promise<string> {
  const prefix = dirname(NODE_BIN_DIR);
  const isInstall = await access(join(prefix, "lib", "node_modules", "npm")).then(
    () => true,
    () => false,
  );
  return isInstall ? prefix : NODE_BIN_DIR;
}

async function requireSocat(socatPath: string): Promise<void> {
  try {
    await access(socatPath);
  } catch {
    throw new SandboxUnavailableError(
      `socat is required for sandbox network access (${socatPath} not found); install it with: apt-get install socat`,
    );
  }
}

/**
 * Makes a job's sandbox on `dir`: host system directories read-only, the checkout the only
 * writable host directory, private /tmp and HOME, new PID/IPC/UTS/network namespaces, no
 * capabilities, and an environment built from an allow-list. The network is reachable only
 * through an allow-list proxy, which records every refusal. With `agent`, it is made for the
 * workspace agent (bwrap.ts, SandboxLayout.agentDir).
 */
export async function openSandbox(
  dir: string,
  options: SandboxWorkspaceOptions & { agent?: boolean } = {},
): Promise<Sandbox> {
  const root = await realpath(dir);
  const logger = options.logger ?? fallbackLogger();
  const bwrapPath = options.bwrapPath ?? programPath("bwrap");
  const socatPath = options.socatPath ?? "/usr/bin/socat";
  const allowHosts = options.allowHosts ?? [];
  const networked = allowHosts.length > 0;
  if (networked) await requireSocat(socatPath);

  const limits = options.limits ?? DEFAULT_LIMITS;
  const kernel = await kernelSupport();
  const stateDir = options.stateDir ?? (await mkdtemp(join(tmpdir(), "vmpilot-sandbox-")));
  const tmpDir = join(stateDir, "tmp");
  const homeDir = join(stateDir, "home");
  const proxySocket = join(stateDir, "proxy.sock");
  const accounts = join(stateDir, "accounts");
  const agentDir = options.agent ? join(stateDir, "agent") : undefined;
  const asRoot = process.getuid?.() === 0;
  let scratch: ScratchDisk | undefined;
  let cgroup: JobCgroup | undefined;
  let proxy: AllowListProxy | undefined;
  let proxyListen: SocketPath | undefined;
  const release = async () => {
    // The job's processes first: they hold the scratch disk and the proxy socket.
    await cgroup?.remove();
    await proxy?.close();
    await proxyListen?.remove();
    if (options.stateDir) await rm(proxySocket, { force: true });
    if (options.stateDir && agentDir) await rm(agentDir, { recursive: true, force: true });
    if (!options.disk) await scratch?.unmount();
    if (!options.stateDir) await rm(stateDir, { recursive: true, force: true });
  };

  let prefix: string[];
  const inner = dropPrivileges(asRoot, agentDir !== undefined);
  try {
    if (options.disk) scratch = options.disk;
    else if (kernel.scratchProblem === undefined) {
      scratch = await mountScratchDisk(stateDir, limits.diskMb);
    }
    await mkdir(tmpDir, { recursive: true });
    await mkdir(homeDir, { recursive: true });
    await mkdir(accounts, { recursive: true });
    // The workspace agent's alone: its commands never see it (bwrap.ts, commandSandbox).
    if (agentDir) await mkdir(agentDir, { mode: 0o700 });
    await writeFile(join(accounts, "passwd"), SANDBOX_PASSWD);
    await writeFile(join(accounts, "group"), SANDBOX_GROUP);

    const hidden = [...(options.hidePaths ?? [])];
    if (options.dataDir) hidden.push(resolve(options.dataDir));
    prefix = await sandboxArgs({
      root,
      tmpDir,
      homeDir,
      readOnly: [
        await nodeInstall(),
        ...(await borrowedObjects(root, options)),
        ...(options.readOnlyPaths ?? []),
      ],
      hidden,
      proxySocket: networked ? proxySocket : undefined,
      accounts,
      asRoot,
      agentDir,
    });

    // The probe binds the proxy socket, so the proxy starts first.
    await rm(proxySocket, { force: true });
    if (networked) {
      proxyListen = await socketPathIn(stateDir, "proxy.sock");
      proxy = await startAllowListProxy({
        listen: { socketPath: proxyListen.path },
        allowHosts,
        allowPrivate: options.allowPrivate,
        logger,
      });
      if (asRoot) await handOver([proxySocket]);
    }
    if (agentDir) {
      await probeBwrap(bwrapPath, [...prefix, ...inner, ...commandSandbox()], "agent");
    } else await probeBwrap(bwrapPath, [...prefix, ...inner]);
    if (asRoot) await handOver([root, tmpDir, homeDir, ...(agentDir ? [agentDir] : [])]);
    cgroup = await createJobCgroup(limits, kernel.cgroups);
  } catch (error) {
    await release();
    throw error;
  }

  const env = networked
    ? { ...baseEnv(SANDBOX_HOME), ...proxyEnv(`http://127.0.0.1:${PROXY_PORT}`) }
    : baseEnv(SANDBOX_HOME);
  const shell = networked ? ["bash", "-c", bridgeScript(socatPath), "vmpilot"] : ["bash", "-c"];
  const lifetime = new AbortController();
  const jobCgroup = cgroup;
  const meter = diskMeter({
    // On the job's disk, the checkout is in the disk's own count.
    paths: options.disk ? [] : scratch ? [root] : [root, tmpDir, homeDir],
    scratch,
    processes: jobCgroup && (() => jobCgroup.pids()),
  });

  /** The bwrap that runs `command` under bash in the sandbox. */
  const specOf = (command: string, opts: Pick<SandboxRun, "env" | "cwd">) => {
    if (lifetime.signal.aborted) throw new Error("The workspace was disposed");
    const cwd = opts.cwd ?? root;
    const args = [...prefix];
    for (const [name, value] of Object.entries(withExtraEnv(env, opts.env))) {
      args.push("--setenv", name, value);
    }
    // As root, the outer bwrap has no capability to enter a directory only the sandbox user may.
    if (inner.length > 0) args.push("--chdir", "/", ...inner, "--chdir", cwd, "--");
    else args.push("--chdir", cwd);
    const started = inCgroup(jobCgroup, bwrapPath, [...args, ...shell, command]);
    return { ...started, cwd: "/", env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } };
  };

  return {
    root,
    limits,
    agentDir,
    async run(command, opts = {}) {
      const signals = [lifetime.signal, ...(opts.signal ? [opts.signal] : [])];
      return runProcess(specOf(command, opts), {
        timeoutMs: opts.timeoutMs,
        signal: AbortSignal.any(signals),
      });
    },
    async start(command, opts) {
      const spec = { ...specOf(command, {}), group: true, stream: true };
      const signals = [lifetime.signal, ...(opts.signal ? [opts.signal] : [])];
      return spawnedProcess(launch(spec, opts.onOutput), AbortSignal.any(signals));
    },
    guarded: limitGuard(meter, limits, logger, jobCgroup),
    blockedConnections: () => proxy?.blocked() ?? [],
    async dispose() {
      if (lifetime.signal.aborted) return;
      lifetime.abort();
      await release();
    },
  };
}

/**
 * A workspace whose commands each run in a sandbox of their own (openSandbox), started anew. No
 * longer what createWorkspace opens (the workspace agent's sandbox per job is): the reference the
 * agent is held and measured to (test/workspace/providers.ts, bench/sandbox-exec.ts).
 */
export async function createSandboxWorkspace(
  dir: string,
  options: SandboxWorkspaceOptions = {},
): Promise<Workspace> {
  const sandbox = await openSandbox(dir, options);
  const { root, limits } = sandbox;
  const asRoot = process.getuid?.() === 0;
  return {
    isolation: "sandbox",
    engine: "local",
    root,
    ...fileOps(root, asRoot ? UNPRIVILEGED_OWNER : undefined),
    async exec(command, opts = {}) {
      const cwd = opts.cwd === undefined ? root : await resolveInside(root, opts.cwd);
      return sandbox.guarded((stop, overDisk) =>
        sandbox.run(ulimitPrefix(limits, overDisk) + command, {
          env: opts.env,
          cwd,
          timeoutMs: opts.timeoutMs,
          signal: opts.signal ? AbortSignal.any([stop, opts.signal]) : stop,
        }),
      );
    },
    spawn: (command, opts) => spawnGuarded(sandbox.guarded, limits, command, opts, sandbox.start),
    blockedConnections: () => sandbox.blockedConnections(),
    dispose: () => sandbox.dispose(),
  };
}
