// What a worker hands every job: types only, so that every file of the spine and of the kinds can
// name them without importing what runs them.
import type Anthropic from "@anthropic-ai/sdk";
import type { ProbotOctokit } from "probot";
import type { ClientOptions } from "../../agent/model-call.ts";
import type { Plugin } from "../../agent/plugins.ts";
import type { OpenAiProviderOptions } from "../../agent/providers/openai.ts";
import type { McpSecret } from "../../config/mcp.ts";
import type { ProviderTable } from "../../config/providers.ts";
import type { RepoSettings } from "../../config/repo-config.ts";
import type { AssetPolicy, ImageFetchOptions } from "../../github/images.ts";
import type { Logger } from "../../log/logger.ts";
import type { Database } from "../../store/database.ts";
import type { CommitIdentity } from "../../workspace/git/commit.ts";
import type { SandboxLimits, WorkspaceChoice } from "../../workspace/index.ts";
import type { VmPool } from "../../workspace/vm/pool.ts";
import type { Queue, RunningJob } from "../queue/queue.ts";

/** What a job needs up to its work: the store, GitHub, the gate's list and the defaults. */
export interface OpenDeps {
  db: Database;
  /** An installation-authenticated client (Probot's `app.auth(installationId)`). */
  auth(installationId: number): Promise<ProbotOctokit>;
  /** ALLOWED_USERS: may act on every repository. */
  allowedUsers: readonly string[];
  /** Settings before the settings page and the repository file; default the built-in ones. */
  defaults?: RepoSettings;
  publicUrl: string;
  logger: Logger;
  /** `/vmpilot stop` cancels the conversation's other jobs. */
  queue: Pick<Queue, "cancel">;
  /** Least time between two progress comment edits; default 5 s. */
  progressIntervalMs?: number;
  /** How long a job for a moved base waits for GitHub to know whether the pull request merges. */
  mergeablePoll?: MergeablePoll;
}

export interface MergeablePoll {
  /** Requests at most; default 6. */
  attempts: number;
  /** Between two requests; default 5 s. */
  delayMs: number;
}

/** What its work needs besides: the model, the workspace, git. */
export interface WorkDeps {
  /** A fresh installation token for git; it never leaves the worker's own git commands. */
  installationToken(installationId: number): Promise<string>;
  /** Mirrors and workspaces live here. */
  dataDir: string;
  /** The plugins discovered at startup. */
  plugins: readonly Plugin[];
  /** The Anthropic client, or options to make one (API key, base URL, retries). */
  anthropic?: Anthropic | ClientOptions;
  /** OpenAI-compatible model servers; default none. */
  providers?: ProviderTable;
  /** Retries and timeout for those. */
  compatible?: OpenAiProviderOptions;
  /** WORKSPACE_ISOLATION and WORKSPACE_ENGINE; default DEFAULT_WORKSPACE (config/workspace.ts). */
  workspace?: WorkspaceChoice;
  /** WORKSPACE_WARM_POOL: started VMs this worker keeps ready. */
  vmPool?: VmPool;
  /** NETWORK_ALLOW_PRIVATE: loopback/private ranges the sandbox proxy may reach; default none. */
  allowPrivate?: readonly string[];
  /** SANDBOX_MAX_*: what each job's sandbox may use; default DEFAULT_LIMITS. */
  sandboxLimits?: SandboxLimits;
  /** SPARE_CHECKOUTS; default 20. */
  spareCheckouts?: number;
  /** Default `<app-slug>[bot]` with its noreply address. */
  commitAuthor?: CommitIdentity;
  /** Wall-time limit of one agent run, instead of the repository's `timeoutMinutes` (tests). */
  maxWallTimeMs?: number;
  streamRetryDelayMs?: number;
  /** Where a push that passed its tests queues its ready-for-review check; none without it. */
  readyQueue?: Pick<Queue, "enqueueReady">;
  /**
   * How attached images are fetched; default https to public addresses. The worker adds a GitHub
   * Enterprise host's own attachments (attachmentPolicy); tests use loopback.
   */
  imageFetch?: ImageFetchOptions;
  /** MCP_SECRETS: what the MCP servers' headers may name. */
  mcpSecrets?: readonly McpSecret[];
  /**
   * How HTTP MCP servers are reached; default https to public addresses and NETWORK_ALLOW_PRIVATE's
   * ranges (tests use loopback).
   */
  mcpEgress?: AssetPolicy;
}

export type JobDeps = OpenDeps & WorkDeps;

/** One attempt of a job, as the queue hands it over. */
export type Run = Pick<RunningJob, "jobId" | "attempt" | "maxAttempts" | "signal">;
