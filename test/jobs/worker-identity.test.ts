import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { silentLogger } from "../../src/log/logger.ts";
import { claimWorkerIdentity } from "../../src/roles/worker-identity.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "vmpilot-identity-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

it("keeps the identity across restarts of the worker using a data dir", async () => {
  const first = await claimWorkerIdentity(dir, silentLogger);
  await first.release();
  const again = await claimWorkerIdentity(dir, silentLogger);
  await again.release();
  expect(again.id).toBe(first.id);
});

it("gives a second worker on a held data dir an identity of its own", async () => {
  const first = await claimWorkerIdentity(dir, silentLogger);
  const second = await claimWorkerIdentity(dir, silentLogger);
  await second.release();
  await first.release();
  expect(second.id).not.toBe(first.id);
});

it("refuses a worker-id that is not a regular file, or holds no id", async () => {
  await mkdir(join(dir, "worker-id"));
  await expect(claimWorkerIdentity(dir, silentLogger)).rejects.toThrow("regular file");
  await rm(join(dir, "worker-id"), { recursive: true });
  await writeFile(join(dir, "worker-id"), "not an id");
  await expect(claimWorkerIdentity(dir, silentLogger)).rejects.toThrow("does not hold a worker id");
  // The lock was given back each time: a fixed file is taken up.
  await writeFile(join(dir, "worker-id"), "0b6a5b62-4a3c-4c1e-9f8e-6f1d2c3b4a59");
  const identity = await claimWorkerIdentity(dir, silentLogger);
  await identity.release();
  expect(identity.id).toBe("0b6a5b62-4a3c-4c1e-9f8e-6f1d2c3b4a59");
});
