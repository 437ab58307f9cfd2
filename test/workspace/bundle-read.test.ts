import { execFileSync } from "node:child_process";
import { rm, truncate } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isPermanent } from "../../src/errors.ts";
import { bundleWorkspaceCommits, MAX_BUNDLE_BYTES } from "../../src/workspace/git/publish.ts";
import { FileRefusedError } from "../../src/workspace/read-capped.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { makeRepo, type TestRepo } from "../agent/setup.ts";

let repo: TestRepo;
let base: string;

beforeEach(async () => {
  repo = await makeRepo({ "a.txt": "a\n" });
  base = (await repo.git("rev-parse", "HEAD")).trim();
  await repo.git("commit", "-q", "--allow-empty", "-m", "work");
});

afterEach(async () => {
  await repo.cleanup();
});

/** The workspace as a hostile sandbox leaves it: whatever `git bundle` wrote is swapped by `plant`. */
function swappingBundle(plant: (bundle: string) => Promise<void>): Workspace {
  const bundle = join(repo.root, ".git/vmpilot-publish.bundle");
  return {
    ...repo.workspace,
    async exec(command, options) {
      const result = await repo.workspace.exec(command, options);
      if (command.includes("bundle create")) await plant(bundle);
      return result;
    },
  };
}

describe("reading the bundle the sandbox wrote", () => {
  it("refuses a FIFO in place of the bundle without blocking", async () => {
    const workspace = swappingBundle(async (bundle) => {
      await rm(bundle);
      execFileSync("mkfifo", [bundle]);
    });
    const error = await bundleWorkspaceCommits(workspace, base).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FileRefusedError);
    expect((error as Error).message).toBe(
      ".git/vmpilot-publish.bundle is not a regular file (a FIFO).",
    );
  });

  it("refuses an oversized bundle by its size, unread", async () => {
    const workspace = swappingBundle((bundle) => truncate(bundle, MAX_BUNDLE_BYTES + 1));
    const before = process.memoryUsage().rss;
    const error = await bundleWorkspaceCommits(workspace, base).catch((e: unknown) => e);
    expect((error as Error).message).toBe(
      `.git/vmpilot-publish.bundle is ${MAX_BUNDLE_BYTES + 1} bytes, over the ${MAX_BUNDLE_BYTES}-byte limit.`,
    );
    // Another attempt would make the same bundle: the job fails at once instead of retrying.
    expect(isPermanent(error)).toBe(true);
    expect(process.memoryUsage().rss - before).toBeLessThan(100 * 1024 * 1024);
  });

  it("copies the bundle out as a stream, never reading it into the worker's memory", async () => {
    const workspace: Workspace = {
      ...repo.workspace,
      readFile: () => Promise.reject(new Error("the bundle was read whole")),
    };
    const bundle = await bundleWorkspaceCommits(workspace, base);
    try {
      expect(bundle?.sha).toBe((await repo.git("rev-parse", "HEAD")).trim());
      expect(
        execFileSync("git", ["bundle", "list-heads", bundle?.file ?? ""], { encoding: "utf8" }),
      ).toContain("HEAD");
    } finally {
      if (bundle) await rm(bundle.dir, { recursive: true, force: true });
    }
  });
});
