// A finished run's work as a bundle (saveRunWork) and back (restoreRunWork): its commits and what it
// left uncommitted, a merge in progress included, into another checkout of the same repository.
import { execFileSync } from "node:child_process";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/log/logger.ts";
import { restoreRunWork, saveRunWork } from "../../src/workspace/git/turn-bundle.ts";
import { createHostWorkspace } from "../../src/workspace/sandbox/host.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { makeRepo, type TestRepo } from "../agent/setup.ts";

let ran: TestRepo;
/** A checkout of the repository as it was before the run: where an attempt redone starts. */
let redo: { root: string; workspace: Workspace; git(...args: string[]): string };
let base = "";

const gitIn =
  (root: string) =>
  (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
      cwd: root,
      encoding: "utf8",
    }).trim();

beforeEach(async () => {
  ran = await makeRepo({ "README.md": "hello\n", ".gitignore": "built/\n" });
  base = (await ran.git("rev-parse", "HEAD")).trim();
  const root = `${ran.root}-redo`;
  execFileSync("git", ["clone", "-q", ran.root, root]);
  redo = { root, workspace: createHostWorkspace(root, { logger: silentLogger }), git: gitIn(root) };
});

afterEach(async () => {
  await redo.workspace.dispose();
  await rm(redo.root, { recursive: true, force: true });
  await ran.cleanup();
});

describe("a run's work as a bundle", () => {
  it("comes back as the run left it: its commit, its uncommitted and new files; the run's own checkout untouched", async () => {
    const git = gitIn(ran.root);
    await writeFile(join(ran.root, "a.txt"), "committed by the agent\n");
    git("add", "a.txt");
    git("commit", "-qm", "agent's own commit");
    const head = git("rev-parse", "HEAD");
    await writeFile(join(ran.root, "README.md"), "changed\n");
    await writeFile(join(ran.root, "new.txt"), "untracked\n");
    const status = git("status", "--porcelain");

    const bundle = await saveRunWork(ran.workspace, base);
    expect(bundle).not.toBeNull();
    expect(git("status", "--porcelain")).toBe(status);
    expect(git("rev-parse", "HEAD")).toBe(head);
    expect(git("for-each-ref", "refs/vmpilot")).toBe("");

    const placed = await restoreRunWork(
      redo.workspace,
      { bundle: bundle as Buffer, baseSha: base },
      false,
    );
    expect(placed).toBe("restored");
    expect(redo.git("rev-parse", "HEAD")).toBe(head);
    expect(redo.git("status", "--porcelain")).toBe(status);
    expect(await readFile(join(redo.root, "README.md"), "utf8")).toBe("changed\n");
    expect(await readFile(join(redo.root, "new.txt"), "utf8")).toBe("untracked\n");
  });

  it("is nothing when the run changed nothing, and an ignored file is no change", async () => {
    await mkdir(join(ran.root, "built"));
    await writeFile(join(ran.root, "built", "out.js"), "x");
    expect(await saveRunWork(ran.workspace, base)).toBeNull();
  });

  it("finds the work on a branch that holds it, and leaves a branch someone moved alone unless it is new", async () => {
    await writeFile(join(ran.root, "README.md"), "changed\n");
    const bundle = (await saveRunWork(ran.workspace, base)) as Buffer;
    const run = { bundle, baseSha: base };

    // Pushed: a commit on the base whose tree is the work's.
    await writeFile(join(redo.root, "README.md"), "changed\n");
    redo.git("commit", "-qam", "the work, as the first attempt pushed it");
    const pushed = redo.git("rev-parse", "HEAD");
    expect(await restoreRunWork(redo.workspace, run, false)).toBe("held");
    expect(redo.git("rev-parse", "HEAD")).toBe(pushed);

    // Someone's commit on top: not the work's tree any more.
    await writeFile(join(redo.root, "theirs.txt"), "theirs\n");
    redo.git("add", "theirs.txt");
    redo.git("commit", "-qm", "someone else's");
    const theirs = redo.git("rev-parse", "HEAD");
    expect(await restoreRunWork(redo.workspace, run, false)).toBe("moved");
    expect(redo.git("rev-parse", "HEAD")).toBe(theirs);
    expect(redo.git("status", "--porcelain")).toBe("");

    // A branch the job creates from a default branch that moved on: the work goes on its own base.
    expect(await restoreRunWork(redo.workspace, run, true)).toBe("restored");
    expect(redo.git("rev-parse", "HEAD")).toBe(base);
    expect(redo.git("status", "--porcelain")).toBe("M README.md");
  });

  it("brings a merge in progress back as one, so that committing it makes the merge", async () => {
    const git = gitIn(ran.root);
    git("checkout", "-qb", "other");
    await writeFile(join(ran.root, "README.md"), "theirs\n");
    git("commit", "-qam", "theirs");
    const other = git("rev-parse", "HEAD");
    git("checkout", "-q", "main");
    await writeFile(join(ran.root, "README.md"), "ours\n");
    git("commit", "-qam", "ours");
    const ours = git("rev-parse", "HEAD");
    // The redo's checkout is the branch as the run found it, before the merge began.
    redo.git("fetch", "-q", "origin", "main");
    redo.git("reset", "-q", "--hard", ours);
    expect(() => git("merge", "-q", "--no-ff", "--no-commit", other)).toThrow();
    await writeFile(join(ran.root, "README.md"), "both\n");

    const bundle = (await saveRunWork(ran.workspace, ours)) as Buffer;
    expect(git("rev-parse", "MERGE_HEAD")).toBe(other);
    expect(await restoreRunWork(redo.workspace, { bundle, baseSha: ours }, false)).toBe("restored");
    expect(redo.git("rev-parse", "MERGE_HEAD")).toBe(other);
    redo.git("commit", "-qam", "merge");
    expect(redo.git("log", "-1", "--format=%P")).toBe(`${ours} ${other}`);
    expect(await readFile(join(redo.root, "README.md"), "utf8")).toBe("both\n");
  });
});
