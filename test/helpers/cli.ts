// The real `vmpilot` binary and the scratch repositories the CLI tests give it.
import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { type EmbeddedPostgres, startEmbeddedPostgres } from "../../src/store/embedded.ts";
import { seedDataDir } from "./db.ts";

export const run = promisify(execFile);
export const CLI = join(import.meta.dirname, "../../bin/vmpilot.js");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the binary with only PATH, HOME and `env` in its environment. Its standard input is a socket,
 * as from any Node parent: `input` is written to it, then it is closed, as a parent must.
 */
export async function vmpilot(
  args: string[],
  env: Record<string, string>,
  input = "",
): Promise<CliResult> {
  try {
    const running = run(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", ...env },
      timeout: 120_000,
    });
    running.child.stdin?.end(input);
    const { stdout, stderr } = await running;
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/**
 * One embedded database for a test file's CLI runs, given to them as DATABASE_URL. On its own data
 * dir the CLI starts the database twice a run (to open the conversation, then to save the turn),
 * some 0.7 s of CPU each; a file keeps one test on that path.
 */
export async function startSharedStore(dataDir: string): Promise<EmbeddedPostgres> {
  await seedDataDir(dataDir);
  return startEmbeddedPostgres(dataDir);
}

export async function git(cwd: string, ...args: string[]): Promise<string> {
  return (await run("git", args, { cwd })).stdout.trim();
}

/** A scratch project under root whose one test fails because `add` subtracts. */
export async function scratchRepo(root: string): Promise<string> {
  const repo = join(root, "project");
  await mkdir(repo);
  await writeFile(join(repo, "math.sh"), "add() { echo $(($1 - $2)); }\n");
  await writeFile(
    join(repo, "test.sh"),
    '. ./math.sh\n[ "$(add 2 3)" = 5 ] && echo "1 passed" || { echo "add 2 3 gave $(add 2 3)"; exit 1; }\n',
  );
  await git(root, "init", "--quiet", "--initial-branch=main", repo);
  await git(repo, "add", ".");
  await git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init");
  return repo;
}
