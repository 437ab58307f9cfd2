// The "machines" behind the Fly and Kubernetes API fakes: each is the real workspace agent in a
// bubblewrap sandbox on an empty directory, reached over TCP at its own loopback address (as a
// VM is at its private address), the secret coming from the environment the API was given.
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LocalAgent, startLocalAgent } from "../../src/workspace/agent/local.ts";

export interface FakeVm {
  /** The VM's private address. */
  ip: string;
  /** The VM stops answering, as a frozen or partitioned one does; connections stay open. */
  freeze(): void;
  /** The agent's checkout directory on this machine, for tests to look into. */
  root: string;
  /** Settles when the agent has ended, by itself or stopped. */
  exited: Promise<void>;
  stop(): Promise<void>;
}

export interface FakeVms {
  /** Every VM's agent listens on this port, each at its own address. */
  port: number;
  /** VMs started and not yet stopped. */
  running(): number;
  list(): FakeVm[];
  /** Resolves once the agent answers; rejects when it cannot start. `env`: the agent's settings. */
  start(secret: string, env?: Record<string, string>): Promise<FakeVm>;
  close(): Promise<void>;
}

interface Forward {
  port: number;
  freeze(): void;
  close(): Promise<void>;
}

/** A TCP listener piping each connection to the agent's socket; close() cuts them all. */
function forward(ip: string, port: number, socketPath: string): Promise<Forward> {
  const open = new Set<Socket>();
  let frozen = false;
  const server = createServer((client) => {
    open.add(client);
    client.on("close", () => open.delete(client));
    if (frozen) return;
    const upstream = connect(socketPath);
    open.add(upstream);
    upstream.on("close", () => open.delete(upstream));
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, ip, () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        freeze: () => {
          frozen = true;
          for (const socket of open) {
            socket.unpipe();
            socket.pause();
          }
        },
        close: () => {
          for (const socket of open) socket.destroy();
          return new Promise((done) => server.close(() => done()));
        },
      }),
    );
  });
}

export async function startFakeVms(): Promise<FakeVms> {
  // One port for all: the first VM's address picks it.
  const probe = await forward("127.0.0.1", 0, "/nonexistent");
  const { port } = probe;
  await probe.close();
  const live = new Set<FakeVm>();
  let next = 2;
  return {
    port,
    running: () => live.size,
    list: () => [...live],
    async start(secret, env = {}) {
      const dir = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-fake-vm-")));
      const root = join(dir, "workspace");
      await mkdir(root);
      let agent: LocalAgent;
      try {
        agent = await startLocalAgent(root, secret, {}, env);
      } catch (error) {
        await rm(dir, { recursive: true, force: true });
        throw error;
      }
      const ip = `127.0.${Math.floor(next / 250)}.${(next % 250) + 2}`;
      next += 1;
      const server = await forward(ip, port, agent.socketPath);
      const vm: FakeVm = {
        ip,
        root,
        freeze: () => server.freeze(),
        exited: agent.exited,
        async stop() {
          if (!live.delete(vm)) return;
          await server.close();
          await agent.stop();
          await rm(dir, { recursive: true, force: true });
        },
      };
      live.add(vm);
      return vm;
    },
    async close() {
      await Promise.all([...live].map((vm) => vm.stop()));
    },
  };
}
