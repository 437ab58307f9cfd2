// A workspace on a VM: make the VM, wait for its workspace agent, send it the checkout as a git
// bundle, and hand back the same remote workspace the local engine uses. The VM is
// destroyed when the workspace is disposed, and before anything here throws.
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../../log/logger.ts";
import {
  agentHealthy,
  createRemoteWorkspace,
  type Deadline,
  seedRemoteCheckout,
  waitForAgent,
} from "../agent/remote.ts";
import { gitClient } from "../git/git.ts";
import { startAllowListProxy } from "../sandbox/proxy.ts";
import type { Workspace } from "../types.ts";
import { endpointOf, type Vm, type VmEngine } from "./engine.ts";
import type { EgressGateway } from "./gateway.ts";
import type { VmPool } from "./pool.ts";
import { destroyEarlierAttempts } from "./sweep.ts";

/** After the engine says the VM runs, its workspace agent still has to listen. */
const AGENT_READY_MS = 60_000;
/**
 * The commits of history a VM gets: enough for `git log` and `blame` on recent work, while a
 * repository with years of history does not travel whole into every job's VM.
 */
export const SEED_DEPTH = 100;

/**
 * The checkout's branch as a bundle (its last SEED_DEPTH commits), or null when it has no
 * commits yet. Runs git in `root`, which is safe only because the worker made it and no command
 * has run in it.
 */
async function bundleOf(root: string, dir: string) {
  const git = gitClient(root);
  const branch = (await git.raw(["symbolic-ref", "--short", "HEAD"])).trim();
  const origin = (await git.raw(["config", "--default", "", "remote.origin.url"])).trim();
  const head = await git.raw(["rev-parse", "-q", "--verify", "HEAD"]).catch(() => "");
  if (!head.trim()) return { branch, origin, bundle: null, shallow: [] };
  const bundle = join(dir, "seed.bundle");
  const ref = `refs/heads/${branch}`;
  // Counting stops past the depth: a history of a million commits is not walked for this.
  const commits = Number(
    (await git.raw(["rev-list", "--count", `--max-count=${SEED_DEPTH + 1}`, ref])).trim(),
  );
  if (commits <= SEED_DEPTH) {
    await git.raw(["bundle", "create", "-q", bundle, ref]);
    return { branch, origin, bundle, shallow: [] };
  }
  // A bundle cannot be cut at a depth; a bundle of a shallow clone can, and it names its cut.
  const shallowClone = join(dir, "shallow.git");
  await git.raw([
    "clone",
    "-q",
    "--bare",
    "--no-tags",
    "--single-branch",
    `--branch=${branch}`,
    `--depth=${SEED_DEPTH}`,
    `file://${root}`,
    shallowClone,
  ]);
  await gitClient(shallowClone).raw(["bundle", "create", "-q", bundle, ref]);
  const cut = await readFile(join(shallowClone, "shallow"), "utf8");
  return { branch, origin, bundle, shallow: cut.split("\n").filter(Boolean) };
}

/** The worker-side allow-list proxy a VM's commands go through. */
interface VmEgress {
  /** Where the proxy listens: the worker's address as VMs reach it (WORKSPACE_PROXY_HOST). */
  host: string;
  /** Fly network isolation: the proxy listens on loopback and VMs reach it through this. */
  gateway?: EgressGateway;
  allowHosts: readonly string[];
  allowPrivate: readonly string[];
  logger: Logger;
}

const bracketed = (host: string) => (host.includes(":") ? `[${host}]` : host);

/** A proxy for this VM only, on an ephemeral port, answering only with this VM's password. */
async function startEgress(egress: VmEgress) {
  const { gateway } = egress;
  const password = gateway?.password() ?? randomBytes(24).toString("base64url");
  const proxy = await startAllowListProxy({
    listen: { host: egress.host, port: 0 },
    password,
    allowHosts: egress.allowHosts,
    allowPrivate: egress.allowPrivate,
    logger: egress.logger,
  });
  const route = gateway
    ? await gateway.add(password, proxy.port ?? 0).catch(async (error: Error) => {
        await proxy.close();
        throw error;
      })
    : { host: egress.host, port: proxy.port, remove: () => undefined };
  return {
    blocked: () => proxy.blocked(),
    close: async () => {
      route.remove();
      await proxy.close();
    },
    url: `http://vmpilot:${password}@${bracketed(route.host)}:${route.port}`,
  };
}

export interface VmWorkspaceOptions {
  engine: VmEngine;
  /** Unset: the VM's network is what the engine allows (deploy/kubernetes's NetworkPolicy). */
  egress?: VmEgress;
  /** The worker's fresh checkout, sent to the VM; the VM's copy is the one commands change. */
  localRoot: string;
  owner: string;
  /** Started VMs to take one from instead of waiting for a boot. */
  pool?: VmPool;
  signal?: AbortSignal;
  /** Of each call to the VM's agent; default AbortSignal.timeout (tests fire theirs by hand). */
  deadline?: Deadline;
}

export async function createVmWorkspace(options: VmWorkspaceOptions): Promise<Workspace> {
  const { engine } = options;
  const dir = await mkdtemp(join(tmpdir(), "vmpilot-seed-"));
  try {
    await destroyEarlierAttempts(engine, options.owner);
    const seed = await bundleOf(options.localRoot, dir);
    let pooled = options.pool?.take();
    // A pooled VM may have died while it waited (a crash, the pod's deadline): make another.
    if (pooled && !(await agentHealthy(endpointOf(pooled.vm), options.deadline))) {
      await engine.destroy(pooled.vm.id).catch(() => undefined);
      pooled = undefined;
    }
    const secret = pooled?.secret ?? randomBytes(32).toString("base64url");
    const egress = options.egress ? await startEgress(options.egress) : undefined;
    let vm: Vm | undefined = pooled?.vm;
    const release = async () => {
      try {
        if (vm) await engine.destroy(vm.id);
      } finally {
        await egress?.close();
      }
    };
    try {
      // A pooled VM's workspace agent answered just above; a new VM's has yet to start listening.
      if (!vm) {
        vm = await engine.create({ owner: options.owner, secret }, options.signal);
        await waitForAgent(endpointOf(vm), AGENT_READY_MS, options.signal);
      }
      const agent = { endpoint: endpointOf(vm), secret, deadline: options.deadline };
      const root = await seedRemoteCheckout(agent, { ...seed, proxy: egress?.url }, options.signal);
      return createRemoteWorkspace({
        isolation: "vm",
        engine: engine.name,
        root,
        ...agent,
        release,
        blockedConnections: () => egress?.blocked() ?? [],
        signal: options.signal,
      });
    } catch (error) {
      await release().catch(() => undefined);
      throw error;
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
