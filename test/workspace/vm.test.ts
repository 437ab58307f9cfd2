// VM workspaces against the Fly Machines and Kubernetes API fakes, whose machines run the real
// workspace agent: the checkout goes in as a bundle, commands run there, nothing leaks, every
// failure leaves no VM behind, and the sweeper removes what a dead attempt left.
import { execFile, execFileSync } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPermanent } from "../../src/errors.ts";
import { redact } from "../../src/log/redact.ts";
import { checkWorkspace, createWorkspace } from "../../src/workspace/factory.ts";
import { bundleWorkspaceCommits } from "../../src/workspace/git/publish.ts";
import { SandboxUnavailableError } from "../../src/workspace/sandbox/bwrap.ts";
import { type VmEngine, VmFailed, VmRefused } from "../../src/workspace/vm/engine.ts";
import { createKubernetesEngine } from "../../src/workspace/vm/kubernetes.ts";
import { SEED_DEPTH } from "../../src/workspace/vm/open.ts";
import { createVmPool, poolOwner } from "../../src/workspace/vm/pool.ts";
import { engineFor } from "../../src/workspace/vm/settings.ts";
import { sweepVms } from "../../src/workspace/vm/sweep.ts";
import type { EngineFake } from "../helpers/engine-fake.ts";
import { flyEngine, startFlyFake } from "../helpers/fly-fake.ts";
import { NAMESPACE, startKubernetesFake } from "../helpers/kubernetes-fake.ts";
import { commitFile, handDeadlines, recordingLogger, waitUntil } from "./helpers.ts";

interface Case {
  name: "fly" | "kubernetes";
  start(): Promise<EngineFake>;
  engine(fake: EngineFake, overrides?: { token?: string; image?: string }): VmEngine;
  /** The engine's API calls for one workspace: make, wait for it, destroy. */
  calls: [RegExp, RegExp, RegExp];
}

const cases: Case[] = [
  {
    name: "fly",
    start: startFlyFake,
    engine: (fake, o = {}) =>
      flyEngine(fake, { token: o.token ?? fake.token, image: o.image ?? fake.image }),
    calls: [/^POST \/v1\/apps\/[^/]+\/machines$/, /^GET .*\/wait$/, /^DELETE /],
  },
  {
    name: "kubernetes",
    start: startKubernetesFake,
    engine: (fake, o = {}) => {
      const kubeConfig = new KubeConfig();
      const config = JSON.parse((fake as unknown as { kubeconfig: string }).kubeconfig);
      if (o.token) config.users[0].user.token = o.token;
      kubeConfig.loadFromString(JSON.stringify(config));
      return createKubernetesEngine({
        namespace: NAMESPACE,
        image: o.image ?? fake.image,
        cpu: "1",
        memory: "1Gi",
        port: fake.vms.port,
        deadlineSeconds: 3600,
        kubeConfig,
        startTimeoutMs: 30_000,
      });
    },
    calls: [/^POST \/api\/v1\/namespaces\/[^/]+\/pods$/, /^(GET|WATCH) .*\/pods$/, /^DELETE /],
  },
];

describe("engineFor", () => {
  it("registers the Fly API token, which matches no pattern, so logs and comments hide it", () => {
    const token = "FlyV1 fm2_lJPECAAAAAAAAMqexBD0vmpilotTestToken7A==";
    expect(redact(`token ${token}`)).toContain(token);
    engineFor("fly", {
      FLY_API_TOKEN: token,
      FLY_WORKSPACE_APP: "a",
      FLY_WORKSPACE_IMAGE: "i",
    });
    expect(redact(`token ${token}`)).not.toContain(token);
  });
});

let base: string;
let local: string;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-vm-test-")));
  local = join(base, "checkout");
  await mkdir(local);
  execFileSync("git", ["init", "-q", "-b", "vmpilot/issue-7", local]);
  execFileSync("git", ["-C", local, "remote", "add", "origin", "https://github.com/o/r.git"]);
  commitFile(local, "README.md", "hello from the worker's checkout\n");
  commitFile(local, "value.txt", "old\n");
  process.env.GITHUB_TOKEN = "ghs_vm_leak_probe";
});

