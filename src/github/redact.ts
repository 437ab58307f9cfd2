// Secret redaction for everything that leaves the process: log lines and GitHub comments.
// Patterns are anchored on fixed prefixes and use disjoint character classes, so each runs in
// linear time even on megabyte inputs.

export const REDACTED = "[REDACTED]";

// One row per secret kind. Rows named after a gitleaks rule id (github.com/gitleaks/gitleaks,
// config/gitleaks.toml) follow that rule's prefix, so they can be kept in sync with it; no
// maintained pattern list is available as a dependency.
const PATTERNS: ReadonlyArray<{ id: string; pattern: RegExp }> = [
  // An unterminated block is redacted to the end of the text.
  {
    id: "private-key",
    pattern:
      /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|[\s\S]*$)/g,
  },
  // Personal, OAuth, user-to-server, installation (ghs_) and refresh tokens.
  { id: "github-pat", pattern: /\bgh[pousr]_[A-Za-z0-9]{20,255}/g },
  { id: "github-fine-grained-pat", pattern: /\bgithub_pat_[A-Za-z0-9_]{20,255}/g },
  { id: "github-legacy-installation-token", pattern: /\bv1\.[0-9a-f]{40}\b/g },
  // Covers Anthropic (sk-ant-) and OpenAI (sk-, sk-proj-, sk-svcacct-) keys.
  { id: "openai-api-key", pattern: /\bsk-[A-Za-z0-9_-]{20,255}/g },
  { id: "anthropic-api-key", pattern: /\bsk-ant-[A-Za-z0-9_-]{10,}/g },
  // vmpilot's own chat-face keys (store/api-keys.ts): a person may paste one into a chat.
  { id: "vmpilot-api-key", pattern: /\bvmp_[A-Za-z0-9_-]{43}/g },
  { id: "stripe-access-token", pattern: /\b[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,255}/g },
  { id: "npm-access-token", pattern: /\bnpm_[A-Za-z0-9]{36}\b/g },
  { id: "slack-token", pattern: /\bxox[abprs]-[A-Za-z0-9-]{10,255}/g },
  {
    id: "slack-webhook-url",
    pattern: /(?<=\bhooks\.slack\.com\/(?:services|workflows|triggers)\/)[A-Za-z0-9/+_-]{10,255}/g,
  },
  { id: "gitlab-pat", pattern: /\bglpat-[A-Za-z0-9_-]{20,255}/g },
  { id: "gcp-api-key", pattern: /\bAIza[A-Za-z0-9_-]{35}/g },
  { id: "google-oauth-access-token", pattern: /\bya29\.[A-Za-z0-9_-]{20,}/g },
  {
    id: "aws-access-token",
    pattern: /\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|AKPA|ANPA|ANVA|APKA|AROA)[A-Z0-9]{16}\b/g,
  },
  {
    id: "aws-secret-access-key",
    pattern: /(?<=aws_secret_access_key["']?\s{0,5}[:=]\s{0,5}["']?)[A-Za-z0-9/+=]{40}/gi,
  },
  // header.payload.signature; header and payload are base64url JSON.
  { id: "jwt", pattern: /\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g },
  // Authorization headers and bearer credentials in any rendering (HTTP, JSON, curl).
  {
    id: "authorization-header",
    pattern:
      /(?<=\bauthorization["']?\s{0,5}[:=]\s{0,5}["']?(?:(?:bearer|token|basic)\s{1,5})?)(?!(?:bearer|token|basic)\s)[^\s"',;]{4,}/gi,
  },
  { id: "bearer", pattern: /(?<=\bbearer\s{1,5})[A-Za-z0-9._~+/=-]{8,}/gi },
  // base64("x-access-token:") starts every basic credential git sends for an installation
  // token, e.g. in http.extraHeader, whether or not the header name is next to it.
  { id: "x-access-token-basic", pattern: /\beC1hY2Nlc3MtdG9rZW46[A-Za-z0-9+/=]*/g },
  // Assignments to names ending in PASSWORD, SECRET, TOKEN or KEY (env files, .npmrc
  // _authToken=, YAML); the value up to the next space or quote. Not after a dash, so the
  // user name in https://x-access-token:...@ stays readable.
  {
    id: "generic-assignment",
    pattern:
      /(?<=(?<!-)(?:passw(?:or)?d|secret|token|api_?key|private_?key)["']?\s{0,5}[:=]\s{0,5}["']?)[^\s"',;]{3,500}/gi,
  },
  // This app's session and OAuth state cookies (src/web/session.ts).
  { id: "vmpilot-cookie", pattern: /(?<=\bvmpilot_(?:session|oauth)=)[^\s;"',]{4,}/g },
  // scheme://user:password@host.
  {
    id: "url-password",
    pattern: /(?<=\b[a-z][a-z0-9+.-]{0,20}:\/\/[^\s/:@]{1,200}:)[^\s/@]{1,500}(?=@)/gi,
  },
];

// ANSI escape sequences (CSI and OSC) and invisible characters can split a token so that no
// pattern sees it whole; they are removed before matching. Invisible characters only go between
// token characters: the one quietMentions puts after an "@" must stay.
const INVISIBLE =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching terminal escapes is the point.
  /\x1b\[[0-?]{0,64}[ -/]{0,8}[@-~]|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)|(?<=[\w.+/=-])[\u00ad\u200b-\u200f\u2060-\u2064\ufeff]{1,64}(?=[\w.+/=-])/g;

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
  const plain = text.replace(INVISIBLE, "");
  const out = redactPlain(plain);
  // The original, colours and all, is kept when nothing was hidden in it.
  return out === plain ? text : out;
}

function redactPlain(text: string): string {
  let out = text;
  for (const secret of registered) {
    if (out.includes(secret)) out = out.replaceAll(secret, REDACTED);
  }
  for (const { pattern } of PATTERNS) {
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
