// One invocation of the CLI: one stored conversation and one workspace on its branch, for one turn
// (`vmpilot run`) or many (`vmpilot chat`). Every turn ends committed, delivered and stored.
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { join } from "node:path";
import { runAgent } from "../agent/loop.ts";
import { publicEgress } from "../agent/mcp/http.ts";
import { openMcp, serverLine } from "../agent/mcp/open.ts";
import { DEFAULT_ENABLED_PLUGINS, discoverPlugins, selectPlugins } from "../agent/plugins.ts";
import { buildSystemPrompt } from "../agent/prompt.ts";
import { runTitle } from "../agent/summary.ts";
import { type McpSecret, type McpServerSetting, mergeMcp } from "../config/mcp.ts";
import { DEFAULT_MODEL } from "../config/models.ts";
import type { ProviderTable } from "../config/providers.ts";
import { MAX_REPO_CONFIG_BYTES, parseRepoConfig } from "../config/repo-config.ts";
import { BRANCH_PREFIX, slugify } from "../github/branch-name.ts";
import { repositoryMemory } from "../jobs/run/memory.ts";
import {
  changedSince,
  commitInWorkspace,
  headOf,
  VMPILOT_AUTHOR,
} from "../workspace/git/commit.ts";
import { userGitClient } from "../workspace/git/git.ts";
import {
  type Checkout,
  checkoutDiskMb,
  cleanRepoUrl,
  createWorkspace,
  prepareCheckout,
  type SandboxLimits,
  type ScratchDisk,
  type Workspace,
  type WorkspaceChoice,
} from "../workspace/index.ts";
import { UsageError } from "./args.ts";
import {
  type ConversationChoice,
  type HeldConversation,
  openConversation,
  releaseConversation,
  saveTurn,
  type TurnRecord,
} from "./conversation.ts";
import { deliverBranch } from "./deliver.ts";
import { EXIT, exitCodeOf } from "./exit-code.ts";
import { createJsonPrinter } from "./json-events.ts";
import { createProgressPrinter, formatUsd, type ProgressOutput } from "./progress.ts";
import { withStore } from "./store.ts";
import { terminalText } from "./terminal-text.ts";

/** The repository the user named: where the branch goes, and the key its conversations have. */
export interface Target {
  url: string;
  local: boolean;
  /** A local repository's real top-level path, or the URL. */
  key: string;
}

export async function resolveTarget(repo: string): Promise<Target> {
  const { url } = cleanRepoUrl(repo);
  const local = !/^[a-z][a-z0-9+.-]*:\/\//i.test(url) && !/^[^/]+@[^/:]+:/.test(url);
  if (!local) return { url, local, key: url };
  if (!existsSync(url)) throw new UsageError(`no repository at ${url}`);
  const git = userGitClient(url);
  const inside = await git
    .raw(["rev-parse", "--is-inside-work-tree"])
    .catch(() => git.raw(["rev-parse", "--is-bare-repository"]))
    .catch(() => "");
  if (inside.trim() !== "true") throw new UsageError(`${url} is not a git repository`);
  const top = await git.raw(["rev-parse", "--show-toplevel"]).catch(() => "");
  return { url, local, key: await realpath(top.trim() || url) };
}

/** `vmpilot/<task-slug>`, with a suffix when the repository or a conversation has that branch. */
async function branchName(task: string, target: Target, taken: ReadonlySet<string>) {
  const base = `${BRANCH_PREFIX}${slugify(task) || "task"}`;
  const exists =
    taken.has(base) ||
    (target.local &&
      (await userGitClient(target.url)
        .raw(["rev-parse", "--verify", "--quiet", `refs/heads/${base}`])
        .then(
          (out) => out.trim() !== "",
          () => false,
        )));
  return exists ? `${base}-${Date.now().toString(36)}` : base;
}

export interface InvocationOptions {
  env: NodeJS.ProcessEnv;
  dataDir: string;
  /** Unset only with a conversation picked by id, which knows its repository. */
  repo?: string;
  workspace: WorkspaceChoice;
  model?: string;
  providers: ProviderTable;
  maxSteps?: number;
  branch?: string;
  limits: SandboxLimits;
  /** MCP_SECRETS and MCP_SERVERS, to which the checkout's `.github/vmpilot.yml` adds its servers. */
  mcp: { secrets: McpSecret[]; servers: Record<string, McpServerSetting> };
  /** Human-readable progress. */
  human: ProgressOutput;
  /** One JSON object per event, with --json. */
  json?: ProgressOutput;
}

export type ConversationStart =
  | { continue: true }
  | { conversationId: number }
  | { firstTask: string };

export class Invocation {
  #workspace?: Workspace;
  #checkout?: Checkout;
  #dest?: string;
  #disk?: ScratchDisk;
  #target?: Target;
  #held?: HeldConversation;
  #released = false;

  readonly options: InvocationOptions;

