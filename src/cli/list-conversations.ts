import { listCliConversations } from "../store/cli-conversations.ts";
import { resolveTarget } from "./invocation.ts";
import type { ProgressOutput } from "./progress.ts";
import { formatUsd } from "./progress.ts";
import { cliDataDir, withStore } from "./store.ts";
import { terminalText } from "./terminal-text.ts";

function lastUse(at: Date): string {
  return at.toISOString().slice(0, 16).replace("T", " ");
}

/** `vmpilot conversations`: the repository's conversations, the latest first, as a table. */
export async function listConversations(
  repo: string,
  io: { stdout: ProgressOutput; env: NodeJS.ProcessEnv },
): Promise<number> {
  const target = await resolveTarget(repo);
  const conversations = await withStore(io.env, cliDataDir(io.env), (db) =>
    listCliConversations(db, target.key),
  );
  if (conversations.length === 0) {
    io.stdout.write(`no conversations for ${terminalText(target.key)} yet\n`);
    return 0;
  }
  const rows = [
    ["id", "branch", "turns", "cost", "last use (UTC)", "first line"],
    ...conversations.map((conversation) => [
      String(conversation.id),
      terminalText(conversation.branch),
      String(conversation.turns),
      formatUsd(conversation.costUsd),
      lastUse(conversation.updatedAt),
      // The first line of a task, which may have been piped in.
      terminalText(
        conversation.title.length > 60 ? `${conversation.title.slice(0, 59)}…` : conversation.title,
      ),
    ]),
  ];
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => row[i]?.length ?? 0))) ?? [];
  for (const row of rows) {
    io.stdout.write(
      `${row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd()}\n`,
    );
  }
  return 0;
}
