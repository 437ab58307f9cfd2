// Personal API keys of the chat face. The key itself is shown once, at creation; only its hash is
// kept, and a lookup is one probe of the hash's unique index.
import { createHash, randomBytes } from "node:crypto";
import type pg from "pg";
import { z } from "zod";
import { type Queryable, withTransaction } from "./sql.ts";
import { bigint, queryRows, row } from "./stored-value.ts";

const KEY_PREFIX = "vmp_";
/** Live keys one person may have: each is a way in, and a budget of requests, of its own. */
const MAX_LIVE_KEYS = 20;
/** The class of the advisory locks on a person's keys (the two-key form, apart from single keys). */
const KEYS_LOCK = 726_302;

const ApiKeyRow = row({
  id: bigint,
  name: z.string(),
  /** The owner's login when last seen, to show; the owner is ownerId. */
  owner_login: z.string(),
  /** GitHub's user id of the person who made it. */
  owner_id: bigint,
  /** The key's last characters. */
  hint: z.string(),
  created_at: z.date(),
  last_used_at: z.date().nullable(),
  revoked_at: z.date().nullable(),
});
export type ApiKey = z.output<typeof ApiKeyRow>;

function hashApiKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** The owner has MAX_LIVE_KEYS live keys already. */
export class TooManyKeys extends Error {
  constructor() {
    super(
      `You have ${MAX_LIVE_KEYS} keys, the most one person may have. Revoke one to make another.`,
    );
    this.name = "TooManyKeys";
  }
}

/**
 * Makes a key for the owner, or throws TooManyKeys. The returned secret is never stored. Counted
 * under a lock on the owner, so that concurrent requests cannot pass the cap together.
 */
export function createApiKey(
  pool: pg.Pool,
  input: { name: string; ownerLogin: string; ownerId: number },
): Promise<{ key: ApiKey; secret: string }> {
  const secret = `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
  return withTransaction(pool, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock($1, $2::integer)", [
      KEYS_LOCK,
      // The two-key form takes integers; ids past them share a lock, which only serializes more.
      input.ownerId % 2 ** 31,
    ]);
    const [key] = await queryRows(
      client,
      `INSERT INTO api_keys (name, owner_login, owner_id, hash, hint)
       SELECT $1, $2, $3, $4, $5
        WHERE (SELECT count(*) FROM api_keys WHERE owner_id = $3 AND revoked_at IS NULL) < $6
       RETURNING *`,
      [
        input.name,
        input.ownerLogin,
        input.ownerId,
        hashApiKey(secret),
        secret.slice(-4),
        MAX_LIVE_KEYS,
      ],
      ApiKeyRow,
      "a new api_keys row",
    );
    if (!key) throw new TooManyKeys();
    return { key, secret };
  });
}

/** The login the owner's keys show, as GitHub gave it when they signed in. */
export async function renameKeyOwner(db: Queryable, ownerId: number, login: string): Promise<void> {
  await db.query("UPDATE api_keys SET owner_login = $2 WHERE owner_id = $1 AND owner_login <> $2", [
    ownerId,
    login,
  ]);
}

/**
 * The live key with this secret, its last use stamped (at most once a minute); with `usedBefore`,
 * only a key that was used before.
 */
export async function useApiKey(
  db: Queryable,
  secret: string,
  usedBefore = false,
): Promise<ApiKey | undefined> {
  const before = usedBefore ? "AND last_used_at IS NOT NULL" : "";
  const [used] = await queryRows(
    db,
    `UPDATE api_keys SET last_used_at = now()
     WHERE hash = $1 AND revoked_at IS NULL ${before}
       AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
     RETURNING *`,
    [hashApiKey(secret)],
    ApiKeyRow,
    "a used api_keys row",
  );
  if (used) return used;
  const [found] = await queryRows(
    db,
    `SELECT * FROM api_keys WHERE hash = $1 AND revoked_at IS NULL ${before}`,
    [hashApiKey(secret)],
    ApiKeyRow,
    "an api_keys row",
  );
  return found;
}

/** The owner's keys, newest first, revoked ones included. */
export async function listApiKeys(db: Queryable, ownerId: number): Promise<ApiKey[]> {
  return queryRows(
    db,
    "SELECT * FROM api_keys WHERE owner_id = $1 ORDER BY id DESC LIMIT 200",
    [ownerId],
    ApiKeyRow,
    `the api_keys rows of user ${ownerId}`,
  );
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
