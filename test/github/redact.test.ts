import { generateKeyPairSync } from "node:crypto";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import {
  clearRegisteredSecrets,
  REDACTED,
  redact,
  redactDeep,
  registerSecret,
} from "../../src/log/redact.ts";
import { COMPATIBLE } from "../../src/log/redact-view.ts";
import { countReplaces } from "../helpers/count-replaces.ts";

const pem = generateKeyPairSync("rsa", { modulusLength: 1024 })
  .privateKey.export({ type: "pkcs1", format: "pem" })
  .toString();
const token36 = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
const b64 = (text: string) => Buffer.from(text).toString("base64");
const percent = (text: string) =>
  [...Buffer.from(text)].map((byte) => `%${byte.toString(16).padStart(2, "0")}`).join("");
const hfToken = `hf_${"aBcDeFgHiJ".repeat(3)}kLmN`;
const pypiToken = `pypi-AgEIcHlwaS5vcmc${"CJDk3NGNkNjY5LTg2ZjUtNDM3Zi1iZjUx".repeat(2)}`;
const dockerPat = "dckr_pat_AbCdEfGhIjKlMnOpQrStUvWxYz0";
const sendgridKey = `SG.${"aBcDeFgHiJkLmNoPqRsTuV"}.${"0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ-_01234"}`;
const azureSecret = "abc8Q~AbCdEfGhIjKlMnOpQrStUvWxYz0123-";
const azureKey = `${"Zm9vYmFyYmF6cXV4".repeat(5)}AbCdEf==`;
const fullwidth = (text: string) =>
  [...text].map((c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0)).join("");
