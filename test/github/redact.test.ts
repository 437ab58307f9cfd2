import { generateKeyPairSync } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import {
  clearRegisteredSecrets,
  REDACTED,
  redact,
  redactDeep,
  registerSecret,
} from "../../src/github/redact.ts";
import { countReplaces } from "../helpers/count-replaces.ts";

const pem = generateKeyPairSync("rsa", { modulusLength: 1024 })
  .privateKey.export({ type: "pkcs1", format: "pem" })
  .toString();
const token36 = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";

afterEach(() => clearRegisteredSecrets());

describe("redact", () => {
  const cases: Array<[string, string, string]> = [
    ["installation token", `token ghs_${token36}`, `token ${REDACTED}`],
    ["personal token", `ghp_${token36} leaked`, `${REDACTED} leaked`],
    ["oauth token", `gho_${token36}`, REDACTED],
    ["user-to-server token", `ghu_${token36}`, REDACTED],
    ["refresh token", `ghr_${token36}`, REDACTED],
    ["fine-grained PAT", `github_pat_11ABCDEFG0_${token36}xyz`, REDACTED],
    ["legacy installation token", `v1.${"0123456789abcdef".repeat(2)}01234567`, REDACTED],
    ["anthropic key", "key=sk-ant-api03-AbC_dEf-1234567890", `key=${REDACTED}`],
    ["vmpilot chat key", `my key is vmp_${"aB3_-".repeat(8)}xyz`, `my key is ${REDACTED}`],
    ["aws access key id", "AKIAIOSFODNN7EXAMPLE is set", `${REDACTED} is set`],
    [
      "aws secret key",
      "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
      `aws_secret_access_key = ${REDACTED}`,
    ],
    [
      "jwt",
      "jwt eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOjEyMzR9.c2lnbmF0dXJlLXZhbHVl end",
      `jwt ${REDACTED} end`,
    ],
    [
      "authorization header",
      "Authorization: Bearer abc.def-ghi",
      `Authorization: Bearer ${REDACTED}`,
    ],
    [
      "authorization json",
      '{"authorization":"token abcdef123456"}',
      `{"authorization":"token ${REDACTED}"}`,
    ],
    ["bare bearer", "curl -H 'bearer s3cr3t-t0k3n'", `curl -H 'bearer ${REDACTED}'`],
    [
      "credentials in a URL",
      "git clone https://x-access-token:abc123def@github.com/o/r.git",
      `git clone https://x-access-token:${REDACTED}@github.com/o/r.git`,
    ],
    [
      "database password",
      "postgres://app:hunter22@db.internal:5432/vmpilot",
      `postgres://app:${REDACTED}@db.internal:5432/vmpilot`,
    ],
    ["private key", `key:\n${pem.trim()}\ndone`, `key:\n${REDACTED}\ndone`],
    ["private key with escaped newlines", JSON.stringify({ pem }), `{"pem":"${REDACTED}\\n"}`],
    ["truncated private key", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg", REDACTED],
    [
      "ordinary text",
      "ghp is a prefix; sk-ant is a word; eyJ alone",
      "ghp is a prefix; sk-ant is a word; eyJ alone",
    ],
    ["short ghp lookalike", "ghp_short", "ghp_short"],
    [
      "commit sha",
      "commit 0123456789abcdef0123456789abcdef01234567",
      "commit 0123456789abcdef0123456789abcdef01234567",
    ],
    ["url without password", "https://github.com/o/r", "https://github.com/o/r"],
    ["npm token", `npm_${token36}`, REDACTED],
    ["slack bot token", "xoxb-1234567890-abcdefghij", REDACTED],
    ["slack user token", "xoxp-1234567890-abcdefghij", REDACTED],
    [
      "slack webhook",
      "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX",
      `https://hooks.slack.com/services/${REDACTED}`,
    ],
    ["openai key", `sk-${token36}`, REDACTED],
    ["openai project key", `sk-proj-${token36}`, REDACTED],
    ["stripe live key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", REDACTED],
    ["stripe restricted key", "rk_live_4eC39HqLyjWDarjtT1zdp7dc", REDACTED],
    ["gitlab token", "glpat-abcdefghij0123456789", REDACTED],
    ["google api key", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", REDACTED],
    ["google oauth token", "ya29.a0AfH6SMBxyz0123456789abcdef", REDACTED],
    [
      "npmrc auth token",
      "//registry.npmjs.org/:_authToken=abcdef0123456789",
      `//registry.npmjs.org/:_authToken=${REDACTED}`,
    ],
    ["password variable", "DB_PASSWORD=hunter22", `DB_PASSWORD=${REDACTED}`],
    ["secret variable", "export CLIENT_SECRET='s3cr3tv4lue'", `export CLIENT_SECRET='${REDACTED}'`],
    ["token variable", "DEPLOY_TOKEN: abc123xyz", `DEPLOY_TOKEN: ${REDACTED}`],
    [
      "session cookie",
      "Cookie: __Host-vmpilot_session=eyJsb2dpbiI6Im8ifQ.c2ln; other=1",
      `Cookie: __Host-vmpilot_session=${REDACTED}; other=1`,
    ],
    [
      "basic x-access-token in extraHeader",
      `http.extraheader=${Buffer.from(`x-access-token:ghs_${token36}`).toString("base64")}`,
      `http.extraheader=${REDACTED}`,
    ],
    [
      "token split by ANSI codes",
      `ghs_${token36.slice(0, 10)}\x1b[31m${token36.slice(10)}`,
      REDACTED,
    ],
    [
      "token split by zero-width space",
      `ghs_${token36.slice(0, 10)}\u200b${token36.slice(10)}`,
      REDACTED,
    ],
    [
      "npm token split by zero-width joiner",
      `npm_${token36.slice(0, 5)}\u200d${token36.slice(5)}`,
      REDACTED,
    ],
    [
      "quieted mention next to a secret",
      `@\u200Bsomeone ghs_${token36}`,
      `@\u200Bsomeone ${REDACTED}`,
    ],
    ["coloured text without secrets", "\x1b[32mok\x1b[0m", "\x1b[32mok\x1b[0m"],
    [
      "token counts",
      '{"max_tokens": 4096, "input_tokens": 12}',
      '{"max_tokens": 4096, "input_tokens": 12}',
    ],
  ];
  it.each(cases)("%s", (_name, input, expected) => {
    expect(redact(input)).toBe(expected);
  });

  it("redacts registered secrets verbatim, including escaped multi-line ones", () => {
    registerSecret("my-webhook-secret-value");
    registerSecret("short");
    registerSecret("line one\nline two secret");
    expect(redact("secret=my-webhook-secret-value short")).toBe(`secret=${REDACTED} short`);
    expect(redact(JSON.stringify("line one\nline two secret"))).toBe(`"${REDACTED}"`);
  });

  it("stays linear on hostile input: the same passes as for a short text", () => {
    const baseline = countReplaces(() => redact("short text"));
    for (const body of [
      " ".repeat(1_000_000),
      "authorization: ".repeat(70_000),
      "http://".concat("u:".repeat(500_000)),
      "eyJ".repeat(300_000),
      "-----BEGIN PRIVATE KEY-----".repeat(30_000),
      "password=".repeat(100_000),
      "\x1b[".repeat(200_000),
    ]) {
      expect(countReplaces(() => redact(body))).toBe(baseline);
    }
  });
});

describe("redactDeep", () => {
  it("redacts strings in nested objects, arrays and errors, keeping other values", () => {
    const error = new Error(`push failed with ghs_${token36}`);
    const out = redactDeep({ a: [1, `ghs_${token36}`], b: { c: true }, error });
    expect(out.a).toEqual([1, REDACTED]);
    expect(out.b).toEqual({ c: true });
    expect(out.error.message).toBe(`push failed with ${REDACTED}`);
    expect(out.error).toBeInstanceOf(Error);
  });

  it("returns the same object when nothing changes", () => {
    const value = { a: ["x"], b: { c: 1 } };
    expect(redactDeep(value)).toBe(value);
  });
});
