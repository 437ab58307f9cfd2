import { createHash } from "node:crypto";
import type { Queryable } from "./sql.ts";

const hash = (id: string) => createHash("sha256").update(id).digest("hex");

export async function createWebSession(
  db: Queryable,
  session: { id: string; userId: number; expiresAt: Date },
): Promise<void> {
  await db.query("INSERT INTO web_sessions (id_hash, user_id, expires_at) VALUES ($1, $2, $3)", [
    hash(session.id),
    session.userId,
    session.expiresAt,
  ]);
}

/**
 * Whether the session was started here for this GitHub user (by id, never a login), has not
 * expired and was not signed out.
 */
export async function isWebSessionLive(
  db: Queryable,
  session: { id: string; userId: number },
): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM web_sessions
      WHERE id_hash = $1 AND user_id = $2 AND revoked_at IS NULL AND expires_at > now()`,
    [hash(session.id), session.userId],
  );
  return rows.length > 0;
}

/** Ends the session everywhere; expired rows are swept at the same time. */
export async function revokeWebSession(db: Queryable, id: string): Promise<void> {
  await db.query("UPDATE web_sessions SET revoked_at = now() WHERE id_hash = $1", [hash(id)]);
  await db.query("DELETE FROM web_sessions WHERE expires_at < now() - interval '1 day'");
}
