// Fly network isolation (README "Fly network isolation"). The workspace app is made on a private
// network (6PN) of its own, so its Machines reach nothing on the organization's default one: not
// the worker, not the database. The worker then reaches each workspace agent through a Flycast
// address of the workspace app allocated in its own network: the Fly Proxy forwards only the ports
// a Machine's services declare, and fly-force-instance-id picks the Machine. The VMs reach the
// worker's egress proxy the other way round, through gateway.ts.
import { connect } from "node:net";
import { VmRefused } from "./engine.ts";

/** The Fly Proxy sends a request carrying this header to that Machine only. */
export const FORCE_INSTANCE = "fly-force-instance-id";

/**
 * The Machine's service for the workspace agent's port. The proxy reads HTTP (the `http` handler)
 * so that it can honour fly-force-instance-id; it neither starts nor stops the Machine, whose life
 * the worker decides.
 */
export function agentService(port: number) {
  return {
    protocol: "tcp",
    internal_port: port,
    autostart: false,
    autostop: "off",
    ports: [{ port, handlers: ["http"] }],
  };
}

/** Between separate 6PNs packets are dropped: no answer within this means no route. */
const PROBE_MS = 3000;

/**
 * True when a TCP connection to the address gets any answer, a refusal included: only a host on
 * the same network answers at all.
 */
function reachable(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: address, port, timeout: PROBE_MS });
    const done = (answered: boolean) => {
      socket.destroy();
      resolve(answered);
    };
    socket.on("connect", () => done(true));
    socket.on("timeout", () => done(false));
    socket.on("error", (error: NodeJS.ErrnoException) => done(error.code === "ECONNREFUSED"));
  });
}

/** Apps whose Machines this process found unreachable: the probe runs once per app. */
const isolated = new Set<string>();

/**
 * Refuses a Machine the worker reaches at its own address: its app is on the worker's network,
 * made without `--network`, so Flycast alone would only pretend to isolate it.
 */
export async function checkIsolated(
  app: string,
  address: string,
  port: number,
  probe = reachable,
): Promise<void> {
  if (isolated.has(app)) return;
  if (await probe(address, port)) {
    throw new VmRefused(
      "the workspace Machine is reachable on the worker's private network: with FLY_WORKSPACE_FLYCAST set, the workspace app must be made on a network of its own (fly apps create --network)",
    );
  }
  isolated.add(app);
}
