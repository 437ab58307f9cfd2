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
