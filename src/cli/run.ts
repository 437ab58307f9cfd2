import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { runAgent } from "../agent/loop.ts";
import { DEFAULT_ENABLED_PLUGINS, discoverPlugins, selectPlugins } from "../agent/plugins.ts";
import { buildSystemPrompt } from "../agent/prompt.ts";
import { runTitle } from "../agent/summary.ts";
import { loadSandboxLimits } from "../config/env.ts";
import { BRANCH_PREFIX, slugify } from "../github/branch-name.ts";
import { commitInWorkspace } from "../workspace/commit.ts";
import { userGitClient } from "../workspace/git.ts";
import {
  cleanRepoUrl,
  createWorkspace,
  prepareCheckout,
  type Workspace,
} from "../workspace/index.ts";
import { type RunArgs, UsageError } from "./args.ts";
import { readAttachments, taskFromStdin, withAttachments } from "./attachments.ts";
import { deliverBranch } from "./deliver.ts";
import { EXIT, exitCodeOf } from "./exit-code.ts";
import { createJsonPrinter } from "./json-events.ts";
import { createProgressPrinter, formatUsd, type ProgressOutput } from "./progress.ts";

export interface CliIo {
  /** Piped or redirected standard input: the task (`-`) or an attachment. */
  stdin?: AsyncIterable<Buffer | string>;
  stdout: ProgressOutput;
  /** With --json, where the human-readable progress goes. */
  stderr: ProgressOutput;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}

const AUTHOR = { name: "vmpilot", email: "vmpilot@users.noreply.github.com" };

async function localRepo(path: string): Promise<boolean> {
  if (!existsSync(path)) throw new UsageError(`no repository at ${path}`);
  const git = userGitClient(path);
  const inside = await git
    .raw(["rev-parse", "--is-inside-work-tree"])
    .catch(() => git.raw(["rev-parse", "--is-bare-repository"]))
    .catch(() => "");
  if (inside.trim() !== "true") throw new UsageError(`${path} is not a git repository`);
  return true;
}

/** `vmpilot/<task-slug>`, with a suffix only when the local repository already has that branch. */
async function branchName(args: RunArgs, repoUrl: string, local: boolean): Promise<string> {
  if (args.branch) return args.branch;
  const base = `${BRANCH_PREFIX}${slugify(args.task) || "task"}`;
  if (!local) return base;
  const taken = await userGitClient(repoUrl)
    .raw(["rev-parse", "--verify", "--quiet", `refs/heads/${base}`])
    .then(
      (out) => out.trim() !== "",
      () => false,
    );
  return taken ? `${base}-${Date.now().toString(36)}` : base;
}

/** Runs one task end to end and prints a summary; resolves to the process exit code. */
export async function runTask(given: RunArgs, io: CliIo): Promise<number> {
  if (!io.env.ANTHROPIC_API_KEY && !io.env.ANTHROPIC_AUTH_TOKEN) {
    throw new UsageError("ANTHROPIC_API_KEY is not set: export your Anthropic API key first");
  }
  const fromStdin = given.task === "-";
  const args = fromStdin ? { ...given, task: await taskFromStdin(io.stdin) } : given;
  const attachments = await readAttachments(args.files, fromStdin ? undefined : io.stdin);
  const sandbox = loadSandboxLimits(io.env);
  if ("problems" in sandbox) throw new UsageError(sandbox.problems.join("; "));
  const { url: repoUrl } = cleanRepoUrl(args.repo);
  const local = !/^[a-z][a-z0-9+.-]*:\/\//i.test(repoUrl) && !/^[^/]+@[^/:]+:/.test(repoUrl);
  if (local) await localRepo(repoUrl);

  const started = Date.now();
  const dataDir = io.env.DATA_DIR ?? join(homedir(), ".cache", "vmpilot");
  await mkdir(join(dataDir, "workspaces"), { recursive: true });
  const dest = join(await mkdtemp(join(dataDir, "workspaces", "run-")), "repo");
  const branch = await branchName(args, repoUrl, local);
  const human = args.json ? io.stderr : io.stdout;
  const print = (line: string) => human.write(`${line}\n`);
  const json = args.json ? createJsonPrinter(io.stdout) : undefined;
  let workspace: Workspace | undefined;
  try {
    const checkout = await prepareCheckout({ dataDir, repo: args.repo, dest, branch });
    workspace = await createWorkspace({
      provider: args.provider,
      root: checkout.root,
      dataDir,
      mirror: checkout.mirror,
      limits: sandbox.limits,
    });
    print(`vmpilot: ${args.provider} workspace on branch ${branch} (from ${checkout.baseBranch})`);

    const plugins = selectPlugins(await discoverPlugins(), DEFAULT_ENABLED_PLUGINS);
    const system = await buildSystemPrompt({ workspace, plugins });
    const printer = createProgressPrinter(human);
    const result = await runAgent({
      workspace,
      instruction: withAttachments(args.task, attachments),
      system,
      model: args.model,
      limits: { maxSteps: args.maxSteps },
      plugins,
      onEvent: (event) => {
        printer.onEvent(event);
        json?.onEvent(event);
      },
      signal: io.signal,
    });
    printer.close();

    const tests = result.reports.tests as { outcome?: string } | undefined;
    const usage = result.usage;
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const summary = { reason: result.reason, steps: result.steps, usage, seconds: Number(seconds) };
    if (result.reason === "error") {
      const error = result.error?.message ?? "unknown error";
      print(`✗ failed: ${error}`);
      print(
        `  ${result.steps} steps · ${formatUsd(usage.costUsd)} · ${seconds}s; nothing committed`,
      );
      json?.result({ exitCode: EXIT.failed, error, ...summary });
      return EXIT.failed;
    }
    if (result.detail) print(`note: ${result.detail}`);

    const commit = await commitInWorkspace(workspace, {
      message: runTitle(result.finalText, args.task),
      author: AUTHOR,
    });
    if (commit) {
      await deliverBranch({
        workspace,
        baseSha: checkout.baseSha,
        repoUrl,
        local,
        mirror: checkout.mirror,
        branch,
      });
    }
    print("");
    print(
      commit ? `✔ committed ${commit.sha.slice(0, 10)} on ${branch}` : "✔ no changes to commit",
    );
    if (commit) print(`  files changed (${commit.files.length}): ${commit.files.join(", ")}`);
    print(`  tests: ${tests?.outcome ?? "not reported"}`);
    print(
      `  tokens: ${usage.inputTokens} in, ${usage.outputTokens} out, ${usage.cacheReadInputTokens} cache read, ${usage.cacheCreationInputTokens} cache write`,
    );
    print(
      `  cost: ${formatUsd(usage.costUsd)} · ${result.steps} steps · ${seconds}s · ended: ${result.reason}`,
    );
    const exitCode = exitCodeOf(result, tests?.outcome);
    json?.result({
      exitCode,
      branch: commit ? branch : null,
      sha: commit?.sha ?? null,
      files: commit?.files ?? [],
      tests: tests?.outcome ?? null,
      ...(result.detail ? { detail: result.detail } : {}),
      ...summary,
    });
    return exitCode;
  } finally {
    await workspace?.dispose();
    await rm(join(dest, ".."), { recursive: true, force: true });
  }
}
