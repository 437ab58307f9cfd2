// Who is asking: the operator's key (VMPILOT_API_KEY) or a person's key from the /keys page. A
// person is GitHub's numeric user id, never a login (a login can be "operator", or a name someone
// gave up); their key acts with their rights, checked against GitHub on every request.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { clientAddress } from "../http/client-address.ts";
import type { ConversationOwner } from "../store/api-conversations.ts";
import { countKeyFailure, keyFailures } from "../store/api-key-failures.ts";
import { useApiKey } from "../store/api-keys.ts";
import { noteOperatorKey, operatorKeySeen } from "../store/operator-keys.ts";
import type { Queryable } from "../store/sql.ts";
import { ApiError, badKey } from "./errors.ts";

export type Principal = ConversationOwner;

/**
 * Wrong keys one client address may send in a window. Past them, the address is refused until the
 * window (from its first wrong key) is over, whatever key it sends, except a key that was right
 * before: a right key found by guessing must not get in, and behind a proxy or a NAT many people
 * share the address.
 */
const KEY_FAILURES = { max: 10, windowSeconds: 10 * 60 };

const digest = (text: string) => createHash("sha256").update(text).digest();

function bearer(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization ?? "";
  const match = /^Bearer\s+(\S{1,200})$/i.exec(header.trim());
  return match?.[1];
}

/** The key's principal; a 401 for no key or a wrong one, a 429 for an address held back. */
export async function authenticate(
  req: IncomingMessage,
  db: Queryable,
  operatorKey: string | undefined,
  addressHeader?: string,
): Promise<Principal> {
  const address = clientAddress(req, addressHeader);
  const key = bearer(req);
  const held = await keyFailures(db, address, KEY_FAILURES.windowSeconds);
  if (held.failures >= KEY_FAILURES.max) {
    const known = key && (await principalOf(db, key, operatorKey, true));
    if (known) return known;
    throw new ApiError(
      429,
      "rate_limit_exceeded",
      "rate_limit_exceeded",
      `Too many incorrect API keys from this address. Try again in ${held.retryAfterSeconds} s.`,
      { "retry-after": String(held.retryAfterSeconds) },
    );
  }
  // No key at all is no guess: it is refused without counting.
  if (!key) throw badKey();
  const who = await principalOf(db, key, operatorKey, false);
  if (who) return who;
  await countKeyFailure(db, address, KEY_FAILURES.windowSeconds);
  throw badKey();
}

/** The key's principal, if it is right (and, with `seenBefore`, was right before). */
async function principalOf(
  db: Queryable,
  key: string,
  operatorKey: string | undefined,
  seenBefore: boolean,
): Promise<Principal | undefined> {
  // Compared as digests: equal lengths, and no early exit that times the prefix.
  const given = digest(key);
  if (operatorKey && timingSafeEqual(given, digest(operatorKey))) {
    const hex = given.toString("hex");
    if (!(await operatorKeySeen(db, hex))) {
      if (seenBefore) return undefined;
      await noteOperatorKey(db, hex);
    }
    return { kind: "operator" };
  }
  const found = await useApiKey(db, key, seenBefore);
  if (!found) return undefined;
  return { kind: "user", id: found.ownerId, login: found.ownerLogin };
}

/** The login to show for the principal. */
export const loginOf = (who: ConversationOwner): string =>
  who.kind === "operator" ? "operator" : who.login;