  private constructor(options: InvocationOptions) {
    this.options = options;
  }

  /** Lines carry file names, branches and errors the agent or a repository chose. */
  #print(line: string) {
    this.options.human.write(`${terminalText(line)}\n`);
  }

  /** Opens (or, given the first task, creates) the conversation and holds it. */
  static async open(options: InvocationOptions, start: ConversationStart): Promise<Invocation> {
    const invocation = new Invocation(options);
    const target = options.repo === undefined ? undefined : await resolveTarget(options.repo);
    let choice: ConversationChoice;
    if ("firstTask" in start) {
      if (!target) throw new UsageError("missing --repo");
      const { branch } = options;
      choice = {
        kind: "new",
        title: start.firstTask,
        branch: async (taken) => branch ?? branchName(start.firstTask, target, taken),
      };
    } else {
      choice =
        "conversationId" in start ? { kind: "id", id: start.conversationId } : { kind: "latest" };
    }
    invocation.#held = await withStore(options.env, options.dataDir, (db) =>
      openConversation(db, target?.key, choice),
    );
    invocation.#target = target ?? (await resolveTarget(invocation.#held.conversation.repo));
    const { conversation } = invocation.#held;
    if (conversation.turns > 0) {
      invocation.#print(
        `vmpilot: continuing conversation ${conversation.id} (${conversation.turns} turns, ${formatUsd(conversation.costUsd)} so far) on branch ${conversation.branch}`,
      );
    }
    return invocation;
  }

  get conversation() {
    if (!this.#held) throw new Error("the invocation has no conversation");
    return this.#held.conversation;
  }

  async #ensureWorkspace(): Promise<Workspace> {
    if (this.#workspace) return this.#workspace;
    const { dataDir, workspace, limits } = this.options;
    const target = this.#target as Target;
    await mkdir(join(dataDir, "workspaces"), { recursive: true });
    const dir = await mkdtemp(join(dataDir, "workspaces", "run-"));
    this.#dest = join(dir, "repo");
    // The kernel holds the checkout to the disk limit: it is made on the job's disk.
    const diskMb = await checkoutDiskMb(workspace, limits);
    const branch = this.conversation.branch;
    // The branch is there once a turn committed something; until then it starts afresh.
    this.#checkout = await prepareCheckout({
      dataDir,
      repo: target.url,
      dest: this.#dest,
      branch,
      existingBranch: "if-present",
      ...(diskMb !== undefined && { diskMb }),
    });
    this.#disk = this.#checkout.disk;
    this.#workspace = await createWorkspace({
      ...workspace,
      root: this.#checkout.root,
      dataDir,
      mirror: this.#checkout.mirror,
      limits,
      ...(this.#disk && { disk: this.#disk, stateDir: join(dir, "state") }),
    });
    this.#print(
      `vmpilot: ${workspace.isolation} workspace (${workspace.engine}) on branch ${branch} (from ${this.#checkout.baseBranch})`,
    );
    return this.#workspace;
  }

  /**
   * Runs one turn and resolves to the exit code it would give. The last turn lets the
   * conversation go as it is stored, which saves opening the store once more.
   */
  async turn(instruction: string, signal?: AbortSignal, last = false): Promise<number> {
    const started = Date.now();
    const workspace = await this.#ensureWorkspace();
    // Earlier turns were committed: a turn that adds nothing to that owes no test report.
    const start = await headOf(workspace);
    const held = this.#held as HeldConversation;
    const plugins = selectPlugins(await discoverPlugins(), DEFAULT_ENABLED_PLUGINS);
    // The lessons from review as the repository's default branch has them, as a job reads them.
    const memory = await repositoryMemory((this.#checkout as Checkout).mirror, (error) =>
      this.#print(`vmpilot: the lessons file was not read: ${(error as Error).message}`),
    );
    const system = await buildSystemPrompt({ workspace, plugins, memory });
    const mcp = await this.#mcp(workspace, signal);
    const printer = createProgressPrinter(this.options.human);
    const json = this.options.json ? createJsonPrinter(this.options.json) : undefined;
    const record: TurnRecord = { messages: [], costUsd: 0 };
    const added: TurnRecord["messages"][number][] = [];
    let result: Awaited<ReturnType<typeof runAgent>>;
    try {
      result = await runAgent({
        workspace,
        messages: held.history,
        instruction,
        system,
        model: this.options.model,
        providers: this.options.providers,
        limits: { maxSteps: this.options.maxSteps },
        plugins,
        changed: () => changedSince(workspace, start),
        onEvent: (event) => {
          if (event.type === "compacted") {
            record.compaction = { afterMessages: added.length, messages: event.messages };
          }
          printer.onEvent(event);
          json?.onEvent(event);
        },
        onMessage: (message) => {
          added.push(message);
        },
        signal,
        mcp,
      });
    } finally {
      printer.close();
      await mcp?.close();
    }
    record.messages = added;
    record.costUsd = result.usage.costUsd;
    held.history = result.messages;
    const conversation = await withStore(this.options.env, this.options.dataDir, async (db) => {
      const saved = await saveTurn(db, held, record);
      if (last) await releaseConversation(db, held);
      return saved;
    });
    this.#released = last;

    const tests = result.reports.tests as { outcome?: string } | undefined;
    const usage = result.usage;
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const summary = {
      conversation: conversation.id,
      reason: result.reason,
      model: this.options.model ?? DEFAULT_MODEL,
      steps: result.steps,
      usage,
      priceKnown: result.priceKnown,
      conversationCostUsd: conversation.costUsd,
      seconds: Number(seconds),
    };
    const estimate = result.priceKnown ? "" : " (an estimate: the model's price is unknown)";
    const totals = `${formatUsd(usage.costUsd)} (conversation ${conversation.id}: ${formatUsd(conversation.costUsd)})${estimate}`;
    if (result.reason === "error") {
      const error = result.error?.message ?? "unknown error";
      this.#print(`✗ failed: ${error}`);
      this.#print(`  ${result.steps} steps · ${totals} · ${seconds}s; nothing committed`);
      json?.result({ exitCode: EXIT.failed, error, ...summary });
      return EXIT.failed;
    }
    if (result.detail) this.#print(`note: ${result.detail}`);

    const commit = await commitInWorkspace(workspace, {
      message: runTitle(result.finalText, instruction),
      author: VMPILOT_AUTHOR,
    });
    const checkout = this.#checkout as Checkout;
    const target = this.#target as Target;
    if (commit) {
      await deliverBranch({
        workspace,
        baseSha: checkout.baseSha,
        repoUrl: target.url,
        local: target.local,
        mirror: checkout.mirror,
        branch: conversation.branch,
      });
    }
    this.#print("");
    this.#print(
      commit
        ? `✔ committed ${commit.sha.slice(0, 10)} on ${conversation.branch}`
        : "✔ no changes to commit",
    );
    if (commit) this.#print(`  files changed (${commit.files.length}): ${commit.files.join(", ")}`);
    this.#print(`  tests: ${tests?.outcome ?? (commit ? "not reported" : "not run (no changes)")}`);
    this.#print(
      `  tokens: ${usage.inputTokens} in, ${usage.outputTokens} out, ${usage.cacheReadInputTokens} cache read, ${usage.cacheCreationInputTokens} cache write`,
    );
    this.#print(
      `  cost: ${totals} · ${result.steps} steps · ${seconds}s · ended: ${result.reason}`,
    );
    const exitCode = exitCodeOf(result, tests?.outcome);
    json?.result({
      exitCode,
      branch: commit ? conversation.branch : null,
      sha: commit?.sha ?? null,
      files: commit?.files ?? [],
      tests: tests?.outcome ?? null,
      ...(result.detail ? { detail: result.detail } : {}),
      ...summary,
    });
    return exitCode;
  }

  /**
   * The MCP servers of the operator's environment and of the checkout's `.github/vmpilot.yml`,
   * read as a job reads it; a file that is not valid is said and its servers left out.
   */
  async #mcp(workspace: Workspace, signal?: AbortSignal) {
    const { secrets, servers } = this.options.mcp;
    const text = await workspace
      .readFile(".github/vmpilot.yml", MAX_REPO_CONFIG_BYTES)
      .then((bytes) => bytes.toString("utf8"))
      .catch(() => "");
    const parsed = parseRepoConfig(text, secrets);
    if (!parsed.ok) {
      this.#print(
        `vmpilot: .github/vmpilot.yml is invalid (${parsed.message}); its MCP servers are left out`,
      );
    }
    const file = parsed.ok ? parsed.config : {};
    return openMcp({
      servers: mergeMcp(servers, file.mcp),
      workspace,
      secrets,
      egress: { policy: publicEgress(), allowHosts: file.network?.allow ?? [] },
      signal,
      onEvent: (event) => this.#print(`vmpilot: ${serverLine(event)}`),
    });
  }

  /** The changes of this invocation's turns, committed or not, as a diff. */
  async diff(): Promise<string> {
    if (!this.#workspace || !this.#checkout) return "";
    // Inside the workspace: the checkout's git config is the agent's (see commitInWorkspace).
    const shown = await this.#workspace.exec(
      `git add -A -N . && git -c core.pager=cat diff ${this.#checkout.baseSha}`,
    );
    return shown.fullStdout;
  }

  /** Lets the conversation go and removes the workspace. */
  async close(): Promise<void> {
    try {
      await this.#workspace?.dispose();
      await this.#disk?.unmount();
      if (this.#dest) await rm(join(this.#dest, ".."), { recursive: true, force: true });
    } finally {
      const held = this.#held;
      if (held && !this.#released) {
        await withStore(this.options.env, this.options.dataDir, (db) =>
          releaseConversation(db, held),
        );
      }
    }
  }
}
