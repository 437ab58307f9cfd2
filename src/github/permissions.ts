// Who may make vmpilot act: people who can push to the repository, or who are on its allow-list.
import type { ProbotOctokit } from "probot";
import { githubStatus } from "./request-status.ts";

const WRITE_ROLES: ReadonlySet<string> = new Set(["admin", "maintain", "write"]);

export interface PermissionQuery {
  owner: string;
  repo: string;
  username: string;
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

async function collaboratorRole(octokit: ProbotOctokit, query: PermissionQuery): Promise<string> {
  try {
    const { data } = await octokit.rest.repos.getCollaboratorPermissionLevel({
      owner: query.owner,
      repo: query.repo,
      username: query.username,
    });
    // role_name distinguishes maintain and triage, which `permission` folds into write and read.
    return data.role_name || data.permission || "none";
  } catch (error) {
    // Not a collaborator (or no such user): GitHub answers 404.
    if (githubStatus(error) === 404) return "none";
    throw error;
  }
}
