import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from "node:crypto";
import type { IncomingMessage } from "node:http";
import { z } from "zod";
import { parseCookies, serializeCookie } from "./http.ts";

/** What the session cookie carries. The GitHub token inside is encrypted, the rest only signed. */
export interface Session {
  login: string;
  userId: number;
  /** The user's GitHub token, decrypted; it never leaves the server. */
  token: string;
  /** Bound to this session; every form must echo it. */
  csrf: string;
  /** The server-side session (web_sessions) that signing out revokes. */
  sid: string;
}

const SessionPayload = z.object({
  login: z.string(),
  userId: z.number().int(),
  /** AES-256-GCM: iv.ciphertext.tag, base64url. */
  token: z.string(),
  csrf: z.string(),
  sid: z.string(),
  /** Expiry, epoch seconds. */
  exp: z.number(),
});
type SessionPayload = z.infer<typeof SessionPayload>;

const StatePayload = z.object({ state: z.string(), next: z.string(), exp: z.number() });

// GitHub App user tokens expire after 8 hours; the session does not outlive them.
export const SESSION_SECONDS = 8 * 60 * 60;
const STATE_SECONDS = 10 * 60;

export interface OAuthState {
  state: string;
  /** Where to go after signing in, a local path. */
  next: string;
}

export class CookieJar {
  readonly #signKey: Buffer;
  readonly #encKey: Buffer;
  readonly #secure: boolean;
  readonly sessionName: string;
  readonly stateName: string;

  constructor(secret: string, secure: boolean) {
    this.#signKey = derive(secret, "vmpilot session signature");
    this.#encKey = derive(secret, "vmpilot session token encryption");
    this.#secure = secure;
    // __Host- cookies cannot be set by a sibling subdomain or over plain HTTP.
    this.sessionName = secure ? "__Host-vmpilot_session" : "vmpilot_session";
    this.stateName = secure ? "__Host-vmpilot_oauth" : "vmpilot_oauth";
  }

  readSession(req: IncomingMessage, now = Date.now()): Session | null {
    const payload = this.#read(req, this.sessionName, SessionPayload);
    if (!payload || payload.exp * 1000 <= now) return null;
    const token = this.#decrypt(payload.token);
    if (token === null) return null;
    const { login, userId, csrf, sid } = payload;
    return { login, userId, token, csrf, sid };
  }

  sessionCookie(
    user: { login: string; userId: number; token: string; sid: string },
    now = Date.now(),
  ): string {
    const payload: SessionPayload = {
      login: user.login,
      userId: user.userId,
      token: this.#encrypt(user.token),
      csrf: randomBytes(32).toString("base64url"),
      sid: user.sid,
      exp: Math.floor(now / 1000) + SESSION_SECONDS,
    };
    return this.#write(this.sessionName, payload, SESSION_SECONDS);
  }

  clearSession(): string {
    return serializeCookie(this.sessionName, "", { maxAgeSeconds: 0, secure: this.#secure });
  }

  readState(req: IncomingMessage, now = Date.now()): OAuthState | null {
    const payload = this.#read(req, this.stateName, StatePayload);
    if (!payload || payload.exp * 1000 <= now) return null;
    return { state: payload.state, next: payload.next };
  }

  stateCookie(state: OAuthState, now = Date.now()): string {
    const exp = Math.floor(now / 1000) + STATE_SECONDS;
    return this.#write(this.stateName, { ...state, exp }, STATE_SECONDS);
  }

  clearState(): string {
    return serializeCookie(this.stateName, "", { maxAgeSeconds: 0, secure: this.#secure });
  }

  #write(name: string, payload: object, maxAgeSeconds: number): string {
    // The cookie name is signed too, so a state cookie cannot pose as a session.
    const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
    const value = `${body}.${this.#sign(name, body)}`;
    return serializeCookie(name, value, { maxAgeSeconds, secure: this.#secure });
  }

  #read<T>(req: IncomingMessage, name: string, schema: z.ZodType<T>): T | null {
    const raw = parseCookies(req).get(name);
    const dot = raw?.lastIndexOf(".") ?? -1;
    if (!raw || dot < 1) return null;
    const body = raw.slice(0, dot);
    if (!safeEqual(raw.slice(dot + 1), this.#sign(name, body))) return null;
    try {
      const parsed = schema.safeParse(JSON.parse(Buffer.from(body, "base64url").toString("utf8")));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }

  #sign(name: string, body: string): string {
    return createHmac("sha256", this.#signKey).update(`${name}=${body}`).digest("base64url");
  }

  #encrypt(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.#encKey, iv);
    const data = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return [iv, data, cipher.getAuthTag()].map((b) => b.toString("base64url")).join(".");
  }

  #decrypt(sealed: string): string | null {
    const [iv, data, tag] = sealed.split(".").map((p) => Buffer.from(p, "base64url"));
    if (!iv || !data || !tag || iv.length !== 12 || tag.length !== 16) return null;
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.#encKey, iv);
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(data), decipher.final()]).toString("utf8");
    } catch {
      return null;
    }
  }
}

export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function randomToken(): string {
  return randomBytes(24).toString("base64url");
}

function derive(secret: string, info: string): Buffer {
  return Buffer.from(hkdfSync("sha256", secret, "vmpilot", info, 32));
}
