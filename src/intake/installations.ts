// installation and installation_repositories deliveries: keep the installations and repositories
// tables in step with where the app is installed.
import type { Context } from "probot";
import type { Database } from "../store/database.ts";
import { recordDelivery } from "../store/deliveries.ts";
import { upsertInstallation, upsertRepository } from "../store/installations.ts";
import { withTransaction } from "../store/sql.ts";

type InstallationPayload = Context<"installation">["payload"];
type RepositoriesPayload = Context<"installation_repositories">["payload"];

interface RepoRef {
  id: number;
  full_name: string;
}

export async function recordInstallation(
  db: Database,
  deliveryId: string,
  event: "installation" | "installation_repositories",
  payload: InstallationPayload | RepositoriesPayload,
): Promise<boolean> {
  const installation = payload.installation;
  const account = installation.account as { login?: string; slug?: string; type?: string } | null;
  return withTransaction(db.pool, async (client) => {
    const fresh = await recordDelivery(client, {
      id: deliveryId,
      event,
      action: payload.action,
      installationId: installation.id,
    });
    if (!fresh) return false;
    await upsertInstallation(client, {
      id: installation.id,
      accountLogin: account?.login ?? account?.slug ?? null,
      accountType: account?.type ?? null,
      ...(payload.action === "suspend" ? { suspended: true } : {}),
      ...(payload.action === "unsuspend" ? { suspended: false } : {}),
      ...(payload.action === "deleted" ? { deleted: true } : {}),
      ...(payload.action === "created" ? { deleted: false, suspended: false } : {}),
    });
    const added: RepoRef[] =
      "repositories_added" in payload
        ? payload.repositories_added
        : payload.action === "created"
          ? (payload.repositories ?? [])
          : [];
    const removed: RepoRef[] = (
      "repositories_removed" in payload ? payload.repositories_removed : []
    ).flatMap((repo) =>
      repo.id && repo.full_name ? [{ id: repo.id, full_name: repo.full_name }] : [],
    );
    for (const [repos, isRemoved] of [
      [added, false],
      [removed, true],
    ] as const) {
      for (const repo of repos) {
        await upsertRepository(client, {
          id: repo.id,
          installationId: installation.id,
          fullName: repo.full_name,
          removed: isRemoved,
        });
      }
    }
    return true;
  });
}
