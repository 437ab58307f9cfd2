// Commands reach the agent's process as a stranger, which they can neither signal nor read (its
// memory holds the workspace's secret). In a VM they run as another uid than the agent; and a
// Kubernetes pod asks for what the agent needs to do that (its securityContext). In the `agent`
// provider's sandbox they run in user and PID namespaces of their own, real processes tested here.
import { spawn, spawnSync } from "node:child_process";
import { chmod, chown, mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { type LocalAgent, startLocalAgent } from "../../src/workspace/agent/local.ts";
import { agentHealthy, createRemoteWorkspace } from "../../src/workspace/agent/remote.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { createKubernetesEngine } from "../../src/workspace/vm/kubernetes.ts";
import { NAMESPACE, startKubernetesFake } from "../helpers/kubernetes-fake.ts";
import { processesWith, waitUntil } from "./helpers.ts";

const SECRET = "identity-test-secret-".padEnd(48, "x");

/**
 * Run as a command: looks for the agent among the processes it can see, then signals every
 * process it may (kill -1) and looks for the secret in every environment and command line (the
 * pattern read from a pipe: as an argument, it would be in grep's own).
 */
const PROBE = String.raw`
for f in /proc/[0-9]*/cmdline; do
  case "$(tr '\0' ' ' < $f 2>/dev/null)" in /*node\ *agent/main.ts*) echo "agent: $f" ;; esac
done
echo "processes: $(ls -d /proc/[0-9]* | wc -l)"
kill -KILL -1
cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | grep -c -F -f <(echo '${SECRET}')
`;

describe("a command run through the workspace agent", () => {
  let dir: string;
  let agent: LocalAgent;
  let workspace: Workspace;

  beforeAll(async () => {
    dir = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-agent-identity-")));
    await mkdir(join(dir, "repo"));
    agent = await startLocalAgent(join(dir, "repo"), SECRET);
    workspace = createRemoteWorkspace({
      isolation: "sandbox",
      engine: "local",
      root: agent.root,
      endpoint: { socketPath: agent.socketPath },
      secret: SECRET,
      release: agent.stop,
    });
  });

  afterAll(async () => {
    await workspace?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it("can neither see, signal nor read the agent, though it runs as the same user", async () => {
    const result = await workspace.exec(PROBE);
    // Its own shell, and what it ran: nothing of the agent's sandbox.
    expect(result.stdout).toMatch(/^processes: [1-5]\n0\n$/);
    expect(result.exitCode).toBe(1);
    // The agent is still there, and serves the next command.
    expect((await workspace.exec("echo still")).stdout).toBe("still\n");
  });

  it("writes files as the command user, whose commands can change them", async () => {
    await workspace.writeFile("made/by-agent.txt", "agent\n");
    const result = await workspace.exec(
      "echo command >> made/by-agent.txt && id -u && stat -c %u made made/by-agent.txt",
    );
    expect(result.exitCode).toBe(0);
    const [command, ...owners] = result.stdout.trim().split("\n");
    expect(owners).toEqual([command, command]);
    expect((await workspace.readFile("made/by-agent.txt", 100)).toString()).toBe(
      "agent\ncommand\n",
    );
  });
});

describe.skipIf(process.getuid?.() !== 0)("an agent told to run commands as another user", () => {
  it("refuses to start where it lacks the capabilities to, and says what is missing", () => {
    const main = fileURLToPath(new URL("../../src/workspace/agent/main.ts", import.meta.url));
    // As a pod without the capabilities its spec asks for would run it.
    const limited = ["--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"];
    const result = spawnSync("setpriv", [...limited, process.execPath, main], {
      env: {
        PATH: process.env.PATH,
        VMPILOT_AGENT_SECRET: SECRET,
        VMPILOT_AGENT_ROOT: "/nonexistent",
        VMPILOT_AGENT_LISTEN: "127.0.0.1:0",
        VMPILOT_AGENT_COMMAND_USER: "10002:10002",
      },
      encoding: "utf8",
      timeout: 10_000,
    });
    expect(result.stderr).toContain("the agent lacks CAP_KILL, CAP_SETGID, CAP_SETUID");
    expect(result.status).toBe(2);
  });
});

/**
 * A workspace whose agent runs commands as another uid, as the workspace image starts it, with a
 * uid of this test's own: every process of the command user is killed once no command runs.
 */
async function commandUserWorkspace(): Promise<{ workspace: Workspace; uid: number }> {
  const uid = 30_000 + Math.floor(Math.random() * 30_000);
  const dir = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-agent-user-")));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  await chmod(dir, 0o755);
  for (const sub of ["repo", "home", "run"]) {
    await mkdir(join(dir, sub));
    await chown(join(dir, sub), uid, uid);
  }
  const socketPath = join(dir, "run", "agent.sock");
  const main = fileURLToPath(new URL("../../src/workspace/agent/main.ts", import.meta.url));
  const limited = [
    "--bounding-set=-all,+setuid,+setgid,+kill",
    "--inh-caps=-all",
    "--no-new-privs",
  ];
  const agent = spawn("setpriv", [...limited, "--", process.execPath, main], {
    env: {
      PATH: process.env.PATH,
      VMPILOT_AGENT_SECRET: SECRET,
      VMPILOT_AGENT_ROOT: join(dir, "repo"),
      VMPILOT_AGENT_HOME: join(dir, "home"),
      VMPILOT_AGENT_LISTEN: socketPath,
      VMPILOT_AGENT_COMMAND_USER: `${uid}:${uid}`,
    },
    stdio: "ignore",
  });
  const exited = new Promise((resolve) => agent.once("exit", resolve));
  onTestFinished(async () => {
    agent.kill("SIGKILL");
    await exited;
  });
  expect(await waitUntil(() => agentHealthy({ socketPath }), 15_000)).toBe(true);
  const workspace = createRemoteWorkspace({
    isolation: "vm",
    engine: "fly",
    root: join(dir, "repo"),
    endpoint: { socketPath },
    secret: SECRET,
    release: async () => {},
  });
  return { workspace, uid };
}

/** A token for a command line that processesWith finds; its processes are killed after the test. */
function sleepToken(): string {
  const token = `${Math.floor(Math.random() * 1e6)}.${Math.floor(Math.random() * 1e6)}`;
  onTestFinished(async () => {
    for (const pid of await processesWith(token)) process.kill(pid, "SIGKILL");
  });
  return token;
}

describe.skipIf(process.getuid?.() !== 0)("an agent that runs commands as another user", () => {
  it("leaves nothing of a command running once it ends, even what left its session", async () => {
    const { workspace, uid } = await commandUserWorkspace();
    const token = sleepToken();
    const quiet = await workspace.exec(`setsid -f sleep ${token} >/dev/null 2>&1; echo started`);
    expect(quiet).toMatchObject({ stdout: "started\n", exitCode: 0 });
    expect(await waitUntil(async () => (await processesWith(token)).length === 0)).toBe(true);
    // One that holds the command's output does not hold back its answer.
    const holding = await workspace.exec(`setsid -f sleep ${token}; echo started`);
    expect(holding).toMatchObject({ stdout: "started\n", exitCode: 0 });
    expect(await waitUntil(async () => (await processesWith(token)).length === 0)).toBe(true);
    // Not the agent: it serves the next command.
    expect((await workspace.exec("id -u")).stdout).toBe(`${uid}\n`);
  });

  it("keeps a spawned command running across other commands, and sweeps what it left once it ends", async () => {
    const { workspace, uid } = await commandUserWorkspace();
    const token = sleepToken();
    let out = "";
    const server = await workspace.spawn("id -u; exec cat", {
      onOutput: (_stream, chunk) => {
        out += chunk.toString();
      },
    });
    // A command that leaves a process behind ends while the spawned one runs: the sweep waits.
    const left = await workspace.exec(`setsid -f sleep ${token} >/dev/null 2>&1; echo started`);
    expect(left).toMatchObject({ stdout: "started\n", exitCode: 0 });
    await server.write("still here\n");
    expect(await waitUntil(async () => out === `${uid}\nstill here\n`)).toBe(true);
    // Once it ends, no command runs: what the other one left is swept.
    server.kill();
    expect(await server.exited).toEqual({ code: null });
    expect(await waitUntil(async () => (await processesWith(token)).length === 0)).toBe(true);
  });
});

describe.skipIf(process.getuid?.() !== 0)("a launcher that is not root through and through", () => {
  it("refuses to start a process as another user, which would keep root as its real uid", async () => {
    const launcher = fileURLToPath(
      new URL("../../src/workspace/process/launcher-process.ts", import.meta.url),
    );
    // What a launcher restarted by the agent would be, once the agent took the command user.
    const child = spawn(
      "setpriv",
      ["--euid=65534", "--egid=65534", "--groups=65534", process.execPath, launcher],
      {
        env: { PATH: process.env.PATH },
        serialization: "advanced",
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      },
    );
    onTestFinished(() => {
      child.kill();
    });
    const spec = {
      file: "id",
      args: [],
      cwd: "/",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      group: false,
      user: { uid: 65534, gid: 65534 },
    };
    child.send({ type: "launch", id: 1, spec });
    const reply = await new Promise((resolve, reject) => {
      child.once("message", resolve);
      child.once("exit", (code) => reject(new Error(`the launcher exited (${code})`)));
    });
    expect(reply).toMatchObject({ type: "failed", id: 1, code: "EPERM" });
  });
});

describe("a Kubernetes workspace pod", () => {
  it("runs the agent as root holding only what starts and stops commands as another user", async () => {
    const fake = await startKubernetesFake();
    onTestFinished(() => fake.close());
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(fake.kubeconfig);
    const engine = createKubernetesEngine({
      namespace: NAMESPACE,
      image: fake.image,
      cpu: "1",
      memory: "1Gi",
      port: fake.vms.port,
      deadlineSeconds: 600,
      kubeConfig,
    });
    const vm = await engine.create({ owner: "job-1-1", secret: SECRET });
    const [pod] = fake.pods.values();
    await engine.destroy(vm.id);
    expect(pod?.body.spec.containers[0]?.securityContext).toEqual({
      runAsUser: 0,
      runAsNonRoot: false,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"], add: ["SETUID", "SETGID", "KILL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
  });
});
