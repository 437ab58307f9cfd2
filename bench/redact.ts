/**
 * Secret redaction speed: a megabyte of what passes through it (log lines, a diff, test output,
 * JSON with escapes, base64 blobs, a few secrets), then a megabyte of each hostile shape, each
 * the median of a few runs, each also as a ratio to one plain regex pass over the same text in the
 * same run (machines here differ severalfold in speed). Goal: the ordinary megabyte well under
 * 100 ms on an idle machine.
 */
import { gzipSync } from "node:zlib";
import { redact } from "../src/log/redact.ts";

const MEGABYTE = 1_000_000;
const RUNS = 7;
const GOAL_MS = 100;
const token = `ghs_${"A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"}`;

const ordinary = [
  '{"level":30,"time":1718000000000,"msg":"job 42: step 3 \\u2192 bash: npm test","job":42}\n',
  "diff --git a/src/app.ts b/src/app.ts\n@@ -10,7 +10,7 @@ export function handler(req, res) {\n-  return res.status(500).json({ error: message });\n+  return res.status(502).json({ error: 'upstream: ' + message });\n",
  "\x1b[32m ✓\x1b[39m test/app.test.ts (12 tests) 48ms\n  at Object.<anonymous> (/workspace/node_modules/vitest/dist/index.js:113:17)\n",
  "npm warn deprecated inflight@1.0.6: This module is not supported, and leaks memory.\n",
  `GET https://api.github.com/repos/o/r/pulls?per_page=100&page=2 200 in 132ms (etag W/"${"0a1b2c3d".repeat(5)}")\n`,
  `commit ${"0123456789abcdef".repeat(2)}01234567\nAuthor: Some One <someone@example.com>\n`,
  `data: ${Buffer.from("x".repeat(300).concat("\u0000\u0001")).toString("base64")}\n`,
  `config: ${Buffer.from(JSON.stringify({ name: "app", replicas: 3, image: "registry/app:1.2.3" })).toString("base64")}\n`,
  "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.\n",
];

function fill(parts: string[]): string {
  let text = "";
  for (let i = 0; text.length < MEGABYTE; i++) {
    text += parts[i % parts.length];
    if (i % 500 === 0) text += `export GITHUB_TOKEN=${token}\n`;
  }
  return text;
}

function median(run: () => unknown): number {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    run();
    times.push(performance.now() - start);
  }
  return times.sort((a, b) => a - b)[RUNS >> 1] as number;
}

/** One regex pass over the same text: what any redaction costs at the least. */
const plain = (body: string) => median(() => body.replace(/ghs_[A-Za-z0-9]{36}/g, "[REDACTED]"));

const text = fill(ordinary);
const ms = median(() => redact(text));
const base = plain(text);
console.log(
  `ordinary megabyte: ${ms.toFixed(1)} ms, ${(ms / base).toFixed(0)}× one regex pass (${base.toFixed(1)} ms) (goal < ${GOAL_MS} ms idle)`,
);

const hostile = [
  "authorization: ",
  "-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
  "password=",
  "%41",
  "\\u0041 ",
  "a\n",
  `${Buffer.from("hello world, ").toString("base64")} `,
  `${Buffer.from(token).toString("base64")} `,
  "adafruit = ",
  "sk",
  "\x1b[",
  "a\t",
  "&#95;",
  "ｇ",
  '"a" + "',
  `${gzipSync(token).toString("base64")} `,
];
for (const unit of hostile) {
  const body = unit.repeat(Math.ceil(MEGABYTE / unit.length));
  const took = median(() => redact(body));
  console.log(
    `${JSON.stringify(unit)}: ${took.toFixed(1)} ms, ${(took / plain(body)).toFixed(0)}× one regex pass`,
  );
}
