// The models a key may use, as OpenAI lists models: `vmpilot/<owner>/<repo>` for each repository of
// the app's installations whose gate lets the key's owner in (the issue path's: write access, or
// the repository's allow-list), and `vmpilot` (a scratch workspace) for whoever may use one of
// them. Decided on the repository's settings as they are then; GitHub's answers are remembered a
// minute for a request, longer for a listing, per person, and asked within each person's budget per
// minute. A repository is known from the store, which webhooks and the installation sync keep.
import type { ProbotOctokit } from "probot";
import type { RepoSettings } from "../config/repo-config.ts";
import type { TtlCache } from "../http/cache.ts";
import { mayTrigger } from "../jobs/run/gate.ts";
import { repositoryTriggerSettings } from "../jobs/run/settings.ts";
import type { Logger } from "../log/logger.ts";
import {
  findActiveRepository,
  listActiveRepositories,
  type Repository,
} from "../store/installations.ts";
import type { Queryable } from "../store/sql.ts";
import { pushableRepositories } from "../store/user-repositories.ts";
import type { Principal } from "./auth.ts";
import { ApiError, unknownModel } from "./errors.ts";
import { currentLogin } from "./identity.ts";
import { BudgetSpent, type CallBudget, type PermitCache } from "./permits.ts";

const SCRATCH = "vmpilot";
const PREFIX = `${SCRATCH}/`;
/** A request goes by answers this fresh; a listing (which a request checks again) by older ones. */
const FOR_USE_MS = 60_000;
export const FOR_LISTING_MS = 15 * 60_000;
/** Questions a listing has out to GitHub at once. */
const CONCURRENCY = 8;

export interface ModelAccess {
  db: Queryable;
  /** An installation's client; without an id, the app's own (a JWT). */
  auth(installationId?: number): Promise<ProbotOctokit>;
  /** ALLOWED_USERS: may act on every repository. */
  allowedUsers: readonly string[];
  /** Under the settings page and `.github/vmpilot.yml`. */
  defaults: RepoSettings;
  /** The gate's answers per person, keyed by repository and the settings it was given. */
  permits: PermitCache;
  /** Each person's login now, by GitHub user id. */
  logins: TtlCache<string | null>;
  /** Questions to GitHub per person per minute. */
  budget: CallBudget;
  logger: Logger;
}

/** A model the chat face offers: a repository's workspace, or scratch. */
export interface ChatModel {
  id: string;
  /** Null for scratch. */
  repository: Repository | null;
}

type Person = Extract<Principal, { kind: "user" }>;

/** One client per installation for the length of a request, its token asked for once. */
function clients(access: ModelAccess) {
  const made = new Map<number, Promise<ProbotOctokit>>();
  return (installationId: number) => {
    let client = made.get(installationId);
    if (!client) {
      client = access.auth(installationId);
      made.set(installationId, client);
    }
    return client;
  };
}

interface Asking {
  access: ModelAccess;
  who: Person;
  login: string;
  client: ReturnType<typeof clients>;
  /** The answers a decision may go by. */
  maxAgeMs: number;
}

/**
 * The gate for the person on the repository: an answer no older than asked for, the allow-lists
 * (which ask GitHub nothing), or GitHub's word when `ask` allows questions: the repository's file
 * when its settings are unknown, the person's write access. Undefined when a question was needed
 * and not allowed. Throws BudgetSpent past the budget.
 */
async function decide(a: Asking, repo: Repository, ask: boolean): Promise<boolean | undefined> {
  const { access } = a;
  if (repo.fileSettings === null) {
    // Unknown, the file is read (the repository's, then its owner's .github): two questions.
    if (!ask) return undefined;
    access.budget.spend(a.who.id, 2);
  }
  const octokit = await a.client(repo.installationId);
  const settings = await repositoryTriggerSettings(access.db, octokit, repo, access.defaults);
  const login = a.login.toLowerCase();
  // Keyed by the settings too: a change of policy or allow-list counts from the next request.
  const key = [repo.id, login, settings.triggerPolicy, ...settings.allowedUsers].join(" ");
  const known = access.permits.get(a.who.id, key, a.maxAgeMs);
  if (known !== undefined) return known;
  const listed = [...access.allowedUsers, ...settings.allowedUsers].some(
    (user) => user.toLowerCase() === login,
  );
  // As checkPermission decides: only write access under the write policy needs GitHub.
  if (!listed && settings.triggerPolicy !== "allow-list") {
    if (!ask) return undefined;
    access.budget.spend(a.who.id);
  }
  const [owner = "", name = ""] = repo.fullName.split("/");
  const query = {
    owner,
    repo: name,
    username: a.login,
    userId: a.who.id,
    allowedUsers: access.allowedUsers,
  };
  const allowed = (await mayTrigger(octokit, query, settings)).allowed;
  access.permits.set(a.who.id, key, allowed);
  return allowed;
}

/**
 * The repositories worth deciding for the person, each with whether GitHub may be asked about it:
 * those their own token listed on the web (all, if it never did); of the rest, those whose
 * settings are known, for the allow-lists, which ask nothing.
 */
