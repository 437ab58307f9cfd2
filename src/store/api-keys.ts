// Personal API keys of the chat face. The key itself is shown once, at creation; only its hash is
// kept, and a lookup is one probe of the hash's unique index.
import { createHash, randomBytes } from "node:crypto";
import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored } from "./stored-value.ts";

const KEY_PREFIX = "vmp_";

export interface ApiKey {
  id: number;
  name: string;
  ownerLogin: string;
  ownerId: number;
  /** The key's last characters. */
  hint: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

const row = z.object({
  id: bigint,
  name: z.string(),
  owner_login: z.string(),
  owner_id: bigint,
  hint: z.string(),
  created_at: z.date(),
  last_used_at: z.date().nullable(),
  revoked_at: z.date().nullable(),
});

function toApiKey(value: unknown): ApiKey {
  const r = parseStored(row, value, "an api_keys row");
  return {
    id: r.id,
    name: r.name,
    ownerLogin: r.owner_login,
    ownerId: r.owner_id,
    hint: r.hint,
    createdAt: r.created_at,
    lastUsedAt: r.last_used_at,
    revokedAt: r.revoked_at,
  };
}

function hashApiKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** Makes a key for the owner; the returned secret is never stored. */
export async function createApiKey(
  db: Queryable,
  input: { name: string; ownerLogin: string; ownerId: number },
): Promise<{ key: ApiKey; secret: string }> {
  const secret = `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
  const { rows } = await db.query(
    `INSERT INTO api_keys (name, owner_login, owner_id, hash, hint) VALUES ($1, $2, $3, $4, $5)
     RETURNING *`,
    [input.name, input.ownerLogin, input.ownerId, hashApiKey(secret), secret.slice(-4)],
  );
  return { key: toApiKey(rows[0]), secret };
}

/** The live key with this secret, its last use stamped (at most once a minute). */
export async function useApiKey(db: Queryable, secret: string): Promise<ApiKey | undefined> {
  const { rows } = await db.query(
    `UPDATE api_keys SET last_used_at = now()
     WHERE hash = $1 AND revoked_at IS NULL
       AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
     RETURNING *`,
    [hashApiKey(secret)],
  );
  if (rows[0]) return toApiKey(rows[0]);
  const found = await db.query("SELECT * FROM api_keys WHERE hash = $1 AND revoked_at IS NULL", [
    hashApiKey(secret),
  ]);
  return found.rows[0] && toApiKey(found.rows[0]);
}

/** The owner's keys, newest first, revoked ones included. */
export async function listApiKeys(db: Queryable, ownerId: number): Promise<ApiKey[]> {
  const { rows } = await db.query(
    "SELECT * FROM api_keys WHERE owner_id = $1 ORDER BY id DESC LIMIT 200",
    [ownerId],
  );
  return rows.map(toApiKey);
}

/** Revokes one of the owner's keys; false when the owner has no such live key. */
export async function revokeApiKey(db: Queryable, id: number, ownerId: number): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE api_keys SET revoked_at = now()
     WHERE id = $1 AND owner_id = $2 AND revoked_at IS NULL`,
    [id, ownerId],
  );
  return rowCount === 1;
}
