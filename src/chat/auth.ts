// Who is asking: the operator's key (VMPILOT_API_KEY) or a person's key from the /keys page. A
// person's key acts with its owner's rights, checked against GitHub on every request.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { useApiKey } from "../store/api-keys.ts";
import type { Queryable } from "../store/sql.ts";
import { badKey } from "./errors.ts";

export interface Principal {
  /** A GitHub login, or "operator". */
  owner: string;
  operator: boolean;
  /** What the rate limit counts by. */
  keyId: string;
}

const OPERATOR = "operator";

const digest = (text: string) => createHash("sha256").update(text).digest();

function bearer(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization ?? "";
  const match = /^Bearer\s+(\S{1,200})$/i.exec(header.trim());
  return match?.[1];
}

export async function authenticate(
  req: IncomingMessage,
  db: Queryable,
  operatorKey: string | undefined,
): Promise<Principal> {
  const key = bearer(req);
  if (!key) throw badKey();
  // Compared as digests: equal lengths, and no early exit that times the prefix.
  if (operatorKey && timingSafeEqual(digest(key), digest(operatorKey))) {
    return { owner: OPERATOR, operator: true, keyId: OPERATOR };
  }
  const found = await useApiKey(db, key);
  if (!found) throw badKey();
  return { owner: found.ownerLogin, operator: false, keyId: String(found.id) };
}
