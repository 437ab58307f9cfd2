// The agents a key may use, as OpenAI models: `vmpilot/<owner>/<repo>` for each repository of the
// app's installations whose gate lets the key's owner in (the issue path's: write access, or the
// repository's allow-list), and `vmpilot` (a scratch workspace) for whoever may use one of them.
// Decided on every request, on the repository's settings as they are then.
import type { ProbotOctokit } from "probot";
import type { RepoSettings } from "../config/repo-config.ts";
import { findRepositoryInstallation, getRepositoryByName } from "../github/installations.ts";
import { mayTrigger, repositoryTriggerSettings } from "../jobs/trigger-settings.ts";
import {
  findActiveRepository,
  listActiveRepositories,
  type Repository,
  upsertInstallation,
  upsertRepository,
} from "../store/installations.ts";
import type { Queryable } from "../store/sql.ts";
import type { TtlCache } from "../web/cache.ts";
import type { Principal } from "./auth.ts";
import { unknownModel } from "./errors.ts";

const SCRATCH = "vmpilot";
const PREFIX = `${SCRATCH}/`;
const FULL_NAME = /^([\w.-]+)\/([\w.-]+)$/;

export interface AgentAccess {
  db: Queryable;
  /** An installation's client; without an id, the app's own (a JWT). */
  auth(installationId?: number): Promise<ProbotOctokit>;
  /** ALLOWED_USERS: may act on every repository. */
  allowedUsers: readonly string[];
  /** Under the settings page and `.github/vmpilot.yml`. */
  defaults: RepoSettings;
  /** The gate's answer per owner, repository and the settings it was given; briefly cached. */
  permits: TtlCache<boolean>;
  /** Whether GitHub said the app is installed on a repository the store lacked, by name; briefly cached. */
  installed: TtlCache<boolean>;
}

export interface Agent {
  id: string;
  /** Null for scratch. */
  repository: Repository | null;
}

async function mayUse(access: AgentAccess, who: Principal, repo: Repository): Promise<boolean> {
  if (who.operator) return true;
  const octokit = await access.auth(repo.installationId);
  const settings = await repositoryTriggerSettings(access.db, octokit, repo, access.defaults);
  // Keyed by the settings too: a change of policy or allow-list counts from the next request.
  const key = [who.owner.toLowerCase(), repo.id, settings.triggerPolicy, ...settings.allowedUsers];
  return access.permits.get(key.join(" "), async () => {
    const [owner = "", name = ""] = repo.fullName.split("/");
    const query = { owner, repo: name, username: who.owner, allowedUsers: access.allowedUsers };
    return (await mayTrigger(octokit, query, settings)).allowed;
  });
}

/** Scratch spends the operator's model budget: only for someone who may use a repository now. */
async function mayUseScratch(access: AgentAccess, who: Principal): Promise<boolean> {
  if (who.operator) return true;
  for (const repository of await listActiveRepositories(access.db)) {
    if (await mayUse(access, who, repository)) return true;
  }
  return false;
}

export async function listAgents(access: AgentAccess, who: Principal): Promise<Agent[]> {
  const agents: Agent[] = [];
  for (const repository of await listActiveRepositories(access.db)) {
    if (await mayUse(access, who, repository)) {
      agents.push({ id: `${PREFIX}${repository.fullName}`, repository });
    }
  }
  return who.operator || agents.length > 0 ? [{ id: SCRATCH, repository: null }, ...agents] : [];
}

/** The agent a model id names, if the key may use it; 404 otherwise, so strangers learn nothing. */
export async function resolveAgent(
  access: AgentAccess,
  who: Principal,
  model: string,
): Promise<Agent> {
  if (model === SCRATCH) {
    if (!(await mayUseScratch(access, who))) throw unknownModel(model);
    return { id: SCRATCH, repository: null };
  }
  if (!model.startsWith(PREFIX)) throw unknownModel(model);
  const fullName = model.slice(PREFIX.length);
  const repository =
    (await findActiveRepository(access.db, fullName)) ?? (await learnRepository(access, fullName));
  if (!repository || !(await mayUse(access, who, repository))) throw unknownModel(model);
  return { id: `${PREFIX}${repository.fullName}`, repository };
}

/**
 * A repository the store lacks may be installed all the same (no webhook reached this database):
 * GitHub is asked, once per name while the answer is cached, and a yes is recorded.
 */
async function learnRepository(
  access: AgentAccess,
  fullName: string,
): Promise<Repository | undefined> {
  const [, owner = "", repo = ""] = FULL_NAME.exec(fullName) ?? [];
  if (!owner) return undefined;
  const installed = await access.installed.get(fullName.toLowerCase(), async () => {
    const installation = await findRepositoryInstallation(await access.auth(), owner, repo);
    if (!installation) return false;
    await upsertInstallation(access.db, { ...installation, deleted: false });
    // A suspended installation gets no token, and acts on nothing.
    if (installation.suspended) return false;
    const found = await getRepositoryByName(await access.auth(installation.id), owner, repo);
    if (!found) return false;
    await upsertRepository(access.db, {
      ...found,
      installationId: installation.id,
      removed: false,
    });
    return true;
  });
  return installed ? findActiveRepository(access.db, fullName) : undefined;
}
