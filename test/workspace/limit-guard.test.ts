import { afterEach, expect, it, vi } from "vitest";
import type { DiskMeter } from "../../src/workspace/sandbox/disk-meter.ts";
import { FAST_CHECK_MS, limitGuard } from "../../src/workspace/sandbox/limit-guard.ts";
import type { ExecResult } from "../../src/workspace/types.ts";
import { recordingLogger } from "./helpers.ts";

const MIB = 1024 * 1024;
const limits = { processes: 64, memoryMb: 512, fileMb: 16, diskMb: 8 };
const ended: ExecResult = {
  stdout: "",
  stderr: "",
  exitCode: null,
  timedOut: false,
  truncated: false,
  fullStdout: "",
  fullStderr: "",
  durationMs: 0,
};

afterEach(() => {
  vi.useRealTimers();
});

/** A disk the test fills by hand: the checkout's filesystem as a whole, and what `du` finds. */
function fakeDisk() {
  const disk = { hostBytes: 500 * MIB, usedMb: 2, measured: 0 };
  const meter: DiskMeter = {
    async usedMb() {
      disk.measured++;
      return disk.usedMb;
    },
    hostUsedBytes: async () => disk.hostBytes,
  };
  return { disk, meter };
}

/** A command that runs until the guard stops it. */
function untilStopped(signal: AbortSignal): Promise<ExecResult> {
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(ended)));
}

it("stops a fast writer within a tenth of a second, not at the next full measurement", async () => {
  vi.useFakeTimers();
  const { disk, meter } = fakeDisk();
  const guarded = limitGuard(meter, limits, recordingLogger());
  let stop: AbortSignal | undefined;
  const running = guarded((signal) => {
    stop = signal;
    return untilStopped(signal);
  });
  await vi.advanceTimersByTimeAsync(0);
  disk.hostBytes += 20 * MIB;
  disk.usedMb += 20;
  await vi.advanceTimersByTimeAsync(FAST_CHECK_MS);
  expect(stop?.aborted).toBe(true);
  expect((await running).stderr).toContain(
    "uses 22 MB of disk, over its limit of 8 MB (SANDBOX_MAX_DISK_MB); the command was stopped",
  );
});

it("runs no full measurement while the filesystem leaves room, until its second is up", async () => {
  vi.useFakeTimers();
  const { disk, meter } = fakeDisk();
  const guarded = limitGuard(meter, limits, recordingLogger());
  const stop = new AbortController();
  const running = guarded(() => untilStopped(stop.signal));
  await vi.advanceTimersByTimeAsync(0);
  const before = disk.measured;
  disk.hostBytes += 3 * MIB;
  await vi.advanceTimersByTimeAsync(FAST_CHECK_MS * 5);
  expect(disk.measured).toBe(before);
  await vi.advanceTimersByTimeAsync(FAST_CHECK_MS * 5);
  expect(disk.measured).toBe(before + 1);
  stop.abort();
  expect((await running).stderr).toBe("");
});

/** A command that writes `mb` to the workspace, of which the filesystem shows `shownMb`. */
function writes(disk: ReturnType<typeof fakeDisk>["disk"], mb: number, shownMb = mb) {
  return async (_signal: AbortSignal, overDisk: boolean) => {
    if (!overDisk) {
      disk.usedMb += mb;
      disk.hostBytes += shownMb * MIB;
    }
    return { ...ended, exitCode: 0 };
  };
}

it("measures no more than a look at the filesystem after a command that changed nothing", async () => {
  const { disk, meter } = fakeDisk();
  const guarded = limitGuard(meter, limits, recordingLogger());
  await guarded(writes(disk, 0));
  await guarded(writes(disk, 0));
  expect(disk.measured).toBe(1);
  await guarded(writes(disk, 1));
  await guarded(writes(disk, 0));
  expect(disk.measured).toBe(2);
});

it("tells the command that took the workspace over the limit, and refuses the next one writes", async () => {
  const { disk, meter } = fakeDisk();
  const guarded = limitGuard(meter, limits, recordingLogger());
  const over = await guarded(writes(disk, 10));
  expect(over.stderr).toContain(
    "uses 12 MB of disk, over its limit of 8 MB (SANDBOX_MAX_DISK_MB); until it is under",
  );
  const next = await guarded(writes(disk, 1));
  expect(next.stderr).toContain("so this command could not write files");
  expect(disk.usedMb).toBe(12);
});

it("refuses the next command writes when files freed elsewhere hid a command's growth", async () => {
  const { disk, meter } = fakeDisk();
  const guarded = limitGuard(meter, limits, recordingLogger());
  // Another job deleted more than this command wrote: the filesystem as a whole shrank.
  const hidden = await guarded(writes(disk, 10, -5));
  expect(hidden.stderr).toBe("");
  disk.hostBytes += MIB;
  const next = await guarded(writes(disk, 1));
  expect(next.stderr).toContain("uses 12 MB of disk, over its limit of 8 MB");
  expect(next.stderr).toContain("so this command could not write files");
});