afterAll(async () => {
  delete process.env.GITHUB_TOKEN;
  await rm(base, { recursive: true, force: true });
});

function post(baseUrl: string, path: string, secret: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${baseUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
    });
    req.on("response", (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end(JSON.stringify({ id: "x", command: "touch pwned" }));
  });
}

// The providers run side by side, each on its own fake: much of a VM's start is waiting (a
// sandbox, a process, a health check), which the other provider's tests fill. On one fake the
// tests run in turn, as they count its VMs.
describe.each(cases)("the $name provider", { concurrent: true }, (c) => {
  let fake: EngineFake;
  beforeAll(async () => {
    fake = await c.start();
  });
  afterAll(async () => {
    await fake.close();
  });

  describe("in turn", { concurrent: false }, () => {
    it("runs commands on the VM's copy of the checkout, sent as a bundle, and destroys the VM after", async () => {
      fake.calls.length = 0;
      const engine = c.engine(fake);
      const workspace = await createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: engine,
        owner: "job-1-1",
      });
      expect(workspace).toMatchObject({ isolation: "vm", engine: c.name });
      expect(workspace.root).not.toBe(local);
      const git = await workspace.exec(
        "git rev-parse --abbrev-ref HEAD; git log --oneline | wc -l; git remote get-url origin; cat README.md",
      );
      expect(git.stdout).toBe(
        "vmpilot/issue-7\n2\nhttps://github.com/o/r.git\nhello from the worker's checkout\n",
      );
      await workspace.writeFile("value.txt", "new\n");
      expect((await workspace.readFile("value.txt", 100)).toString()).toBe("new\n");
      expect(await workspace.listDir(".")).toEqual([".git/", "README.md", "value.txt"]);
      // The worker's checkout is not where commands run.
      expect(execFileSync("cat", [join(local, "value.txt")], { encoding: "utf8" })).toBe("old\n");
      const probe = await workspace.exec("env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'");
      expect(probe.stdout).not.toContain("ghs_vm_leak_probe");
      expect(probe.stdout).not.toContain("VMPILOT_AGENT_SECRET");
      expect(probe.stdout).not.toContain(fake.token);
      expect(fake.vms.running()).toBe(1);
      await workspace.dispose();
      expect(fake.vms.running()).toBe(0);
      expect(await engine.list()).toEqual([]);
      // Make, wait (Kubernetes: a list, then a watch until Ready), destroy; the list above is the last call.
      const [create, ...rest] = fake.calls.slice(0, -1);
      expect(create).toMatch(c.calls[0] as RegExp);
      expect(rest.at(-1)).toMatch(c.calls[2] as RegExp);
      for (const call of rest.slice(0, -1)) expect(call).toMatch(c.calls[1] as RegExp);
      expect(fake.calls.length - 1).toBeLessThanOrEqual(6);
      expect(fake.problems).toEqual([]);
    });

    it("sends only the branch's recent history, and the VM's commit still comes back onto it", async ({
      onTestFinished,
    }) => {
      const long = join(base, `long-${c.name}`);
      execFileSync("git", ["clone", "-q", local, long]);
      execFileSync("git", ["-C", long, "checkout", "-q", "-b", "vmpilot/issue-8"]);
      execFileSync(
        "bash",
        [
          "-c",
          `for i in $(seq ${SEED_DEPTH + 5}); do git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m "c$i"; done`,
        ],
        { cwd: long },
      );
      const baseSha = execFileSync("git", ["-C", long, "rev-parse", "HEAD"], { encoding: "utf8" });
      const workspace = await createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: long,
        vmEngine: c.engine(fake),
        owner: "job-9-1",
      });
      try {
        const seen = await workspace.exec(
          "git rev-parse --is-shallow-repository HEAD; git log --oneline | wc -l; cat README.md; " +
            "echo more >> README.md && git -c user.name=t -c user.email=t@example.com commit -qam more",
        );
        expect(seen.stdout).toBe(
          `true\n${baseSha}${SEED_DEPTH}\nhello from the worker's checkout\n`,
        );
        const bundle = await bundleWorkspaceCommits(workspace, baseSha.trim());
        if (!bundle) throw new Error("no commits came back");
        onTestFinished(() => rm(bundle.dir, { recursive: true, force: true }));
        execFileSync("git", ["-C", long, "fetch", "-q", bundle.file, "HEAD:refs/heads/back"]);
        expect(
          execFileSync("git", ["-C", long, "log", "--format=%s", "-2", "back"], {
            encoding: "utf8",
          }),
        ).toBe(`more\nc${SEED_DEPTH + 5}\n`);
      } finally {
        await workspace.dispose();
      }
    });

    it("refuses requests to another VM's agent without that VM's own secret", async () => {
      const engine = c.engine(fake);
      const first = await engine.create({ owner: "job-2-1", secret: "a".repeat(40) });
      const second = await engine.create({ owner: "job-3-1", secret: "b".repeat(40) });
      try {
        expect(await post(first.baseUrl, "/v1/exec", "b".repeat(40))).toBe(401);
        expect(await post(first.baseUrl, "/v1/exec", "")).toBe(401);
        expect(first.baseUrl).not.toBe(second.baseUrl);
      } finally {
        await engine.destroy(first.id);
        await engine.destroy(second.id);
      }
      expect(fake.vms.running()).toBe(0);
    });

    it("says clearly what the engine refused, permanent or not, and leaves no VM behind", async () => {
      const badToken = c.engine(fake, { token: "wrong-token-0123456789" });
      const refused = createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: badToken,
      });
      await expect(refused).rejects.toBeInstanceOf(VmRefused);
      await expect(refused).rejects.toThrow(/refused \(401\)/);
      await expect(
        checkWorkspace({ isolation: "vm", engine: c.name }, { vmEngine: badToken }),
      ).rejects.toBeInstanceOf(SandboxUnavailableError);

      const noImage = createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: c.engine(fake, { image: "registry.example/missing:0" }),
      });
      await expect(noImage).rejects.toBeInstanceOf(VmRefused);

      fake.failNext({ method: "POST", status: 429 });
      const limited = createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: c.engine(fake),
      });
      await expect(limited).rejects.toBeInstanceOf(VmFailed);
      await expect(limited.catch((e) => isPermanent(e))).resolves.toBe(false);

      // The VM is made, then the engine fails while the worker waits for it to start.
      fake.failNext({ method: "GET", status: 503 });
      const died = createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: c.engine(fake),
      });
      await expect(died).rejects.toThrow(/503/);
      expect(fake.vms.running()).toBe(0);
      expect(await c.engine(fake).list()).toEqual([]);
      await checkWorkspace({ isolation: "vm", engine: c.name }, { vmEngine: c.engine(fake) });
    });

    it("sends the VM's commands through a proxy on the worker that follows the allow-list", async ({
      onTestFinished,
    }) => {
      const site = createServer((_req, res) => res.end("allowed page"));
      await new Promise<void>((resolve) => site.listen(0, "127.0.0.2", resolve));
      const sitePort = (site.address() as AddressInfo).port;
      onTestFinished(() => new Promise<void>((resolve) => site.close(() => resolve())));
      const workspace = await createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: c.engine(fake),
        owner: "job-40-1",
        egressHost: "127.0.0.1",
        allowHosts: [`127.0.0.2:${sitePort}`],
        allowPrivate: ["127.0.0.2"],
      });
      const proxy = (await workspace.exec("printenv HTTPS_PROXY")).stdout.trim();
      expect(proxy).toMatch(/^http:\/\/vmpilot:[\w-]+@127\.0\.0\.1:\d+$/);
      // The test stands in for the VM's network, which reaches the worker's address. (Not a
      // synchronous spawn: the proxy answers on this process's event loop.)
      const curl = (...args: string[]) =>
        new Promise<{ out: string; code: number }>((resolve) => {
          execFile("curl", ["-s", "-w", " %{http_code}", ...args], (e, out) =>
            resolve({ out, code: typeof e?.code === "number" ? e.code : 0 }),
          );
        });
      const page = `http://127.0.0.2:${sitePort}/`;
      expect((await curl("-x", proxy, page)).out).toBe("allowed page 200");
      expect((await curl("-x", proxy, "http://example.com/")).out).toMatch(/ 403$/);
      const anonymous = proxy.replace(/vmpilot:[^@]+@/, "");
      expect((await curl("-x", anonymous, page)).out).toMatch(/ 407$/);
      expect(workspace.blockedConnections().map((b) => b.host)).toEqual(["example.com"]);
      await workspace.dispose();
      expect((await curl("-x", proxy, page)).code).toBe(7);
    });

    it("gives up on an agent that stops answering, and still destroys its VM", async () => {
      const clock = handDeadlines();
      const workspace = await createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: c.engine(fake),
        owner: "job-20-1",
        deadline: clock.deadline,
      });
      fake.vms.list()[0]?.freeze();
      const stop = new AbortController();
      const pending = workspace.exec("sleep 30", { signal: stop.signal });
      stop.abort();
      // The short grace an aborted command's agent has to answer (remote.ts) runs out.
      await clock.asked(2000);
      clock.fire(2000);
      await expect(pending).rejects.toThrow(/stopped answering/);
      await workspace.dispose();
      expect(fake.vms.running()).toBe(0);
    });

    it("a job's later attempt destroys the VM its dead earlier attempt left", async () => {
      const engine = c.engine(fake);
      await engine.create({ owner: "job-30-1", secret: "d".repeat(40) });
      await engine.create({ owner: "job-31-1", secret: "e".repeat(40) });
      const workspace = await createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: engine,
        owner: "job-30-2",
      });
      expect((await engine.list()).map((vm) => vm.owner).sort()).toEqual(["job-30-2", "job-31-1"]);
      await workspace.dispose();
      const [other] = await engine.list();
      if (other) await engine.destroy(other.id);
      expect(fake.vms.running()).toBe(0);
    });

    it("keeps started VMs ready: a job takes one, which serves that job only and goes with it", async () => {
      const engine = c.engine(fake);
      const { owner, stale } = poolOwner("worker-1", "boot2");
      const pool = createVmPool(engine, 2, owner, recordingLogger());
      await pool.filled();
      const ready = (await engine.list()).map((vm) => vm.id);
      expect(ready).toHaveLength(2);
      const workspace = await createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: engine,
        owner: "job-60-1",
        pool,
      });
      expect((await workspace.exec("cat README.md")).stdout).toBe(
        "hello from the worker's checkout\n",
      );
      await pool.filled();
      // One of the ready VMs serves the job; the pool made another to stay at two.
      const during = (await engine.list()).map((vm) => vm.id);
      expect(during).toHaveLength(3);
      expect(during).toEqual(expect.arrayContaining(ready));
      await workspace.dispose();
      const after = (await engine.list()).map((vm) => vm.id);
      expect(after).toHaveLength(2);
      expect(ready.filter((id) => after.includes(id))).toHaveLength(1);
      // A restarted worker's sweep destroys its earlier boot's pool, and leaves this boot's.
      await engine.create({ owner: poolOwner("worker-1", "boot1").owner, secret: "f".repeat(40) });
      await engine.create({ owner: poolOwner("worker-2", "boot1").owner, secret: "f".repeat(40) });
      expect(await sweepVms(engine, async () => true, stale)).toBe(1);
      await pool.close();
      const left = await engine.list();
      expect(left.map((vm) => vm.owner)).toEqual([poolOwner("worker-2", "boot1").owner]);
      for (const vm of left) await engine.destroy(vm.id);
      expect(fake.vms.running()).toBe(0);
    });

    it("does not give a job a pooled VM that died while it waited", async () => {
      const engine = c.engine(fake);
      const pool = createVmPool(engine, 1, poolOwner("worker-3", "boot1").owner, recordingLogger());
      await pool.filled();
      const [dead] = await engine.list();
      fake.vms.list()[0]?.freeze();
      const clock = handDeadlines();
      const opening = createWorkspace({
        isolation: "vm",
        engine: c.name,
        root: local,
        vmEngine: engine,
        owner: "job-70-1",
        pool,
        deadline: clock.deadline,
      });
      // The pooled VM's health check gets no answer within its time (remote.ts).
      await clock.asked(2000);
      clock.fire(2000);
      const workspace = await opening;
      expect((await workspace.exec("cat README.md")).exitCode).toBe(0);
      expect((await engine.list()).map((vm) => vm.id)).not.toContain(dead?.id);
      await workspace.dispose();
      await pool.filled();
      await pool.close();
      expect(fake.vms.running()).toBe(0);
    });

    it("replaces pooled VMs that stopped answering or waited too long, before a job asks", async () => {
      const engine = c.engine(fake);
      let clock = 0;
      const pool = createVmPool(
        engine,
        2,
        poolOwner("worker-4", "boot1").owner,
        recordingLogger(),
        {
          maxIdleMs: 60_000,
          now: () => clock,
        },
      );
      await pool.filled();
      const first = (await engine.list()).map((vm) => vm.id);
      await pool.refresh();
      await pool.filled();
      expect((await engine.list()).map((vm) => vm.id)).toEqual(first);
      // One stops answering: it alone is destroyed and replaced.
      const [answering, stopped] = fake.vms.list();
      await stopped?.stop();
      await pool.refresh();
      await pool.filled();
      const second = (await engine.list()).map((vm) => vm.id);
      expect(second).toHaveLength(2);
      expect(second.filter((id) => first.includes(id))).toHaveLength(1);
      expect(fake.vms.list()).toContain(answering);
      // Both waited longer than the pool keeps a VM idle.
      clock += 60_000;
      await pool.refresh();
      await pool.filled();
      const third = (await engine.list()).map((vm) => vm.id);
      expect(third).toHaveLength(2);
      expect(third.filter((id) => second.includes(id))).toEqual([]);
      await pool.close();
      expect(await engine.list()).toEqual([]);
      expect(fake.vms.running()).toBe(0);
    });

    it("sweeps the VMs of attempts that ended, and leaves live and CLI ones", async () => {
      const engine = c.engine(fake);
      const owners = ["job-10-1", "job-10-2", "job-11-1", "cli-4242"];
      const made = await Promise.all(
        owners.map((owner) => engine.create({ owner, secret: "s".repeat(40) })),
      );
      const live = async (jobId: number, attempt: number) => jobId === 10 && attempt === 2;
      expect(await sweepVms(engine, live)).toBe(2);
      expect((await engine.list()).map((vm) => vm.owner).sort()).toEqual(["cli-4242", "job-10-2"]);
      for (const vm of made) await engine.destroy(vm.id);
      expect(fake.vms.running()).toBe(0);
    });
  });
});

describe("the fly engine's deadline", { concurrent: true }, () => {
  it("destroys a Machine nobody comes back for: its agent exits at the deadline", async () => {
    const fake = await startFlyFake();
    try {
      const engine = flyEngine(fake, { deadlineSeconds: 1 });
      // A CLI run or a worker that crashed and never returns: nothing destroys it.
      const vm = await engine.create({ owner: "cli-4243", secret: "s".repeat(40) });
      expect(await engine.list()).toEqual([{ id: vm.id, owner: "cli-4243" }]);
      expect(await waitUntil(async () => fake.vms.running() === 0, 20_000)).toBe(true);
      expect(await engine.list()).toEqual([]);
    } finally {
      await fake.close();
    }
  });
});
