import { execFileSync, fork } from "node:child_process";
import { once } from "node:events";
import {
  mkdtemp,
  readdir,
  readFile,
  readlink,
  realpath,
  rm,
  stat,
  utimes,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { prepareCheckout } from "../../src/workspace/git/checkout.ts";
import { authEnv, cleanRepoUrl, validateBranchName } from "../../src/workspace/git/git.ts";
import { maintainMirror, syncMirror } from "../../src/workspace/git/mirror.ts";
import { sparesSettled } from "../../src/workspace/git/spares.ts";
import { createSandboxWorkspace } from "../../src/workspace/sandbox/sandbox.ts";
import { type GitHttpServer, startGitHttpServer } from "../helpers/git-http-server.ts";
import { TYPESCRIPT_FLAGS } from "../helpers/typescript.ts";
import { commitFile, recordingLogger } from "./helpers.ts";

const TOKEN = "ghs_checkoutTestToken0123456789";

let base: string;
let dataDir: string;
let served: string;
let server: GitHttpServer;

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, encoding: "utf8" }).trim();
}

/** Every file under `dir`, as bytes, for grepping. */
async function allFiles(dir: string): Promise<{ path: string; data: Buffer }[]> {
  const out: { path: string; data: Buffer }[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out.push({ path, data: await readFile(path) });
  }
  return out;
}

const secretForms = [TOKEN, Buffer.from(`x-access-token:${TOKEN}`).toString("base64")];

async function filesContainingToken(dir: string): Promise<string[]> {
  const files = await allFiles(dir);
  return files.filter((f) => secretForms.some((s) => f.data.includes(s))).map((f) => f.path);
}

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-checkout-")));
  dataDir = join(base, "data");
  served = join(base, "served");
  const repo = join(served, "acme", "app");
  execFileSync("git", ["init", "-q", "-b", "main", repo]);
  commitFile(repo, "README.md", "hello\n");
  server = await startGitHttpServer({ projectRoot: served, token: TOKEN });
});

afterAll(async () => {
  await server.close();
  await rm(base, { recursive: true, force: true });
});