async function candidates(access: ModelAccess, who: Person, repositories: Repository[]) {
  const pushable = await pushableRepositories(access.db, who.id);
  return repositories.flatMap((repo) => {
    const ask = !pushable || pushable.has(repo.id);
    return ask || repo.fileSettings !== null ? [{ repo, ask }] : [];
  });
}

/** The person as GitHub knows them now, to ask about; null when they cannot be asked about. */
async function asking(
  access: ModelAccess,
  who: Person,
  first: Repository | undefined,
  maxAgeMs: number,
): Promise<Asking | null> {
  if (!first) return null;
  const client = clients(access);
  const octokit = await client(first.installationId);
  const login = await currentLogin(octokit, access.logins, access.budget, who.id);
  return login === null ? null : { access, who, login, client, maxAgeMs };
}

export async function listModels(access: ModelAccess, who: Principal): Promise<ChatModel[]> {
  const repositories = await listActiveRepositories(access.db);
  const scratch = { id: SCRATCH, repository: null };
  const modelOf = (repository: Repository) => ({
    id: `${PREFIX}${repository.fullName}`,
    repository,
  });
  if (who.kind === "operator") return [scratch, ...repositories.map(modelOf)];
  access.permits.size(repositories.length);
  const todo = await candidates(access, who, repositories);
  let a: Asking | null;
  try {
    a = await asking(access, who, todo[0]?.repo, FOR_LISTING_MS);
  } catch (error) {
    if (!(error instanceof BudgetSpent)) throw error;
    a = null;
  }
  if (!a) return [];
  const ready = a;
  const allowed: boolean[] = [];
  let unasked = 0;
  let next = 0;
  const work = async () => {
    while (next < todo.length) {
      const i = next++;
      const { repo, ask } = todo[i] as (typeof todo)[number];
      try {
        allowed[i] = (await decide(ready, repo, ask)) === true;
      } catch (error) {
        if (!(error instanceof BudgetSpent)) throw error;
        unasked++;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, todo.length) }, work));
  if (unasked > 0) {
    access.logger.warn(
      { userId: who.id, unasked, budgetPerMinute: access.budget.perMinute },
      "models listed without the repositories GitHub's budget left unasked this minute",
    );
  }
  const models = todo.flatMap(({ repo }, i) => (allowed[i] ? [modelOf(repo)] : []));
  return models.length > 0 ? [scratch, ...models] : [];
}

/** Scratch spends the operator's model budget: only for someone who may use a repository now. */
async function mayUseScratch(access: ModelAccess, who: Person): Promise<Asking | null> {
  const repositories = await listActiveRepositories(access.db);
  access.permits.size(repositories.length);
  const todo = await candidates(access, who, repositories);
  const a = await asking(access, who, todo[0]?.repo, FOR_USE_MS);
  if (!a) return null;
  // What is known first, then questions, one at a time, until someone says yes.
  for (const ask of [false, true]) {
    for (const candidate of todo) {
      if (ask && !candidate.ask) continue;
      if (await decide(a, candidate.repo, ask)) return a;
    }
  }
  return null;
}

/**
 * The model a model id names, if the key may use it, and who asks as GitHub knows them now; 404
 * otherwise, so strangers learn nothing; 429 when the answer needs a question past the budget.
 */
export async function resolveModel(
  access: ModelAccess,
  who: Principal,
  model: string,
): Promise<{ chatModel: ChatModel; who: Principal }> {
  try {
    return await resolve(access, who, model);
  } catch (error) {
    if (!(error instanceof BudgetSpent)) throw error;
    throw new ApiError(
      429,
      "rate_limit_exceeded",
      "rate_limit_exceeded",
      `vmpilot has asked GitHub all it may for you this minute; try again in ${error.retryAfterSeconds} s.`,
      { "retry-after": String(error.retryAfterSeconds) },
    );
  }
}

async function resolve(access: ModelAccess, who: Principal, model: string) {
  if (model === SCRATCH) {
    const scratch = { id: SCRATCH, repository: null };
    if (who.kind === "operator") return { chatModel: scratch, who };
    const a = await mayUseScratch(access, who);
    if (!a) throw unknownModel(model);
    return { chatModel: scratch, who: { ...who, login: a.login } };
  }
  if (!model.startsWith(PREFIX)) throw unknownModel(model);
  const fullName = model.slice(PREFIX.length);
  // Answered from the store, which the installation sync keeps: a name it lacks asks GitHub nothing.
  const repository = await findActiveRepository(access.db, fullName);
  if (!repository) throw unknownModel(model);
  const chatModel = { id: `${PREFIX}${repository.fullName}`, repository };
  if (who.kind === "operator") return { chatModel, who };
  const a = await asking(access, who, repository, FOR_USE_MS);
  if (!a || !(await decide(a, repository, true))) throw unknownModel(model);
  return { chatModel, who: { ...who, login: a.login } };
}
