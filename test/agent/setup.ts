import { execFile } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { silentLogger } from "../../src/log/logger.ts";
import { createHostWorkspace } from "../../src/workspace/sandbox/host.ts";
import type { Workspace } from "../../src/workspace/types.ts";

const run = promisify(execFile);

export interface TestRepo {
  root: string;
  workspace: Workspace;
  git(...args: string[]): Promise<string>;
  cleanup(): Promise<void>;
}

/** A real git repository in a temp dir with `files` committed, served by the host workspace. */
export async function makeRepo(files: Record<string, string | Buffer> = {}): Promise<TestRepo> {
  const root = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-agent-")));
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), content);
  }
  const git = async (...args: string[]) =>
    (
      await run("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
        cwd: root,
      })
    ).stdout;
  await git("init", "-q", "-b", "main");
  await git("add", "-A");
  await git("commit", "-q", "--allow-empty", "-m", "initial");
  const workspace = createHostWorkspace(root, { logger: silentLogger });
  return {
    root,
    workspace,
    git,
    async cleanup() {
      await workspace.dispose();
      await rm(root, { recursive: true, force: true });
    },
  };
}