describe("prepareCheckout", () => {
  it("checks out a new branch over authenticated HTTP and writes no token anywhere", async () => {
    const dest = join(base, "work", "job-1");
    const checkout = await prepareCheckout({
      dataDir,
      repo: server.url("acme/app"),
      auth: { token: TOKEN },
      dest,
      branch: "vmpilot/issue-1",
    });
    expect(server.accepted).toBeGreaterThan(0);
    expect(checkout.baseBranch).toBe("main");
    expect(git(dest, "branch", "--show-current")).toBe("vmpilot/issue-1");
    expect(git(dest, "remote", "get-url", "origin")).toBe(server.url("acme/app"));
    expect(await readFile(join(dest, "README.md"), "utf8")).toBe("hello\n");
    expect(await readFile(join(dest, ".git", "config"), "utf8")).not.toContain(TOKEN);
    expect(await filesContainingToken(dest)).toEqual([]);
    expect(await filesContainingToken(checkout.mirror)).toEqual([]);
  });

  it("starts at a fork's pull request head, which only refs/pull/<n>/head holds, with no token written", async () => {
    const repo = join(served, "acme", "app");
    commitFile(repo, "fork.txt", "from a fork\n");
    const head = git(repo, "rev-parse", "HEAD");
    git(repo, "update-ref", "refs/pull/3/head", head);
    git(repo, "reset", "-q", "--hard", "HEAD^");
    const dest = join(base, "work", "pull-3");
    const checkout = await prepareCheckout({
      dataDir,
      repo: server.url("acme/app"),
      auth: { token: TOKEN },
      dest,
      branch: "vmpilot/job-3",
      pullRequest: 3,
    });
    expect(checkout).toMatchObject({ baseSha: head, branch: "vmpilot/job-3", continued: false });
    expect(git(dest, "rev-parse", "HEAD")).toBe(head);
    expect(git(dest, "branch", "--show-current")).toBe("vmpilot/job-3");
    expect(await readFile(join(dest, "fork.txt"), "utf8")).toBe("from a fork\n");
    // The mirror keeps it under its own ref, no branch.
    expect(git(checkout.mirror, "rev-parse", "refs/pull/3/head")).toBe(head);
    expect(git(checkout.mirror, "branch", "--contains", head)).toBe("");
    expect(await filesContainingToken(dest)).toEqual([]);
    expect(await filesContainingToken(checkout.mirror)).toEqual([]);
  });

  it("refuses without credentials", async () => {
    await expect(
      prepareCheckout({
        dataDir: join(base, "other-data"),
        repo: server.url("acme/app"),
        dest: join(base, "work", "no-auth"),
        branch: "x",
      }),
    ).rejects.toThrow();
    expect(server.refused).toBeGreaterThan(0);
  });

  it("takes credentials out of the URL and refreshes a warm mirror", async () => {
    commitFile(join(served, "acme", "app"), "CHANGELOG.md", "v2\n");
    const withToken = server.url("acme/app").replace("http://", `http://x-access-token:${TOKEN}@`);
    const dest = join(base, "work", "job-2");
    const checkout = await prepareCheckout({ dataDir, repo: withToken, dest, branch: "job-2" });
    expect(checkout.url).toBe(server.url("acme/app"));
    expect(await readFile(join(dest, "CHANGELOG.md"), "utf8")).toBe("v2\n");
    expect(await filesContainingToken(dest)).toEqual([]);
    expect(await filesContainingToken(checkout.mirror)).toEqual([]);
  });

  it("serializes concurrent syncs of one mirror", async () => {
    const repo = server.url("acme/app");
    const data = join(base, "concurrent-data");
    const results = await Promise.all(
      [1, 2, 3].map(() => syncMirror(data, repo, { token: TOKEN })),
    );
    expect(new Set(results.map((r) => r.path)).size).toBe(1);
    expect(await readdir(join(data, "mirrors"))).toHaveLength(1);
  });

  it("shares a mirror with another worker process on the same data dir", async () => {
    const other = fork(fileURLToPath(new URL("./fixtures/sync-mirror.ts", import.meta.url)), {
      execArgv: TYPESCRIPT_FLAGS,
    });
    onTestFinished(() => {
      other.kill();
    });
    await once(other, "message");
    const source = join(served, "acme", "shared");
    execFileSync("git", ["init", "-q", "-b", "main", source]);
    commitFile(source, "README.md", "shared\n");
    const ask = {
      dataDir: join(base, "shared-data"),
      repo: server.url("acme/shared"),
      token: TOKEN,
    };
    const there = () =>
      once(other, "message").then(([reply]) => reply as { path?: string; error?: string });
    // Both find no mirror and clone one; then both fetch a new commit at the same moment.
    for (const round of ["new mirror", "fetch"]) {
      if (round === "fetch") commitFile(source, "SHARED.md", "fetched twice at once\n");
      const theirs = there();
      other.send(ask);
      const [mine, reply] = await Promise.all([
        syncMirror(ask.dataDir, ask.repo, { token: TOKEN }),
        theirs,
      ]);
      expect(reply).toEqual({ path: mine.path });
      expect(git(mine.path, "rev-parse", "main")).toBe(git(source, "rev-parse", "HEAD"));
    }
    expect(
      (await readdir(join(ask.dataDir, "mirrors"))).filter((n) => n.includes("partial")),
    ).toEqual([]);
  });

  it("repacks a mirror whose objects piled up, keeping those no branch reaches", async () => {
    const mirror = await syncMirror(join(base, "repack-data"), server.url("acme/app"), {
      token: TOKEN,
    });
    const orphan = execFileSync("git", ["hash-object", "-w", "--stdin"], {
      cwd: mirror.path,
      input: "left behind by a force-push\n",
      encoding: "utf8",
    }).trim();
    const loose = () => git(mirror.path, "count-objects", "-v").match(/^count: (\d+)$/m)?.[1];
    expect(Number(loose())).toBeGreaterThan(0);
    expect(await maintainMirror(mirror.path)).toBe(false);
    expect(await maintainMirror(mirror.path, { looseObjects: 0, packs: 100 })).toBe(true);
    expect(loose()).toBe("0");
    expect(git(mirror.path, "cat-file", "-p", orphan)).toBe("left behind by a force-push");
  });

  it("keeps spares only for the most recently used repositories", async () => {
    const data = join(base, "evict-data");
    const names = ["evict-a", "evict-b"];
    for (const name of names) {
      const repo = join(served, "acme", name);
      execFileSync("git", ["init", "-q", "-b", "main", repo]);
      commitFile(repo, "README.md", `${name}\n`);
      await prepareCheckout({
        dataDir: data,
        repo: server.url(`acme/${name}`),
        auth: { token: TOKEN },
        dest: join(base, "work", name),
        branch: "job",
        keepSpare: true,
        spareLimit: 1,
      });
      await sparesSettled();
    }
    const ready = async (name: string) => {
      const dir = (await readdir(join(data, "spares"))).find((d) => d.includes(name)) as string;
      return (await readdir(join(data, "spares", dir))).filter((n) => !n.startsWith("."));
    };
    expect(await ready("evict-a")).toEqual([]);
    expect(await ready("evict-b")).toHaveLength(1);
  });

  it("claims a spare checkout and moves it to the current base", async () => {
    const source = join(served, "acme", "app");
    const spareData = join(base, "spare-data");
    const repo = server.url("acme/app");
    const auth = { token: TOKEN };
    const logger = recordingLogger();
    const first = await prepareCheckout({
      dataDir: spareData,
      repo,
      auth,
      dest: join(base, "work", "spare-1"),
      branch: "spare-1",
      keepSpare: true,
      logger,
    });
    expect(first.fromSpare).toBe(false);
    await sparesSettled();
    commitFile(source, "LATEST.md", "newer than the spare\n");
    const dest = join(base, "work", "spare-2");
    const second = await prepareCheckout({
      dataDir: spareData,
      repo,
      auth,
      dest,
      branch: "spare-2",
      keepSpare: true,
      logger,
    });
    await sparesSettled();
    expect(second.fromSpare).toBe(true);
    expect(second.baseSha).toBe(git(source, "rev-parse", "HEAD"));
    expect(git(dest, "branch", "--show-current")).toBe("spare-2");
    expect(git(dest, "status", "--porcelain")).toBe("");
    expect(git(dest, "remote", "get-url", "origin")).toBe(repo);
    expect(await readFile(join(dest, "LATEST.md"), "utf8")).toBe("newer than the spare\n");
    expect(await filesContainingToken(dest)).toEqual([]);
    expect(await filesContainingToken(join(spareData))).toEqual([]);
    expect(logger.lines.filter((l) => l.level === "warn")).toEqual([]);
  });

  it("claims a spare without reading its files again: the split index holds only what changed", async () => {
    const source = join(served, "acme", "many");
    execFileSync("git", ["init", "-q", "-b", "main", source]);
    for (let i = 0; i < 100; i++) await writeFile(join(source, `file-${i}.txt`), `${i}\n`);
    commitFile(source, "README.md", "many files\n");
    const options = {
      dataDir: join(base, "many-data"),
      repo: server.url("acme/many"),
      auth: { token: TOKEN },
      keepSpare: true,
    };
    await prepareCheckout({ ...options, dest: join(base, "work", "many-1"), branch: "m-1" });
    await sparesSettled();
    // The spare's index as git sees it when read-tree wrote it in the same second as the files:
    // no older than any of them, so each is "racily clean" to the next git that writes it.
    const spares = join(options.dataDir, "spares");
    const [mirrorDir] = await readdir(spares);
    const [spare] = await readdir(join(spares, mirrorDir as string));
    const past = new Date(Date.now() - 10_000);
    await utimes(join(spares, mirrorDir as string, spare as string, ".git", "index"), past, past);
    commitFile(source, "NEXT.md", "one more\n");

    const dest = join(base, "work", "many-2");
    const later = () => Date.now() + 2_000;
    const checkout = await prepareCheckout({ ...options, dest, branch: "m-2", now: later });
    await sparesSettled();
    expect(checkout.fromSpare).toBe(true);
    const dotGit = await readdir(join(dest, ".git"));
    const shared = dotGit.filter((name) => name.startsWith("sharedindex."));
    // No new shared index, and a split index of the one new path rather than of all 101 files.
    expect(shared).toHaveLength(1);
    const sharedSize = (await stat(join(dest, ".git", shared[0] as string))).size;
    expect((await stat(join(dest, ".git", "index"))).size).toBeLessThan(sharedSize / 10);
    expect(git(dest, "ls-files", "NEXT.md")).toBe("NEXT.md");
    expect(git(dest, "status", "--porcelain")).toBe("");
  });

  it("moves a spare across deletions, file/directory swaps, mode changes and odd names", async () => {
    const repo = join(served, "acme", "shapes");
    const sh = (script: string) =>
      execFileSync("sh", ["-c", `${script} && git add -A && git commit -qm change`], {
        cwd: repo,
        env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@example.com" },
      });
    execFileSync("git", ["init", "-q", "-b", "main", repo]);
    git(repo, "config", "user.name", "t");
    git(repo, "config", "user.email", "t@example.com");
    sh(
      "echo keep > keep.txt && echo gone > gone.txt && echo file > swap && mkdir dir && " +
        "echo inner > dir/inner.txt && echo 'echo hi' > tool.sh && echo one > 'odd *[x].txt'",
    );
    git(repo, "branch", "old-feature");
    const options = {
      dataDir: join(base, "shapes-data"),
      repo: server.url("acme/shapes"),
      auth: { token: TOKEN },
      keepSpare: true,
    };
    await prepareCheckout({ ...options, dest: join(base, "work", "shapes-1"), branch: "s-1" });
    await sparesSettled();
    sh(
      "rm gone.txt swap dir/inner.txt && mkdir swap && echo child > swap/child.txt && " +
        "rmdir dir && echo now-a-file > dir && chmod +x tool.sh && echo two > 'odd *[x].txt' && " +
        "echo '*' > '*' && ln -s keep.txt link",
    );
    git(repo, "branch", "-D", "old-feature");
    git(repo, "branch", "new-feature");

    const dest = join(base, "work", "shapes-2");
    const checkout = await prepareCheckout({ ...options, dest, branch: "s-2" });
    await sparesSettled();
    expect(checkout.fromSpare).toBe(true);
    expect(checkout.baseSha).toBe(git(repo, "rev-parse", "HEAD"));
    expect(git(dest, "branch", "--show-current")).toBe("s-2");
    expect(git(dest, "rev-parse", "main", "s-2")).toBe(`${checkout.baseSha}\n${checkout.baseSha}`);
    expect(git(dest, "status", "--porcelain", "--ignored", "--untracked-files=all")).toBe("");
    const listing = (dir: string) =>
      git(dir, "ls-files", "-s", "--full-name").split("\n").sort().join("\n");
    expect(listing(dest)).toBe(listing(repo));
    expect(await readFile(join(dest, "swap", "child.txt"), "utf8")).toBe("child\n");
    expect(await readFile(join(dest, "dir"), "utf8")).toBe("now-a-file\n");
    expect(await readFile(join(dest, "odd *[x].txt"), "utf8")).toBe("two\n");
    expect((await stat(join(dest, "tool.sh"))).mode & 0o111).not.toBe(0);
    expect(await readlink(join(dest, "link"))).toBe("keep.txt");
    expect(git(dest, "for-each-ref", "--format=%(refname)", "refs/remotes/origin/")).toBe(
      ["HEAD", "main", "new-feature"].map((b) => `refs/remotes/origin/${b}`).join("\n"),
    );
  });

  it("continues an existing branch of the remote, from a fresh clone or a spare", async () => {
    const source = join(served, "acme", "app");
    git(source, "checkout", "-qb", "vmpilot/issue-7-go-on");
    commitFile(source, "WIP.md", "work in progress\n");
    const tip = git(source, "rev-parse", "HEAD");
    git(source, "checkout", "-q", "main");
    const data = join(base, "existing-data");
    const options = {
      dataDir: data,
      repo: server.url("acme/app"),
      auth: { token: TOKEN },
      branch: "vmpilot/issue-7-go-on",
      existingBranch: true,
      keepSpare: true,
      logger: recordingLogger(),
    };
    for (const name of ["existing-1", "existing-2"]) {
      const dest = join(base, "work", name);
      const checkout = await prepareCheckout({ ...options, dest });
      await sparesSettled();
      expect(checkout.fromSpare).toBe(name === "existing-2");
      expect(checkout).toMatchObject({
        branch: "vmpilot/issue-7-go-on",
        baseBranch: "vmpilot/issue-7-go-on",
        baseSha: tip,
      });
      expect(git(dest, "branch", "--show-current")).toBe("vmpilot/issue-7-go-on");
      expect(git(dest, "status", "--porcelain")).toBe("");
      expect(await readFile(join(dest, "WIP.md"), "utf8")).toBe("work in progress\n");
    }
    await expect(
      prepareCheckout({ ...options, branch: "vmpilot/missing", dest: join(base, "work", "none") }),
    ).rejects.toThrow(/vmpilot\/missing/);

    const present = await prepareCheckout({
      ...options,
      existingBranch: "if-present",
      keepSpare: false,
      dest: join(base, "work", "if-present"),
    });
    expect(present).toMatchObject({ continued: true, baseSha: tip });
    const absent = await prepareCheckout({
      ...options,
      existingBranch: "if-present",
      keepSpare: false,
      branch: "vmpilot/issue-8-new",
      dest: join(base, "work", "if-absent"),
    });
    expect(absent).toMatchObject({ continued: false, baseBranch: "main" });
    expect(git(join(base, "work", "if-absent"), "branch", "--show-current")).toBe(
      "vmpilot/issue-8-new",
    );
  });

  it("carries the mirror's tags, annotated ones included, and origin's HEAD into a checkout", async () => {
    const source = join(served, "acme", "tagged");
    execFileSync("git", ["init", "-q", "-b", "main", source]);
    commitFile(source, "README.md", "v1\n");
    git(source, "tag", "light");
    git(
      source,
      "-c",
      "user.name=t",
      "-c",
      "user.email=t@example.com",
      "tag",
      "-a",
      "v1",
      "-m",
      "one",
    );
    const options = {
      dataDir: join(base, "tagged-data"),
      repo: server.url("acme/tagged"),
      auth: { token: TOKEN },
      keepSpare: true,
    };
    for (const name of ["tagged-1", "tagged-2"]) {
      const dest = join(base, "work", name);
      const checkout = await prepareCheckout({ ...options, dest, branch: name });
      await sparesSettled();
      expect(checkout.fromSpare).toBe(name === "tagged-2");
      expect(git(dest, "describe", "--tags", "--exact-match")).toMatch(/^(v1|light)$/);
      expect(git(dest, "rev-parse", "v1^{commit}", "light")).toBe(
        `${checkout.baseSha}\n${checkout.baseSha}`,
      );
      expect(git(dest, "symbolic-ref", "refs/remotes/origin/HEAD")).toBe(
        "refs/remotes/origin/main",
      );
      expect(git(dest, "status", "--porcelain")).toBe("");
    }
  });

  it("works from a local path, and git works inside the sandbox on the shared clone", async () => {
    const dest = join(base, "work", "local");
    const source = join(served, "acme", "app");
    const checkout = await prepareCheckout({ dataDir, repo: source, dest, branch: "local-job" });
    expect(checkout.url).toBe(source);
    const workspace = await createSandboxWorkspace(dest, { dataDir, logger: recordingLogger() });
    try {
      await writeFile(join(dest, "new.txt"), "x");
      const result = await workspace.exec("git log --format=%s && git status --porcelain");
      expect(result.stderr).toBe("");
      expect(result.stdout).toBe("LATEST.md\nCHANGELOG.md\nREADME.md\n?? new.txt\n");
    } finally {
      await workspace.dispose();
    }
  });
});

describe("git helpers", () => {
  it("sends credentials only as an extra header in the environment", () => {
    expect(authEnv({ token: "t", scheme: "bearer" })).toEqual({
      GIT_CONFIG_COUNT: "1",
      GIT_CONFIG_KEY_0: "http.extraHeader",
      GIT_CONFIG_VALUE_0: "Authorization: Bearer t",
    });
    expect(cleanRepoUrl("https://u:p%40ss@github.com/a/b.git")).toEqual({
      url: "https://github.com/a/b.git",
      auth: { token: "p@ss", username: "u" },
    });
    expect(cleanRepoUrl("file:///srv/repo").url).toBe("file:///srv/repo");
  });

  it.each(["-rf", "a..b", "a b", "../x", ".hidden", "x.lock", "x/", "a//b", "x;rm", ""])(
    "rejects the branch name %j",
    (name) => {
      expect(() => validateBranchName(name)).toThrow(/Invalid branch name/);
    },
  );

  it("accepts ordinary branch names", () => {
    expect(validateBranchName("vmpilot/issue-42_fix.v2")).toBe("vmpilot/issue-42_fix.v2");
  });
});
