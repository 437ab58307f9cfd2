import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import {
  chmod,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  realpath,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { prepareCheckout } from "../../src/workspace/git/checkout.ts";
import {
  assertPushAllowed,
  PushRefused,
  publishWorkspace,
} from "../../src/workspace/git/publish.ts";
import { createSandboxWorkspace } from "../../src/workspace/sandbox/sandbox.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { type GitHttpServer, startGitHttpServer } from "../helpers/git-http-server.ts";
import { commitFile } from "./helpers.ts";

const TOKEN = "ghs_publishTestToken0123456789abcdef";
const secretForms = [TOKEN, Buffer.from(`x-access-token:${TOKEN}`).toString("base64")];
const author = { name: "vmpilot[bot]", email: "vmpilot[bot]@users.noreply.github.com" };
const requester = { name: "octocat", email: "583231+octocat@users.noreply.github.com" };

let base: string;
let dataDir: string;
let remote: string;
let server: GitHttpServer;
let jobs = 0;

/** The test looks into checkouts a root worker handed to the sandbox user, as that worker's root. */
function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: {
      PATH: process.env.PATH,
      GIT_CONFIG_COUNT: "1",
      GIT_CONFIG_KEY_0: "safe.directory",
      GIT_CONFIG_VALUE_0: "*",
    },
  }).trim();
}

async function filesContainingToken(dir: string): Promise<string[]> {
  const hits: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const data = await readFile(path);
    if (secretForms.some((s) => data.includes(s))) hits.push(path);
  }
  return hits;
}

async function openJob(branch = `vmpilot/issue-${++jobs}-fix`) {
  const checkout = await prepareCheckout({
    dataDir,
    repo: server.url("acme/app.git"),
    auth: { token: TOKEN },
    dest: join(base, "work", `job-${++jobs}`),
    branch,
  });
  const workspace = await createSandboxWorkspace(checkout.root, { dataDir });
  const publish = (extra: Partial<Parameters<typeof publishWorkspace>[0]> = {}) =>
    publishWorkspace({
      workspace,
      mirror: checkout.mirror,
      url: checkout.url,
      auth: { token: TOKEN },
      baseSha: checkout.baseSha,
      branch,
      defaultBranch: "main",
      commit: { message: "Fix the thing", author, coAuthors: [requester] },
      lease: null,
      ...extra,
    });
  return { checkout, workspace, publish, branch };
}

const workspaces: Workspace[] = [];

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-publish-test-")));
  dataDir = join(base, "data");
  const work = join(base, "seed");
  execFileSync("git", ["init", "-q", "-b", "main", work]);
  commitFile(work, "README.md", "hello\n");
  remote = join(base, "served", "acme", "app.git");
  execFileSync("git", ["clone", "-q", "--bare", work, remote]);
  server = await startGitHttpServer({ projectRoot: join(base, "served"), token: TOKEN });
});

afterAll(async () => {
  await Promise.all(workspaces.map((w) => w.dispose()));
  await server.close();
  await rm(base, { recursive: true, force: true });
});

