import { execFileSync } from "node:child_process";
import {
  chmod,
  chown,
  lstat,
  mkdir,
  mkdtemp,
  realpath,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AGENT_DIR,
  commandSandbox,
  SANDBOX_GROUP,
  SANDBOX_PASSWD,
  sandboxArgs,
} from "../../src/workspace/sandbox/bwrap.ts";
import { UNPRIVILEGED_OWNER } from "../../src/workspace/sandbox/owner.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { LOCAL_PROVIDERS, openWorkspace } from "./providers.ts";

const asRoot = process.getuid?.() === 0;

describe.each(LOCAL_PROVIDERS)("the %s provider", (provider) => {
  let base: string;
  let root: string;
  let secrets: string;
  let workspace: Workspace;

  beforeAll(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-identity-")));
    root = join(base, "checkout");
    secrets = join(base, "secrets");
    await mkdir(root);
    await mkdir(secrets);
    // Root-only, like /etc files outside the masked list; exposed read-only to the sandbox.
    await writeFile(join(secrets, "root-only"), "machine-secret");
    await chmod(join(secrets, "root-only"), 0o600);
    await writeFile(join(base, "outside"), "not the sandbox's");
    await symlink(join(base, "outside"), join(root, "link-out"));
    // A package reached through a symlinked node_modules, as in a git worktree or with pnpm.
    await mkdir(join(base, "store", "pkg"), { recursive: true });
    await writeFile(join(base, "store", "pkg", "index.js"), "export {};\n");
    await mkdir(join(base, "project"));
    await symlink(join(base, "store"), join(base, "project", "node_modules"));
    workspace = await openWorkspace(provider, root, {
      readOnlyPaths: [secrets, join(base, "project", "node_modules", "pkg")],
    });
  });

  afterAll(async () => {
    await workspace.dispose();
    await rm(base, { recursive: true, force: true });
  });

  describe("identity", () => {
    it("runs commands as an unprivileged user of its own", async () => {
      const result = await workspace.exec("id -u; id -g; id -un; getent passwd | wc -l");
      expect(result.stdout).toBe("1000\n1000\nsandbox\n3\n");
    });

    it("sees a read-only path where it was named, though a symlink led there", async () => {
      const result = await workspace.exec(`cat ${base}/project/node_modules/pkg/index.js`);
      expect(result.stdout).toBe("export {};\n");
    });

    it("cannot create nested user namespaces", async () => {
      const result = await workspace.exec("unshare --user true && echo nested");
      expect(result.stdout).not.toContain("nested");
      expect(result.exitCode).not.toBe(0);
    });

    it("edits files the worker wrote, in directories it made", async () => {
      await workspace.writeFile("made/by/editor.txt", "one\n");
      const result = await workspace.exec(
        "echo two >> made/by/editor.txt && cat made/by/editor.txt && rm -r made && echo removed",
      );
      expect(result.stdout).toBe("one\ntwo\nremoved\n");
    });

    it.skipIf(!asRoot)("as root, cannot read root-only files it can see", async () => {
      const result = await workspace.exec(`cat ${secrets}/root-only`);
      expect(result.stdout).toBe("");
      expect(result.stderr).toMatch(/Permission denied/);
    });

    it.skipIf(!asRoot)("as root, hands the checkout over without following its links", async () => {
      expect((await lstat(root)).uid).toBe(UNPRIVILEGED_OWNER.uid);
      expect((await lstat(join(root, "link-out"))).uid).toBe(UNPRIVILEGED_OWNER.uid);
      expect((await lstat(join(base, "outside"))).uid).toBe(0);
      const made = await workspace.exec("echo x > new.txt");
      expect(made.exitCode).toBe(0);
      expect((await lstat(join(root, "new.txt"))).uid).toBe(UNPRIVILEGED_OWNER.uid);
    });
  });
});

/**
 * The arguments a worker that is not root uses, run by a user that is not root. As root the test
 * becomes "nobody" first; everything it binds is made reachable by that user.
 */
describe("sandbox identity as a normal user", () => {
  /** A layout in a fresh directory that "nobody" may use; `agentDir` with the agent's. */
  async function layoutIn(dir: string, agent: boolean) {
    const layout = {
      root: join(dir, "checkout"),
      tmpDir: join(dir, "tmp"),
      homeDir: join(dir, "home"),
      accounts: join(dir, "accounts"),
      ...(agent && { agentDir: join(dir, "agent") }),
    };
    for (const path of Object.values(layout)) await mkdir(path);
    await writeFile(join(layout.accounts, "passwd"), SANDBOX_PASSWD);
    await writeFile(join(layout.accounts, "group"), SANDBOX_GROUP);
    if (layout.agentDir) await writeFile(join(layout.agentDir, "agent.key"), "key");
    await chmod(dir, 0o755);
    for (const path of [
      dir,
      ...Object.values(layout),
      ...(agent ? [join(dir, "agent", "agent.key")] : []),
    ]) {
      if (asRoot) await chown(path, UNPRIVILEGED_OWNER.uid, UNPRIVILEGED_OWNER.gid);
    }
    return layout;
  }

  /** Runs `script` in the layout's sandbox (below `inner`) as a user that is not root. */
  async function runAsUser(dir: string, agent: boolean, inner: string[], script: string) {
    const layout = await layoutIn(dir, agent);
    const args = await sandboxArgs({ ...layout, readOnly: [], hidden: [], asRoot: false });
    const user = asRoot
      ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bwrap"]
      : ["bwrap"];
    const command = [...user.slice(1), ...args, "--chdir", layout.root, ...inner];
    return execFileSync(user[0] as string, [...command, "bash", "-c", script]).toString();
  }

  it("maps to the same unprivileged user and refuses nested user namespaces", async () => {
    const dir = await mkdtemp(join(tmpdir(), "vmpilot-normal-user-"));
    try {
      const script = "id -un; echo w > written; unshare --user true 2>/dev/null || echo refused";
      expect(await runAsUser(dir, false, [], script)).toBe("sandbox\nrefused\n");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("gives the agent's commands the same, with their own processes and the agent's out of sight", async () => {
    const dir = await mkdtemp(join(tmpdir(), "vmpilot-normal-user-"));
    try {
      const script = [
        "id -un",
        "echo w > written",
        "unshare --user true 2>/dev/null || echo refused",
        `ls -A ${AGENT_DIR} | wc -l`,
        "ls -d /proc/[0-9]* | wc -l",
      ].join("; ");
      const out = await runAsUser(dir, true, commandSandbox(), script);
      expect(out).toMatch(/^sandbox\nrefused\n0\n[1-4]\n$/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
