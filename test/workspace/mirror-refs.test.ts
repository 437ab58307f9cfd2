// The mirror's refs are read from its files while maintenance (`pack-refs --prune`), in this
// process or another, may pack them: a branch must never go missing in between. A CLI run that
// continued a conversation once started its branch afresh this way, and replaced the first turn.
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it, vi } from "vitest";
import { mirrorRefs } from "../../src/workspace/git/mirror.ts";

/** Set to a mirror path: its refs are packed just before they are next listed. */
let packBeforeListing: string | undefined;

vi.mock("node:fs/promises", async (original) => {
  const fs = await original<typeof import("node:fs/promises")>();
  const readdir: typeof fs.readdir = ((path: string, options: never) => {
    const mirror = packBeforeListing;
    if (mirror !== undefined && path === join(mirror, "refs/heads")) {
      packBeforeListing = undefined;
      // Synchronous, so it lands between whatever the reader started before and after this.
      execFileSync("git", ["pack-refs", "--all", "--prune"], { cwd: mirror });
    }
    return fs.readdir(path, options);
  }) as typeof fs.readdir;
  return { ...fs, readdir };
});

const root = await mkdtemp(join(tmpdir(), "vmpilot-mirror-refs-"));
afterAll(() => rm(root, { recursive: true, force: true }));

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, encoding: "utf8" }).trim();
}

it("sees every branch while its loose refs are being packed", async () => {
  const path = join(root, "mirror.git");
  git(root, "init", "-q", "--bare", "-b", "main", path);
  const tree = git(path, "hash-object", "-w", "-t", "tree", "/dev/null");
  const commit = execFileSync("git", ["commit-tree", tree, "-m", "first"], {
    cwd: path,
    encoding: "utf8",
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@t",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@t",
    },
  }).trim();
  git(path, "update-ref", "refs/heads/main", commit);
  git(path, "update-ref", "refs/heads/vmpilot/make-add-add", commit);

  packBeforeListing = path;
  const { heads } = await mirrorRefs({ path, url: "file:///mirror" });

  expect(packBeforeListing).toBeUndefined();
  expect(Object.fromEntries(heads)).toEqual({ main: commit, "vmpilot/make-add-add": commit });
});
