// Where the app is installed, as GitHub says: asked with the app's own client (a JWT) or with an
// installation's. Octokit pages through the lists and throttles the calls.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import type { ListedInstallation, ListedRepository } from "../store/installations.ts";
import { parseAnswer } from "./answer.ts";

const Installation = z.object({
  id: z.number().int(),
  // An enterprise's installation has a slug where an account has its login.
  account: z
    .object({
      login: z.string().optional(),
      slug: z.string().optional(),
      type: z.string().optional(),
    })
    .nullable(),
  suspended_at: z.string().nullable().optional(),
});

const Repository = z.object({ id: z.number().int(), full_name: z.string().min(1) });

function toInstallation(installation: z.infer<typeof Installation>): ListedInstallation {
  return {
    id: installation.id,
    accountLogin: installation.account?.login ?? installation.account?.slug ?? null,
    accountType: installation.account?.type ?? null,
    suspended: Boolean(installation.suspended_at),
  };
}

function toRepository(repository: z.infer<typeof Repository>): ListedRepository {
  return { id: repository.id, fullName: repository.full_name };
}

/** Every installation of the app, suspended ones too (the app's client). */
export async function listInstallations(app: ProbotOctokit): Promise<ListedInstallation[]> {
  const route = "GET /app/installations";
  const data = await app.paginate(route, { per_page: 100 });
  return parseAnswer(z.array(Installation), data, route).map(toInstallation);
}

/** The repositories an installation covers (that installation's client). */
export async function listInstallationRepositories(
  installation: ProbotOctokit,
): Promise<ListedRepository[]> {
  const route = "GET /installation/repositories";
  const data = await installation.paginate(route, { per_page: 100 });
  return parseAnswer(z.array(Repository), data, route).map(toRepository);
}
