// "vmpilot config" check runs (config-check.ts): light, never held by a key, queued by the intake
// inside its transaction.
import type { PgBoss } from "pg-boss";
import { z } from "zod";
import type { Queryable } from "../../store/sql.ts";
import type { SideQueue } from "./side-queue.ts";

/** Skills one check reads at most. */
export const MAX_SKILL_CHECKS = 50;

const ConfigCheckData = z.object({
  installationId: z.number().int(),
  repositoryId: z.number().int(),
  owner: z.string(),
  repo: z.string(),
  headSha: z.string(),
  /**
   * What tells whether the head changes `.github/vmpilot.yml` or a skill: the pull request's
   * files, or the push's commits (listed: they name the file; not listed: too many commits to
   * tell), with the skills' SKILL.md files they add or change.
   */
  changes: z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("pull_request"), number: z.number().int() }),
    z.object({
      kind: z.literal("push"),
      listed: z.boolean(),
      skills: z.array(z.string()).max(MAX_SKILL_CHECKS).default([]),
    }),
  ]),
});
export type ConfigCheckRequest = z.input<typeof ConfigCheckData>;

/** Runs the config checks of this process's share; a throw retries the check. */
export type ConfigCheckHook = (check: ConfigCheckRequest, signal: AbortSignal) => Promise<void>;

export const configChecks: SideQueue<ConfigCheckHook> = {
  name: "vmpilot-config-checks",
  options: { retryLimit: 3, retryDelay: 5, retryBackoff: true, notify: false },
  inTransactions: true,
  handler: (onConfigCheck) => (check) =>
    onConfigCheck(ConfigCheckData.parse(check.data), check.signal),
};

export async function enqueueConfigCheck(
  boss: PgBoss,
  client: Queryable,
  check: ConfigCheckRequest,
): Promise<void> {
  const executeSql = (text: string, values?: unknown[]) => client.query(text, values);
  await boss.insert(configChecks.name, [{ data: check }], { db: { executeSql } });
}
