// Who may see what. Every answer comes from GitHub, asked with the viewer's own token.
import { checkRepoConfig, type RepoConfig, resolveSettings } from "../config/repo-config.ts";
import { getRepository } from "../store/installations.ts";
import { isIssueJob, type Job } from "../store/jobs.ts";
import type { WebServices } from "./context.ts";
import type { UserRepo } from "./github-user.ts";
import { HttpError } from "./http.ts";
import type { Session } from "./session.ts";

/** The repositories the user can read through the app's installations. */
export async function readableRepos(web: WebServices, session: Session): Promise<UserRepo[]> {
  return (await web.github(session).repos()).filter((r) => r.pull);
}

/** The repository, if the user administers it; otherwise 404, so strangers learn nothing. */
export async function administeredRepo(
  web: WebServices,
  session: Session,
  fullName: string,
): Promise<UserRepo> {
  const wanted = fullName.toLowerCase();
  const repo = (await web.github(session).repos()).find(
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
  // A chat-face conversation is its key owner's alone.
  if (!isIssueJob(job)) return session?.login.toLowerCase() === job.requester.toLowerCase();
  if (session) {
    const access = await web.github(session).repoAccess(job.repositoryId);
    if (access?.pull) return true;
  }
  const facts = await web.publicFacts.get(String(job.repositoryId), async () => {
    const anonymous = web.github(null);
    const access = await anonymous.repoAccess(job.repositoryId);
    if (!access || access.private) return { isPublic: false, file: null };
    const load = await anonymous.repoConfig(access.fullName);
    return { isPublic: true, file: load.ok ? load.config : null };
  });
  if (!facts.isPublic) return false;
  const repository = await getRepository(web.pool, job.repositoryId);
  const page = pageSettings(repository?.settings);
  const resolved = resolveSettings({ defaults: web.defaults, page, file: facts.file });
  return resolved.values.publicJobs;
}

/** Stored page settings; anything the schema no longer accepts is ignored rather than fatal. */
export function pageSettings(stored: Record<string, unknown> | undefined): RepoConfig | null {
  if (!stored) return null;
  const parsed = checkRepoConfig(stored);
  return parsed.ok ? parsed.config : null;
}
