// Regenerates src/log/gitleaks-rules.json from a checkout of gitleaks (MIT):
//   git clone https://github.com/gitleaks/gitleaks /tmp/gitleaks
//   npx tsx scripts/gitleaks-rules.ts /tmp/gitleaks
// gitleaks' rules are Go RE2 regexes; each is rewritten for JavaScript here, once, so the app only
// compiles them. A rule becomes `context`, `secret` and `after`: only the secret is redacted. A
// rule whose secret is not a plain group of its top-level sequence has the whole match as secret.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseToml } from "smol-toml";
import { z } from "zod";

const OUT = new URL("../src/log/gitleaks-rules.json", import.meta.url);

// Rules left out, and why. The app's own rows (src/log/redact.ts) cover what these would.
const SKIPPED: Record<string, string> = {
  "generic-api-key": "too broad for redaction; redact.ts has its own assignment row",
  "private-key": "redact.ts has its own row, which also takes unterminated and PGP blocks",
  "curl-auth-header": "unbounded spans over lines: slow on megabytes",
  "curl-auth-user": "unbounded spans over lines: slow on megabytes",
  "kubernetes-secret-yaml": "spans of any characters over lines: slow on megabytes",
  "nuget-config-password": "an unbounded span of any characters: slow on megabytes",
  "sourcegraph-access-token": "one alternative is any 40 hex digits: every commit id",
};

// gitleaks ends most secrets at a quote, a space, `;` or a line end. Redaction also ends them at
// the ends of lists, calls, tags and query parameters: `(hf_...)`, `?token=...&`.
const TERMINATOR = "[\\x60'\"\\s;]";
const WIDER_TERMINATOR = "[\\x60'\"\\s;,)\\]}>&|]";

const Config = z.object({
  rules: z.array(
    z.object({
      id: z.string(),
      regex: z.string().optional(),
      keywords: z.array(z.string()).default([]),
      entropy: z.number().optional(),
      secretGroup: z.number().optional(),
    }),
  ),
});

type Item =
  | { kind: "atom"; text: string; quant: string }
  | { kind: "group"; capture: boolean; body: Item[][]; quant: string };

