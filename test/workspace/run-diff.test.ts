// The diff a job's second look reads (run-diff.ts): the run's work, bundled in the workspace, diffed
// by the worker's git in the mirror, whatever the checkout's own git config says.
import { execFileSync } from "node:child_process";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { diffRunWork } from "../../src/workspace/git/run-diff.ts";
import { saveRunWork } from "../../src/workspace/git/turn-bundle.ts";
import { makeRepo, type TestRepo } from "../agent/setup.ts";

let repo: TestRepo;
let mirror = "";
let base = "";

beforeEach(async () => {
  repo = await makeRepo({ "value.txt": "broken\n" });
  base = (await repo.git("rev-parse", "HEAD")).trim();
  mirror = `${repo.root}-mirror.git`;
  execFileSync("git", ["clone", "-q", "--bare", repo.root, mirror]);
});

afterEach(async () => {
  await rm(mirror, { recursive: true, force: true });
  await repo.cleanup();
});

describe("the diff of a run's work", () => {
  it("is git's own, committed and uncommitted work alike, though the checkout sets up an external diff", async () => {
    await repo.git("config", "diff.external", "sh -c 'echo nothing to see'");
    await writeFile(join(repo.root, "value.txt"), "fixed\n");
    await repo.git("commit", "-qam", "fix");
    await writeFile(join(repo.root, "debug.sh"), 'echo "DEBUG"\n');
    const bundle = await saveRunWork(repo.workspace, base);

    const diff = await diffRunWork({
      mirror,
      bundle: bundle as Buffer,
      baseSha: base,
      maxBytes: 10_000,
    });

    expect(diff.cut).toBe(false);
    expect(diff.text.replace(/index \w+\.\.\w+/g, "index …")).toMatchInlineSnapshot(`
      "diff --git a/debug.sh b/debug.sh
      new file mode 100644
      index …
      --- /dev/null
      +++ b/debug.sh
      @@ -0,0 +1 @@
      +echo "DEBUG"
      diff --git a/value.txt b/value.txt
      index … 100644
      --- a/value.txt
      +++ b/value.txt
      @@ -1 +1 @@
      -broken
      +fixed
      "
    `);
    expect(diff.bytes).toBe(Buffer.byteLength(diff.text));
  });

  it("is cut at the cap, saying how long it was", async () => {
    await writeFile(join(repo.root, "big.txt"), `${"line\n".repeat(1000)}`);
    const bundle = await saveRunWork(repo.workspace, base);

    const diff = await diffRunWork({
      mirror,
      bundle: bundle as Buffer,
      baseSha: base,
      maxBytes: 100,
    });

    expect(diff).toMatchObject({
      cut: true,
      text: expect.stringMatching(/^diff --git a\/big.txt/),
    });
    expect(diff.text).toHaveLength(100);
    expect(diff.bytes).toBeGreaterThan(5000);
  });
});
