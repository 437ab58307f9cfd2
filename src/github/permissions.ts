// Who may make vmpilot act: people who can push to the repository, or who are on its allow-list.
// A person is their numeric id: a login asked about must still be theirs (see users.ts).
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import { parseAnswer } from "./answer.ts";
import { githubStatus } from "./request-status.ts";
import { loginOf } from "./users.ts";

const WRITE_ROLES: ReadonlySet<string> = new Set(["admin", "maintain", "write"]);

export interface PermissionQuery {
  owner: string;
  repo: string;
  username: string;
  /** The person's GitHub id, where the door had it: GitHub's answer must be about them. */
  userId?: number;
  /** Logins allowed regardless of their role (environment and repository settings). */
  allowedUsers: readonly string[];
  /** "allow-list": only allowedUsers may trigger, whatever their role. Default "write". */
  policy?: "write" | "allow-list";
}

export interface PermissionResult {
  allowed: boolean;
  /** How the decision was made: "allow-list", or the role GitHub reported ("none" if unknown). */
  via: string;
}

export async function checkPermission(
  octokit: ProbotOctokit,
  query: PermissionQuery,
): Promise<PermissionResult> {
  const login = query.username.toLowerCase();
  if (query.allowedUsers.some((user) => user.toLowerCase() === login)) {
    return { allowed: true, via: "allow-list" };
  }
  if (query.policy === "allow-list") return { allowed: false, via: "allow-list" };
  const role = await collaboratorRole(octokit, query);
  return { allowed: WRITE_ROLES.has(role), via: role };
}

const Permission = z.object({
  permission: z.string().optional(),
  role_name: z.string().optional(),
  user: z.object({ id: z.number().int().optional() }).nullish(),
});

async function collaboratorRole(octokit: ProbotOctokit, query: PermissionQuery): Promise<string> {
  const answer = await permissionOf(octokit, query, query.username);
  const id = answer?.user?.id;
  if (query.userId === undefined || id === undefined || id === query.userId) return roleOf(answer);
  // The login changed hands since the door saw it: ask about the login the person has now.
  const login = await loginOf(octokit, query.userId);
  if (login === null || login.toLowerCase() === query.username.toLowerCase()) return "none";
  const now = await permissionOf(octokit, query, login);
  return now?.user?.id === query.userId ? roleOf(now) : "none";
}

function roleOf(answer: z.infer<typeof Permission> | undefined): string {
  // role_name distinguishes maintain and triage, which `permission` folds into write and read.
  return answer?.role_name || answer?.permission || "none";
}

async function permissionOf(octokit: ProbotOctokit, query: PermissionQuery, username: string) {
  try {
    const { data } = await octokit.rest.repos.getCollaboratorPermissionLevel({
      owner: query.owner,
      repo: query.repo,
      username,
    });
    return parseAnswer(
      Permission,
      data,
      "GET /repos/{owner}/{repo}/collaborators/{username}/permission",
    );
  } catch (error) {
    // Not a collaborator (or no such user): GitHub answers 404.
    if (githubStatus(error) === 404) return undefined;
    throw error;
  }
}
