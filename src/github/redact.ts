// Secret redaction for everything that leaves the process: log lines and GitHub comments.
// Patterns are anchored on fixed prefixes and use disjoint character classes, so each runs in
// linear time even on megabyte inputs.

export const REDACTED = "[REDACTED]";

const PATTERNS: readonly RegExp[] = [
  // PEM private keys; an unterminated block is redacted to the end of the text.
  /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|[\s\S]*$)/g,
  // GitHub personal, OAuth, user-to-server, installation (ghs_) and refresh tokens.
  /\bgh[pousr]_[A-Za-z0-9]{20,255}/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,255}/g,
  // Legacy installation tokens.
  /\bv1\.[0-9a-f]{40}\b/g,
  /\bsk-ant-[A-Za-z0-9_-]{10,}/g,
  // AWS access key ids, and secret keys when labelled as such.
  /\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|AKPA|ANPA|ANVA|APKA|AROA)[A-Z0-9]{16}\b/g,
  /(?<=aws_secret_access_key["']?\s{0,5}[:=]\s{0,5}["']?)[A-Za-z0-9/+=]{40}/gi,
  // JSON Web Tokens (header.payload.signature, header and payload are base64url JSON).
  /\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g,
  // Authorization headers and bearer credentials in any rendering (HTTP, JSON, curl).
  /(?<=\bauthorization["']?\s{0,5}[:=]\s{0,5}["']?(?:(?:bearer|token|basic)\s{1,5})?)(?!(?:bearer|token|basic)\s)[^\s"',;]{4,}/gi,
  /(?<=\bbearer\s{1,5})[A-Za-z0-9._~+/=-]{8,}/gi,
  // Passwords in URLs: scheme://user:password@host.
  /(?<=\b[a-z][a-z0-9+.-]{0,20}:\/\/[^\s/:@]{1,200}:)[^\s/@]{1,500}(?=@)/gi,
];

// Secrets shorter than this are not registered: replacing every "secret" or "1234" would make
// logs unreadable and protect nothing.
const MIN_SECRET_LENGTH = 8;
const registered = new Set<string>();

/** Adds a configured secret (webhook secret, API key, ...) so that it is redacted verbatim. */
export function registerSecret(value: string | undefined): void {
  if (!value || value.length < MIN_SECRET_LENGTH) return;
  registered.add(value);
  // Multi-line secrets (private keys) are also seen with escaped newlines, e.g. in JSON.
  if (value.includes("\n")) registered.add(value.replaceAll("\n", "\\n"));
}

/** Forgets all registered secrets (tests). */
export function clearRegisteredSecrets(): void {
  registered.clear();
}

export function redact(text: string): string {
  let out = text;
  for (const secret of registered) {
    if (out.includes(secret)) out = out.replaceAll(secret, REDACTED);
  }
  for (const pattern of PATTERNS) {
    out = out.replace(pattern, REDACTED);
  }
  return out;
}

/** Redacts every string inside a JSON-like value; returns the input when nothing changed. */
export function redactDeep<T>(value: T, depth = 0): T {
  if (typeof value === "string") return redact(value) as T;
  if (value === null || typeof value !== "object" || depth > 8) return value;
  if (Array.isArray(value)) {
    let changed = false;
    const out = value.map((item) => {
      const next = redactDeep(item, depth + 1);
      if (next !== item) changed = true;
      return next;
    });
    return (changed ? out : value) as T;
  }
  if (value instanceof Error) {
    const copy = Object.assign(Object.create(Object.getPrototypeOf(value)), value) as Error;
    copy.message = redact(value.message);
    if (value.stack) copy.stack = redact(value.stack);
    return copy as T;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  let changed = false;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const next = redactDeep(item, depth + 1);
    if (next !== item) changed = true;
    out[key] = next;
  }
  return (changed ? out : value) as T;
}
