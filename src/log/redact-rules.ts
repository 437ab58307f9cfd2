// What redaction looks for: this app's own rows, then gitleaks' rules (gitleaks-rules.json, MIT,
// made by scripts/gitleaks-rules.ts from gitleaks' config/gitleaks.toml). Every pattern has two
// groups: the context before a secret, then the secret, the only part replaced.
import { readFileSync } from "node:fs";
import { z } from "zod";

export interface Rule {
  id: string;
  pattern: RegExp;
  /** Lowercase; the rule runs only on text that holds one of them. None: it always runs. */
  keywords: readonly string[];
  /** The least Shannon entropy, in bits per character, of a secret worth hiding. */
  entropy?: number;
}

// Patterns start on fixed text and use disjoint character classes, so each runs in linear time
// even on megabyte inputs. A pattern with groups has the context in the first, the secret in the
// second; without groups, the whole match is the secret. Rows named after a gitleaks rule are
// wider than it (any length, no terminator), which redaction can afford and a scanner cannot.
const OWN: ReadonlyArray<{ id: string; pattern: RegExp }> = [
  // PEM and PGP blocks. An unterminated block is redacted to the end of the text.
  {
    id: "private-key",
    pattern:
      /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|[\s\S]*$)/g,
  },
  // Personal, OAuth, user-to-server, installation (ghs_) and refresh tokens.
  { id: "github-pat", pattern: /\bgh[pousr]_[A-Za-z0-9]{20,255}/g },
  { id: "github-fine-grained-pat", pattern: /\bgithub_pat_[A-Za-z0-9_]{20,255}/g },
  { id: "github-legacy-installation-token", pattern: /\bv1\.[0-9a-f]{40}\b/g },
  // Covers Anthropic (sk-ant-) and OpenAI (sk-, sk-proj-, sk-svcacct-) keys.
  { id: "openai-api-key", pattern: /\bsk-[A-Za-z0-9_-]{20,255}/g },
  { id: "anthropic-api-key", pattern: /\bsk-ant-[A-Za-z0-9_-]{10,}/g },
  // vmpilot's own API keys (store/api-keys.ts): a person may paste one into a conversation.
  { id: "vmpilot-api-key", pattern: /\bvmp_[A-Za-z0-9_-]{43}/g },
  { id: "stripe-access-token", pattern: /\b[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,255}/g },
  { id: "npm-access-token", pattern: /\bnpm_[A-Za-z0-9]{36}\b/g },
  { id: "slack-token", pattern: /\bxox[abprs]-[A-Za-z0-9-]{10,255}/g },
  {
    id: "slack-webhook-url",
    pattern: /(\bhooks\.slack\.com\/(?:services|workflows|triggers)\/)([A-Za-z0-9/+_-]{10,255})/g,
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
    pattern: /(aws_secret_access_key["']?\s{0,5}[:=]\s{0,5}["']?)([A-Za-z0-9/+=]{40})/gi,
  },
  // Docker Hub personal and organization access tokens; gitleaks has no rule for them.
  { id: "dockerhub-token", pattern: /\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{20,255}/g },
  // Azure storage keys in connection strings, and the signature of a shared access URL.
  {
    id: "azure-storage-key",
    pattern: /(\b(?:AccountKey|SharedAccessKey)=)([A-Za-z0-9+/=]{20,})/gi,
  },
  { id: "azure-sas-signature", pattern: /([?&]sig=)([A-Za-z0-9%+/=]{20,})/g },
  // header.payload.signature; header and payload are base64url JSON.
  { id: "jwt", pattern: /\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g },
  // Authorization headers and bearer credentials in any rendering (HTTP, JSON, curl).
  {
    id: "authorization-header",
    pattern:
      /(\bauthorization["']?\s{0,5}[:=]\s{0,5}["']?(?:(?:bearer|token|basic)\s{1,5})?)((?!(?:bearer|token|basic)\s)[^\s"',;]{4,})/gi,
  },
  { id: "bearer", pattern: /(\bbearer\s{1,5})([A-Za-z0-9._~+/=-]{8,})/gi },
  // base64("x-access-token:") starts every basic credential git sends for an installation
  // token, e.g. in http.extraHeader, whether or not the header name is next to it.
  { id: "x-access-token-basic", pattern: /\beC1hY2Nlc3MtdG9rZW46[A-Za-z0-9+/=]*/g },
  // Assignments to names ending in PASSWORD, SECRET, TOKEN or KEY (env files, .npmrc
  // _authToken=, YAML); the value up to the next space or quote. Not after a dash, so the
  // user name in https://x-access-token:...@ stays readable.
  {
    id: "generic-assignment",
    pattern:
      /((?<!-)(?:passw(?:or)?d|secret|token|api_?key|private_?key)["']?\s{0,5}[:=]\s{0,5}["']?)([^\s"',;]{3,500})/gi,
  },
  // This app's session and OAuth state cookies (src/web/session.ts).
  { id: "vmpilot-cookie", pattern: /(\bvmpilot_(?:session|oauth)=)([^\s;"',]{4,})/g },
  // scheme://user:password@host.
  { id: "url-password", pattern: /(:\/\/[^\s/:@]{1,200}:)([^\s/@]{1,500})(?=@)/g },
];

const Gitleaks = z.object({
  rules: z.array(
    z.object({
      id: z.string(),
      context: z.string(),
      secret: z.string(),
      after: z.string(),
      ignoreCase: z.boolean().optional(),
      fixed: z.boolean().optional(),
      keywords: z.array(z.string()),
      entropy: z.number().optional(),
    }),
  ),
});

const gitleaks = Gitleaks.parse(
  JSON.parse(readFileSync(new URL("./gitleaks-rules.json", import.meta.url), "utf8")),
).rules;

const flags = (ignoreCase?: boolean) => (ignoreCase ? "gi" : "g");

/** How many capturing groups a pattern has. */
const groups = (pattern: RegExp) => (new RegExp(`${pattern.source}|`).exec("")?.length ?? 1) - 1;

export const RULES: readonly Rule[] = [
  ...OWN.map(({ id, pattern }) => ({
    id,
    pattern: groups(pattern) === 2 ? pattern : new RegExp(`()(${pattern.source})`, pattern.flags),
    keywords: [],
  })),
  ...gitleaks.map((rule) => ({
    id: rule.id,
    pattern: new RegExp(`(${rule.context})(${rule.secret})${rule.after}`, flags(rule.ignoreCase)),
    keywords: rule.keywords,
    entropy: rule.entropy,
  })),
];

/**
 * For text whose line breaks between token characters were taken out: tokens of a fixed length
 * found by their shape alone, without what must follow them (the next line now does). Their
 * length keeps a match from running into the next line's words.
 */
export const JOINED_RULES: readonly Rule[] = gitleaks
  .filter((rule) => rule.fixed)
  .map((rule) => ({
    id: rule.id,
    pattern: new RegExp(`(${rule.context})(${rule.secret})`, flags(rule.ignoreCase)),
    keywords: rule.keywords,
    entropy: rule.entropy,
  }));

// Which keywords a text holds, in one pass instead of one search per keyword. The pass finds
// keywords where they do not overlap, the longest first; a keyword it skipped overlaps one it
// found (inside it, at the same start, or starting in it and running past its end), so those
// are then looked for one by one.
function overlap(found: string, other: string): boolean {
  if (found.includes(other)) return true;
  for (let i = 1; i < found.length; i++) if (other.startsWith(found.slice(i))) return true;
  return false;
}

const KEYWORDS = [...new Set(RULES.flatMap((rule) => rule.keywords))].sort(
  (a, b) => b.length - a.length,
);
const KEYWORD_SCAN = new RegExp(
  KEYWORDS.map((keyword) => keyword.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"),
  "g",
);

// Worked out for a keyword when it is first found, not for all of them when the module loads:
// every process that can redact loads it, and the whole table took some 25 ms of each start.
const OVERLAPPING = new Map<string, readonly string[]>();

function overlapping(found: string): readonly string[] {
  let others = OVERLAPPING.get(found);
  if (others === undefined) {
    others = KEYWORDS.filter((other) => other !== found && overlap(found, other));
    OVERLAPPING.set(found, others);
  }
  return others;
}

/** The rules' keywords in a lowercase text. */
export function keywordsIn(lower: string): Set<string> {
  const found = new Set<string>();
  lower.replace(KEYWORD_SCAN, (keyword) => {
    found.add(keyword);
    return keyword;
  });
  for (const keyword of [...found]) {
    for (const other of overlapping(keyword)) {
      if (!found.has(other) && lower.includes(other)) found.add(other);
    }
  }
  return found;
}