/** Parses RE2 syntax into alternatives of items; classes and escapes stay opaque atoms. */
function parseRegex(source: string): { alternatives: Item[][]; ignoreCase: boolean } {
  let at = 0;
  let ignoreCase = false;
  const quantifier = () => {
    const match = /^(?:[*+?]|\{\d+(?:,\d*)?\})\??/.exec(source.slice(at));
    at += match ? match[0].length : 0;
    return match ? match[0] : "";
  };
  const charClass = () => {
    let text = "[";
    at++;
    if (source[at] === "^") text += source[at++];
    if (source[at] === "]") text += source[at++];
    while (at < source.length && source[at] !== "]") {
      const posix = /^\[:(\w+):\]/.exec(source.slice(at));
      if (posix) {
        const ranges: Record<string, string> = {
          alnum: "a-zA-Z0-9",
          alpha: "a-zA-Z",
          digit: "0-9",
        };
        const range = ranges[posix[1] as string];
        if (!range) throw new Error(`POSIX class ${posix[0]}`);
        text += range;
        at += posix[0].length;
      } else if (source[at] === "\\") {
        text += source.slice(at, at + 2);
        at += 2;
      } else text += source[at++];
    }
    at++;
    return `${text}]`;
  };
  const alternatives = (): Item[][] => {
    const branches: Item[][] = [[]];
    while (at < source.length && source[at] !== ")") {
      const branch = branches[branches.length - 1] as Item[];
      const char = source[at] as string;
      if (char === "|") {
        at++;
        branches.push([]);
      } else if (char === "(") {
        const flags = /^\(\?([a-z]*)(?:-([a-z]*))?([:)])/.exec(source.slice(at));
        const named = /^\(\?P?<\w+>/.exec(source.slice(at));
        if (flags) {
          // Case rules are folded into one flag for the whole rule: a little broader, never
          // narrower, which is the safe side for redaction.
          if (/[^i]/.test(`${flags[1]}${flags[2] ?? ""}`)) throw new Error(`flags ${flags[0]}`);
          if (flags[1]?.includes("i")) ignoreCase = true;
          at += flags[0].length;
          if (flags[3] === ")") continue;
        } else at += named ? named[0].length : 1;
        const body = alternatives();
        at++;
        branch.push({ kind: "group", capture: !flags, body, quant: quantifier() });
      } else if (char === "[") {
        const text = charClass();
        branch.push({ kind: "atom", text, quant: quantifier() });
      } else {
        const token =
          char === "\\"
            ? (/^\\(?:x[0-9a-fA-F]{2}|[pP]\{\w+\}|.)/.exec(source.slice(at))?.[0] ?? "\\")
            : char;
        at += token.length;
        const text = token === "\\z" ? "$" : token === "\\A" ? "^" : token;
        branch.push({ kind: "atom", text, quant: quantifier() });
      }
    }
    return branches;
  };
  const parsed = alternatives();
  if (at !== source.length) throw new Error(`unbalanced ) at ${at}`);
  return { alternatives: parsed, ignoreCase };
}

/** JavaScript source of items, every group non-capturing. */
function emit(items: Item[]): string {
  return items
    .map((item) =>
      item.kind === "atom"
        ? `${item.text}${item.quant}`
        : `(?:${item.body.map(emit).join("|")})${item.quant}`,
    )
    .join("");
}

/** Capturing groups in the order of their opening parentheses, as RE2 numbers them. */
function captures(items: Item[], into: Item[] = []): Item[] {
  for (const item of items) {
    if (item.kind !== "group") continue;
    if (item.capture) into.push(item);
    for (const branch of item.body) captures(branch, into);
  }
  return into;
}

// `[\w.-]{0,50}?` only widens where a keyword rule's match starts; the secret is the same
// without it, and without it the regex starts on the keyword instead of at every character.
function withoutLeadingContext(items: Item[]): Item[] {
  const first = items[0];
  const lead = first?.kind === "atom" && first.text === "[\\w.-]" && first.quant === "{0,50}?";
  const rest = items.slice(lead ? 1 : 0);
  const next = rest[0];
  if (next?.kind === "group" && !next.capture && !next.quant && next.body.length === 1) {
    return [{ ...next, body: [withoutLeadingContext(next.body[0] as Item[])] }, ...rest.slice(1)];
  }
  return rest;
}

/** Whether every match of the items has one of a few fixed lengths: no open repetition. */
function fixedLength(items: Item[]): boolean {
  return items.every(
    (item) =>
      /^(?:\{\d+\})?$/.test(item.quant) &&
      (item.kind === "atom" || item.body.every((branch) => fixedLength(branch))),
  );
}

/** One pattern per top-level alternative of the rule. */
function convert(regex: string, secretGroup: number | undefined) {
  const { alternatives, ignoreCase } = parseRegex(regex);
  const all = alternatives.flatMap((branch) => captures(branch));
  return alternatives.map((branch) => {
    const wanted = secretGroup ? all[secretGroup - 1] : captures(branch)[0];
    const index = wanted ? branch.indexOf(wanted) : -1;
    const group = index >= 0 && !wanted?.quant ? (wanted as Item & { kind: "group" }) : undefined;
    const context = emit(group ? withoutLeadingContext(branch.slice(0, index)) : []);
    const secret = group ? group.body.map(emit).join("|") : emit(branch);
    const after = group
      ? emit(branch.slice(index + 1)).replaceAll(TERMINATOR, WIDER_TERMINATOR)
      : "";
    new RegExp(`(${context})(${secret})${after}`, `g${ignoreCase ? "i" : ""}`);
    // A secret found by its shape and length alone may be looked for where line breaks inside
    // a token were taken out: its length keeps it from running into the next line.
    const fixed =
      context.replaceAll("\\b", "") === "" &&
      (group ? group.body.every((body) => fixedLength(body)) : fixedLength(branch));
    return { context, secret, after, ignoreCase, fixed };
  });
}

function main() {
  const checkout = process.argv[2];
  if (!checkout) throw new Error("usage: tsx scripts/gitleaks-rules.ts <gitleaks checkout>");
  const commit = execFileSync("git", ["-C", checkout, "rev-parse", "HEAD"], { encoding: "utf8" });
  const config = Config.parse(
    parseToml(readFileSync(join(checkout, "config/gitleaks.toml"), "utf8")),
  );
  const skipped: Record<string, string> = {};
  const rules = [];
  for (const rule of config.rules) {
    if (SKIPPED[rule.id]) skipped[rule.id] = SKIPPED[rule.id] as string;
    else if (!rule.regex) skipped[rule.id] = "matches file paths, not text";
    else {
      try {
        for (const converted of convert(rule.regex, rule.secretGroup)) {
          rules.push({
            id: rule.id,
            context: converted.context,
            secret: converted.secret,
            after: converted.after,
            ...(converted.ignoreCase && { ignoreCase: true }),
            ...(converted.fixed && { fixed: true }),
            keywords: rule.keywords,
            ...(rule.entropy !== undefined && { entropy: rule.entropy }),
          });
        }
      } catch (error) {
        skipped[rule.id] = `not convertible to JavaScript: ${(error as Error).message}`;
      }
    }
  }
  const data = {
    source: `https://github.com/gitleaks/gitleaks/blob/${commit.trim()}/config/gitleaks.toml`,
    generatedBy: "scripts/gitleaks-rules.ts",
    license: readFileSync(join(checkout, "LICENSE"), "utf8").trim().split("\n"),
    skipped,
    rules,
  };
  writeFileSync(OUT, JSON.stringify(data));
  execFileSync("npx", ["biome", "format", "--write", fileURLToPath(OUT)], { stdio: "inherit" });
  console.log(`${rules.length} patterns from ${config.rules.length} rules; skipped:`, skipped);
}

main();