const gzipB64 = (text: string) => gzipSync(text).toString("base64");
const cutGzipB64 = (text: string) => {
  const zipped = gzipSync(text);
  return zipped.subarray(0, zipped.length - 8).toString("base64");
};
const pgpKey = [
  "-----BEGIN PGP PRIVATE KEY BLOCK-----",
  "",
  "lQOYBGXyz0EBCAC7kD1f9o2Zq0aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789+/",
  "=AbCd",
  "-----END PGP PRIVATE KEY BLOCK-----",
].join("\n");

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
    ["vmpilot API key", `my key is vmp_${"aB3_-".repeat(8)}xyz`, `my key is ${REDACTED}`],
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
    // Encoded tokens: the whole encoded run goes.
    ["base64 token", `auth: ${b64(`ghp_${token36}`)} end`, `auth: ${REDACTED} end`],
    [
      "base64url token",
      `x ${Buffer.from(`npm_${token36}??`).toString("base64url")}`,
      `x ${REDACTED}`,
    ],
    [
      "docker config auth in base64 in base64",
      b64(
        JSON.stringify({
          auths: { "https://index.docker.io/v1/": { auth: b64(`me:${dockerPat}`) } },
        }),
      ),
      REDACTED,
    ],
    ["hex token", `id=${Buffer.from(`ghs_${token36}`).toString("hex")};`, `id=${REDACTED};`],
    ["percent-encoded token", `?t=${percent(`ghs_${token36}`)}&x=1`, `?t=${REDACTED}&x=1`],
    ["partly percent-encoded token", `ghp%5F${token36}`, REDACTED],
    [
      "base64 of plain text",
      `msg ${b64("hello there, nothing to see")}`,
      `msg ${b64("hello there, nothing to see")}`,
    ],
    [
      "commit sha as hex",
      "0123456789abcdef0123456789abcdef01234567",
      "0123456789abcdef0123456789abcdef01234567",
    ],
    // Split tokens.
    ["token split by CR", `ghs_${token36.slice(0, 10)}\r${token36.slice(10)}`, REDACTED],
    ["token split by backspace", `ghs_${token36.slice(0, 10)}\b${token36.slice(10)}`, REDACTED],
    [
      "token split by a line break",
      `x ghs_${token36.slice(0, 10)}\n${token36.slice(10)}\ny`,
      `x ${REDACTED}\ny`,
    ],
    [
      "token split by CR LF in JSON",
      `"ghs_${token36.slice(0, 10)}\\r\\n${token36.slice(10)}"`,
      `"${REDACTED}"`,
    ],
    [
      "token split by a DCS sequence",
      `ghs_${token36.slice(0, 10)}\x1bP1$r0m\x1b\\${token36.slice(10)}`,
      REDACTED,
    ],
    [
      "lines that are no token",
      "Fixes:\nsome_value\nother_value",
      "Fixes:\nsome_value\nother_value",
    ],
    // JSON escapes.
    ["token with a JSON unicode escape", `{"k":"ghp\\u005f${token36}"}`, `{"k":"${REDACTED}"}`],
    [
      "token in JSON unicode escapes",
      `"${[...`ghs_${token36}`].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("")}"`,
      `"${REDACTED}"`,
    ],
    [
      "url password with escaped slashes",
      "https:\\/\\/app:hunter22@db",
      `https:\\/\\/app:${REDACTED}@db`,
    ],
    // Providers.
    ["hugging face token", `HF_TOKEN ${hfToken} `, `HF_TOKEN ${REDACTED} `],
    ["hugging face org token", `api_org_${"aBcDeFgHiJ".repeat(3)}kLmN`, REDACTED],
    ["pypi token", `password = ${pypiToken}`, `password = ${REDACTED}`],
    ["pypi token alone", `twine ${pypiToken}`, `twine ${REDACTED}`],
    ["docker hub token", `docker login -p ${dockerPat}`, `docker login -p ${REDACTED}`],
    ["sendgrid key", `key ${sendgridKey}`, `key ${REDACTED}`],
    ["azure client secret", `secret: ${azureSecret}`, `secret: ${REDACTED}`],
    ["azure client secret alone", `value ${azureSecret} `, `value ${REDACTED} `],
    [
      "azure storage connection string",
      `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${azureKey};EndpointSuffix=core.windows.net`,
      `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${REDACTED};EndpointSuffix=core.windows.net`,
    ],
    [
      "azure SAS signature",
      "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=AbCdEf0123456789%2BAbCdEf0123456789%3D&se=x",
      `https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=${REDACTED}&se=x`,
    ],
    ["pgp private key", `key:\n${pgpKey}\ndone`, `key:\n${REDACTED}\ndone`],
    // From gitleaks' rules.
    ["digitalocean token", `DO dop_v1_${"0123456789abcdef".repeat(4)} `, `DO ${REDACTED} `],
    [
      "keyword and value",
      `adafruit_key = "${"aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"}"`,
      `adafruit_key = "${REDACTED}"`,
    ],
    ["low-entropy lookalike", `twilio SK${"0".repeat(32)}`, `twilio SK${"0".repeat(32)}`],
    // Normalized before matching: the span as written goes.
    [
      "token split by a tab",
      `x ghp_${token36.slice(0, 10)}\t${token36.slice(10)} y`,
      `x ${REDACTED} y`,
    ],
    [
      "token split by an escaped tab in JSON",
      `"ghs_${token36.slice(0, 10)}\\t${token36.slice(10)}"`,
      `"${REDACTED}"`,
    ],
    ["token with an HTML entity", `<p>ghp&#95;${token36}</p>`, `<p>${REDACTED}</p>`],
    ["token with a hex HTML entity", `ghs&#x5F;${token36}`, REDACTED],
    ["token with a named HTML entity", `ghs&lowbar;${token36}`, REDACTED],
    [
      "token in fullwidth characters",
      `key ${fullwidth(`ghp_${token36}`)} end`,
      `key ${REDACTED} end`,
    ],
    ["partly fullwidth token", `ｇｈｐ_${token36}`, REDACTED],
    ["triple base64 token", `x ${b64(b64(b64(`ghp_${token36}`)))} y`, `x ${REDACTED} y`],
    ["gzip then base64 token", `x ${gzipB64(`export T=ghp_${token36}`)} y`, `x ${REDACTED} y`],
    [
      "cut-off gzip then base64 token",
      `x ${cutGzipB64(`ghp_${token36} and more`)} y`,
      `x ${REDACTED} y`,
    ],
    [
      "token split into concatenated strings",
      `const t = "ghp_${token36.slice(0, 2)}" + "${token36.slice(2)}";`,
      `const t = "${REDACTED}";`,
    ],
    [
      "token split into adjacent strings across lines",
      `t = ('ghs_${token36.slice(0, 20)}'\n     '${token36.slice(20)}')`,
      `t = ('${REDACTED}')`,
    ],
    [
      "gzip of plain text",
      `x ${gzipB64("nothing to see here")}`,
      `x ${gzipB64("nothing to see here")}`,
    ],
    ["html entities of plain text", "a &#95; b &amp; &#x41;", "a &#95; b &amp; &#x41;"],
    ["strings joined that are no token", 'say("ab" + "cd")', 'say("ab" + "cd")'],
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
    // As written, even when it looks like an escape.
    registerSecret("pa%41ss\\u0041word");
    expect(redact("x pa%41ss\\u0041word y")).toBe(`x ${REDACTED} y`);
  });

  it("keeps the rest of the text as it was: colours, escapes and line breaks", () => {
    const line = '{"msg":"\\u001b[32mok\\u001b[0m \\"quoted\\"\\nnext","token":"ghs_'.concat(
      token36,
      '"}',
    );
    expect(redact(line)).toBe(
      '{"msg":"\\u001b[32mok\\u001b[0m \\"quoted\\"\\nnext","token":"[REDACTED]"}',
    );
    expect(JSON.parse(redact(line))).toBeTruthy();
    expect(redact(`\x1b[32mok\x1b[0m ghs_${token36}\nnext`)).toBe(
      `\x1b[32mok\x1b[0m ${REDACTED}\nnext`,
    );
  });

  it("stays linear on hostile input: its passes do not grow with the input's length", () => {
    const units = [
      " ",
      "authorization: ",
      "u:",
      "eyJ",
      "-----BEGIN PRIVATE KEY-----",
      "-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
      "password=",
      "\x1b[",
      "\x1bP",
      "%4",
      "%41",
      "\\u004",
      "\\u0041 ",
      "a\n",
      "a\r\n",
      "aGVsbG8g",
      `${b64("hello world, ")} `,
      `${b64(`ghs_${token36}`)} `,
      "0a",
      "hf_",
      "adafruit = ",
      "adafruit_key:  ",
      "sk",
      "SG.",
      "Q~",
      "a\t",
      "\t",
      "&#95;",
      "&#9",
      "ｇ",
      '"a" + "',
      "' '",
      `${gzipB64(`ghp_${token36}`)} `,
    ];
    for (const unit of units) {
      const short = countReplaces(() => redact(`http://${unit.repeat(200)}`));
      const long = countReplaces(() => redact(`http://${unit.repeat(20_000)}`));
      expect({ unit, passes: long }).toEqual({ unit, passes: short });
    }
  });

  it("bounds what it gunzips: a gzip bomb is redacted whole, unread", () => {
    const bomb = gzipSync(Buffer.alloc(8 << 20, "a")).toString("base64");
    const small = gzipB64("nothing to see here");
    expect(redact(`x ${bomb} y ${small}`)).toBe(`x ${REDACTED} y ${small}`);
  });

  it("knows every BMP character NFKC makes a token character of", () => {
    const listed = new RegExp(`^[${COMPATIBLE}]$`);
    const missed: string[] = [];
    for (let code = 0x80; code <= 0xffff; code++) {
      const char = String.fromCharCode(code);
      const token = /^[\w.+/=~-]$/.test(char.normalize("NFKC"));
      if (token !== listed.test(char) && (code < 0xd800 || code > 0xdfff)) missed.push(char);
    }
    expect(missed).toEqual([]);
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

  it("redacts at any depth, and keeps deep values it does not change", () => {
    let deep: unknown = { token: `ghs_${token36}`, n: 1 };
    for (let i = 0; i < 50; i++) deep = { child: deep, list: [i] };
    const out = JSON.stringify(redactDeep(deep));
    expect(out).not.toContain(token36);
    expect(out).toContain(REDACTED);

    let deeper: unknown = [`ghs_${token36}`];
    for (let i = 0; i < 100_000; i++) deeper = [deeper];
    let inner = redactDeep(deeper);
    for (let i = 0; i < 100_000; i++) inner = (inner as unknown[])[0];
    expect(inner).toEqual([REDACTED]);
  });

  it("follows cycles and shared values once, pointing them at the redacted copies", () => {
    const shared = { note: "plain" };
    const node: Record<string, unknown> = { secret: `ghs_${token36}`, shared, again: shared };
    node.self = node;
    node.list = [node, shared];
    const out = redactDeep(node);
    expect(out).not.toBe(node);
    expect(out.secret).toBe(REDACTED);
    expect(out.self).toBe(out);
    expect((out.list as unknown[])[0]).toBe(out);
    expect(out.shared).toBe(shared);
    expect(out.again).toBe(shared);
    expect(node.secret).toBe(`ghs_${token36}`);
  });

  it("returns the same object when nothing changes", () => {
    const value = { a: ["x"], b: { c: 1 } };
    expect(redactDeep(value)).toBe(value);
  });
});