describe("publishWorkspace", () => {
  it("commits inside the workspace as the bot, co-authored, and pushes with a token that lands nowhere", async () => {
    const job = await openJob();
    workspaces.push(job.workspace);
    await job.workspace.writeFile("src/fix.ts", "export const fixed = true;\n");
    await job.workspace.writeFile("README.md", "hello, fixed\n");
    const result = await job.publish();

    expect(result.pushed).toBe(true);
    expect(result.files).toEqual([
      { status: "M", path: "README.md" },
      { status: "A", path: "src/fix.ts" },
    ]);
    expect(git(remote, "rev-parse", `refs/heads/${job.branch}`)).toBe(result.sha);
    expect(git(remote, "log", "-1", "--format=%an <%ae>|%cn|%B", job.branch)).toBe(
      "vmpilot[bot] <vmpilot[bot]@users.noreply.github.com>|vmpilot[bot]|Fix the thing\n\n" +
        "Co-authored-by: octocat <583231+octocat@users.noreply.github.com>",
    );
    // The mirror keeps no publish ref, and no file anywhere holds the token.
    expect(git(job.checkout.mirror, "for-each-ref", "refs/vmpilot")).toBe("");
    expect(await filesContainingToken(base)).toEqual([]);
    expect(server.accepted).toBeGreaterThan(0);
  });

  it("reports no changes and pushes nothing when the work left none", async () => {
    const job = await openJob();
    workspaces.push(job.workspace);
    const result = await job.publish();
    expect(result).toEqual({ pushed: false, sha: job.checkout.baseSha, files: [] });
    expect(() => git(remote, "rev-parse", "--verify", "-q", `refs/heads/${job.branch}`)).toThrow();
  });

  it("publishes commits the agent made itself, and refuses to clobber a branch that moved", async () => {
    const job = await openJob();
    workspaces.push(job.workspace);
    const made = await job.workspace.exec(
      "echo one > one.txt && git add one.txt && git -c user.name=agent -c user.email=a@b commit -qm 'agent commit'",
    );
    expect(made.exitCode).toBe(0);
    const first = await job.publish();
    expect(first.pushed).toBe(true);
    expect(git(remote, "log", "--format=%s", job.branch)).toBe("agent commit\nREADME.md");

    // A second run expected the branch not to exist yet: the lease refuses.
    const again = await openJob(job.branch.replace("-fix", "-other"));
    workspaces.push(again.workspace);
    await again.workspace.writeFile("two.txt", "two\n");
    await expect(again.publish({ branch: job.branch, lease: null })).rejects.toThrow(
      /stale info|rejected/,
    );
    expect(git(remote, "rev-parse", job.branch)).toBe(first.sha);
  });

  it("never runs the checkout's planted git config or hooks in the worker", async () => {
    const job = await openJob();
    workspaces.push(job.workspace);
    const markers = join(base, "markers");
    await mkdir(markers, { recursive: true });
    const marker = join(markers, "pwned");
    // Each script tries to leave a marker outside the workspace, then lets git carry on.
    const plant = `#!/bin/sh\necho "$0" >> ${marker} 2>/dev/null\nexit 0\n`;
    const gitDir = join(job.checkout.root, ".git");
    await writeFile(join(gitDir, "fsmonitor.sh"), plant);
    await chmod(join(gitDir, "fsmonitor.sh"), 0o755);
    const config = await readFile(join(gitDir, "config"), "utf8");
    await writeFile(
      join(gitDir, "config"),
      `${config}[core]\n\tfsmonitor = ${join(gitDir, "fsmonitor.sh")}\n[filter "evil"]\n\tclean = ${join(gitDir, "fsmonitor.sh")}\n\tsmudge = ${join(gitDir, "fsmonitor.sh")}\n`,
    );
    await writeFile(join(job.checkout.root, ".gitattributes"), "* filter=evil\n");
    for (const hook of [
      "pre-commit",
      "post-commit",
      "pre-push",
      "reference-transaction",
      "post-checkout",
    ]) {
      await writeFile(join(gitDir, "hooks", hook), plant);
      await chmod(join(gitDir, "hooks", hook), 0o755);
    }
    await job.workspace.writeFile("x.txt", "x\n");

    const result = await job.publish();
    expect(result.pushed).toBe(true);
    expect(existsSync(marker)).toBe(false);

    // The trap is armed: the worker's own git in that checkout would have run it.
    git(job.checkout.root, "status");
    expect(existsSync(marker)).toBe(true);
  });

  it("cannot be made to push another repository's history through planted refs and alternates", async () => {
    // Another repository on the worker, at a path an agent could guess.
    const secretWork = join(base, "secret-seed");
    execFileSync("git", ["init", "-q", "-b", "vault", secretWork]);
    commitFile(secretWork, "SECRET.txt", "top secret\n");
    const secret = join(dataDir, "mirrors", "other-secret.git");
    execFileSync("git", ["clone", "-q", "--bare", secretWork, secret]);
    const secretSha = git(secret, "rev-parse", "vault");

    const job = await openJob();
    workspaces.push(job.workspace);
    const gitDir = join(job.checkout.root, ".git");
    await writeFile(join(gitDir, "objects", "info", "alternates"), `${join(secret, "objects")}\n`, {
      flag: "a",
    });
    await rm(join(gitDir, "packed-refs"), { force: true });
    await symlink(join(secret, "packed-refs"), join(gitDir, "packed-refs"));
    await writeFile(join(gitDir, "HEAD"), `${secretSha}\n`);

    // Fetching from the checkout, as a worker might, would take the foreign history.
    const probe = join(base, "probe.git");
    execFileSync("git", ["init", "-q", "--bare", probe]);
    const uploadPack = "--upload-pack=git -c safe.directory=* upload-pack";
    git(probe, "fetch", "-q", uploadPack, job.checkout.root, "+refs/heads/vault:refs/heads/leak");
    expect(git(probe, "show", "leak:SECRET.txt")).toBe("top secret");

    await expect(job.publish()).rejects.toThrow();
    expect(git(remote, "for-each-ref", "--format=%(objectname)")).not.toContain(secretSha);
    expect(() => git(remote, "cat-file", "-e", secretSha)).toThrow();
  });
});

describe("assertPushAllowed", () => {
  it.each([
    [{ branch: "main", defaultBranch: "main" }, /default branch/],
    [{ branch: "main", defaultBranch: "main", servedBranch: "main" }, /default branch/],
    [{ branch: "feature/x", defaultBranch: "main" }, /only vmpilot\/\* branches/],
    [{ branch: "release", defaultBranch: "main", servedBranch: "feature/x" }, /only vmpilot/],
    [{ branch: "vmpilot/../main", defaultBranch: "main" }, /Invalid branch name/],
    [{ branch: "-f", defaultBranch: "main" }, /Invalid branch name/],
  ])("refuses %j", (target, message) => {
    expect(() => assertPushAllowed(target)).toThrow(PushRefused);
    expect(() => assertPushAllowed(target)).toThrow(message);
  });

  it.each([
    [{ branch: "vmpilot/issue-1-x", defaultBranch: "main" }],
    [{ branch: "feature/x", defaultBranch: "main", servedBranch: "feature/x" }],
  ])("allows %j", (target) => expect(() => assertPushAllowed(target)).not.toThrow());

  it("refuses before touching anything", async () => {
    const job = await openJob();
    workspaces.push(job.workspace);
    await job.workspace.writeFile("y.txt", "y\n");
    await expect(job.publish({ branch: "main" })).rejects.toThrow(PushRefused);
    expect(git(job.checkout.root, "status", "--porcelain")).toContain("y.txt");
    expect(git(remote, "rev-parse", "main")).toBe(git(job.checkout.mirror, "rev-parse", "main"));
  });
});
