// Who may see what. Every answer comes from GitHub, asked with the viewer's own token.
import { settingsOver } from "../jobs/run/settings.ts";
import { getApiConversation } from "../store/api-conversations.ts";
import { getRepository } from "../store/installations.ts";
import type { Job } from "../store/jobs.ts";
import { rememberPushableRepositories } from "../store/user-repositories.ts";
import type { WebServices } from "./context.ts";
import type { UserRepo } from "./github-user.ts";
import { HttpError } from "./http.ts";
import type { Session } from "./session.ts";

/**
 * The repositories the user can see through the app's installations, with their permissions. The
 * ones they can push to are remembered: the chat face asks GitHub about those alone.
 */
export async function userRepos(web: WebServices, session: Session): Promise<UserRepo[]> {
  const repos = await web.github(session).repos();
  const pushable = repos.filter((r) => r.push).map((r) => r.id);
  await rememberPushableRepositories(web.pool, session.userId, pushable);
  return repos;
}

/** The repositories the user can read through the app's installations. */
export async function readableRepos(web: WebServices, session: Session): Promise<UserRepo[]> {
  return (await userRepos(web, session)).filter((r) => r.pull);
}

/** The repository, if the user administers it; otherwise 404, so strangers learn nothing. */
export async function administeredRepo(
  web: WebServices,
  session: Session,
  fullName: string,
): Promise<UserRepo> {
  const wanted = fullName.toLowerCase();
  const repo = (await userRepos(web, session)).find(
    (r) => r.fullName.toLowerCase() === wanted && r.admin,
  );
  if (!repo) throw new HttpError(404, "No repository you administer has that name.");
  return repo;
}

/**
 * Readers of the repository see its jobs. Anyone else, signed in or not, sees them only on a
 * public repository whose settings turn publicJobs on.
 */
export async function canViewJob(
  web: WebServices,
  session: Session | null,
  job: Job,
): Promise<boolean> {
  // A chat-face conversation is its owner's alone: a person, by GitHub user id. The operator's
  // conversations have no page: no login, "operator" or any other, is the operator.
  if (job.trigger === "chat") {
    if (!session) return false;
    const owner = (await getApiConversation(web.pool, job.conversationId))?.owner;
    return owner?.kind === "user" && owner.id === session.userId;
  }
  // An issue's job, or a scheduled automation's (a repository's, with no issue): the repository's.
  const { repositoryId } = job;
  if (repositoryId === null) return false;
  if (session) {
    const access = await web.github(session).repoAccess(repositoryId);
    if (access?.pull) return true;
  }
  const facts = await web.publicFacts.get(String(repositoryId), async () => {
    const anonymous = web.github(null);
    const access = await anonymous.repoAccess(repositoryId);
    if (!access || access.private) return { isPublic: false, file: null };
    const load = await anonymous.repoConfig(access.fullName);
    return { isPublic: true, file: load.ok ? load.config : null };
  });
  if (!facts.isPublic) return false;
  const repository = await getRepository(web.pool, repositoryId);
  return settingsOver(repository, facts.file, web.defaults).values.publicJobs;
}
