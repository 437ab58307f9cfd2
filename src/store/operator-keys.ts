// The operator's key (VMPILOT_API_KEY) once it was right, by its SHA-256, for an address held back
// for wrong keys (chat/auth.ts). Kept by digest, so a new operator key is a key not seen yet.
import type { Queryable } from "./sql.ts";

export async function operatorKeySeen(db: Queryable, digest: string): Promise<boolean> {
  const { rows } = await db.query("SELECT 1 FROM verified_operator_keys WHERE digest = $1", [
    digest,
  ]);
  return rows.length > 0;
}

export async function noteOperatorKey(db: Queryable, digest: string): Promise<void> {
  await db.query(
    "INSERT INTO verified_operator_keys (digest) VALUES ($1) ON CONFLICT (digest) DO NOTHING",
    [digest],
  );
}
