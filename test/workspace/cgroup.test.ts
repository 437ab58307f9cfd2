import { stat } from "node:fs/promises";
import { dirname } from "node:path";
import { describe, expect, it } from "vitest";
import { launch } from "../../src/workspace/process/launcher.ts";
import { createJobCgroup, inCgroup } from "../../src/workspace/sandbox/cgroup.ts";
import {
  cgroupSupport,
  ownCgroups,
  tcpCeilingMb,
} from "../../src/workspace/sandbox/cgroup-support.ts";
import { waitUntil } from "./helpers.ts";

const mountLine = (id: number, root: string, point: string, type: string, options: string) =>
  `${id} 1 0:${id} ${root} ${point} rw,relatime shared:${id} - ${type} ${type} rw,${options}`;

describe("the worker's own cgroups", () => {
  it("finds v1 controllers and the v2 hierarchy of a hybrid host", () => {
    const procCgroup = ["8:pids:/", "4:memory:/process_api/abc", "1:cpu,cpuacct:/", "0::/"].join(
      "\n",
    );
    const mountInfo = [
      mountLine(32, "/", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "cpu,cpuacct"),
      mountLine(35, "/", "/sys/fs/cgroup/memory", "cgroup", "memory"),
      mountLine(39, "/", "/sys/fs/cgroup/pids", "cgroup", "pids"),
      mountLine(41, "/", "/sys/fs/cgroup/unified", "cgroup2", "nsdelegate"),
    ].join("\n");
    expect(ownCgroups(procCgroup, mountInfo)).toEqual({
      v2: "/sys/fs/cgroup/unified",
      v1: { memory: "/sys/fs/cgroup/memory/process_api/abc", pids: "/sys/fs/cgroup/pids" },
    });
  });

  it("finds a v2-only host's cgroup below a mount of part of the hierarchy", () => {
    const mountInfo = mountLine(30, "/kubepods/pod1", "/sys/fs/cgroup", "cgroup2", "nsdelegate");
    expect(ownCgroups("0::/kubepods/pod1/worker\n", mountInfo)).toEqual({
      v2: "/sys/fs/cgroup/worker",
      v1: {},
    });
  });

  it("finds nothing a mount does not show", () => {
    const mountInfo = mountLine(30, "/other", "/sys/fs/cgroup", "cgroup2", "nsdelegate");
    expect(ownCgroups("0::/kubepods/pod1\n", mountInfo)).toEqual({ v1: {} });
  });
});

describe("the ceiling of a job's TCP buffers on cgroup v1", () => {
  it("is a quarter of the host's TCP memory pressure threshold, and none where it says nothing", () => {
    // 383,869 pages of 4 KiB: 1,499 MB.
    expect(tcpCeilingMb("287901\t383869\t575802\n")).toBe(374);
    expect(tcpCeilingMb("")).toBeUndefined();
  });
});

const found = await cgroupSupport();

describe("a job's cgroup", () => {
  it("kills what still runs in it when removed", async ({ skip }) => {
    skip(!found.memory || !found.pids, `this machine cannot: ${JSON.stringify(found.problems)}`);
    const cgroup = await createJobCgroup({ memoryMb: 64, processes: 16 }, found);
    if (!cgroup) throw new Error("no cgroup was made");
    const dirs = cgroup.procsFiles.map((file) => dirname(file));
    const started = inCgroup(cgroup, "sleep", ["30"]);
    const sleeper = launch({ ...started, cwd: "/", env: { PATH: "/usr/bin:/bin" }, group: true });
    expect(await waitUntil(async () => (await cgroup.pids()).length > 0)).toBe(true);
    await cgroup.remove();
    expect(await sleeper.done).toEqual({ code: null, signal: "SIGKILL" });
    for (const dir of dirs) await expect(stat(dir)).rejects.toThrow(/ENOENT/);
  });
});
