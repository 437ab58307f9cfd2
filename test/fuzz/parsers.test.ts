// Fuzzing the other parsers that take outside input: `vmpilot.yml`, the chat face's request body
// and the editor's paths. Each input ends in a value or a clear error of the parser's own kind: no
// crash, no hang, and an alias bomb refused before it expands.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, it } from "vitest";
import { parseCompletionRequest } from "../../src/chat/body.ts";
import { ApiError } from "../../src/chat/errors.ts";
import { parseRepoConfig, settingKeys } from "../../src/config/repo-config.ts";
import { PathEscapeError, resolveInside } from "../../src/workspace/paths.ts";
import { runs, withoutHang } from "./params.ts";
import { untrustedText } from "./text.ts";

const scalar = fc.oneof(
  fc.integer({ min: -5, max: 100_000 }),
  fc.boolean(),
  untrustedText,
  fc.constantFrom("~", "null", "[]", "{}", "*a", "&a x", "!!binary x", "<<: *a", "'", '"', "|"),
);
const key = fc.oneof(
  fc.constantFrom(...settingKeys.map((k) => k.split(".")[0] ?? k), "network", "ci", "allow"),
  fc.string({ maxLength: 8 }),
);
/** YAML as a person (or an attacker) writes it: nested keys, lists, anchors, odd indentation. */
const yamlText = fc
  .array(fc.tuple(fc.nat(6), key, fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }))), {
    maxLength: 12,
  })
  .map((lines) =>
    lines
      .map(([indent, k, v]) =>
        Array.isArray(v)
          ? `${" ".repeat(indent)}${k}:\n${v.map((x) => `${" ".repeat(indent + 2)}- ${x}`).join("\n")}`
          : `${" ".repeat(indent)}${k}: ${v}`,
      )
      .join("\n"),
  );

/**
 * A billion-laughs document: each anchored node holds the one before it `width` times, in flow
 * or block sequences or mappings, at the top or under a setting. Expanded, it is at least 10,000
 * nodes; the file is a few hundred bytes.
 */
const aliasBomb = fc
  .record({
    width: fc.integer({ min: 4, max: 10 }),
    extra: fc.nat(1),
    under: fc.constantFrom("", ...settingKeys.map((k) => k.split(".")[0] ?? k)),
    anchor: fc.constantFrom("a", "lol", "x_", "ref-"),
    leaf: fc.constantFrom("lol", '"lol"', "1", "~", "[lol]", "{a: 1}"),
  })
  .chain((bomb) => {
    const depth = Math.ceil(4 / Math.log10(bomb.width)) + bomb.extra;
    return fc.array(fc.nat(3), { minLength: depth, maxLength: depth }).map((forms) => {
      const pad = bomb.under ? "  " : "";
      const lines = bomb.under ? [`${bomb.under}:`] : [];
      lines.push(`${pad}k0: &${bomb.anchor}0 ${bomb.leaf}`);
      forms.forEach((form, at) => {
        const refs = Array.from({ length: bomb.width }, () => `*${bomb.anchor}${at}`);
        const head = `${pad}k${at + 1}: &${bomb.anchor}${at + 1}`;
        const entries = refs.map((ref, j) => (form % 2 === 0 ? ref : `e${j}: ${ref}`));
        const flow = entries.join(", ");
        if (form < 2) lines.push(`${head} ${form === 0 ? `[${flow}]` : `{${flow}}`}`);
        else
          lines.push(head, ...entries.map((entry) => `${pad}  ${form === 2 ? "- " : ""}${entry}`));
      });
      return lines.join("\n");
    });
  });

describe("vmpilot.yml", () => {
  it("parses to settings or to issues that each name a line; refuses alias bombs for their aliases", () => {
    // One document in nine a bomb: it costs the parser (not the cap) several times a plain one.
    const documents = fc.oneof(
      { weight: 4, arbitrary: yamlText.map((text) => ({ text, bomb: false })) },
      { weight: 4, arbitrary: fc.string().map((text) => ({ text, bomb: false })) },
      { weight: 1, arbitrary: aliasBomb.map((text) => ({ text, bomb: true })) },
    );
    withoutHang<string>(60_000, (track) =>
      fc.assert(
        fc.property(documents, ({ text, bomb }) => {
          track(text);
          const result = parseRepoConfig(text);
          if (bomb) {
            assert.ok(!result.ok);
            assert.match(result.message, /aliases expand too much/);
          }
          if (result.ok) return;
          assert.ok(result.issues.length > 0);
          const lines = text.split("\n").length;
          for (const issue of result.issues) {
            assert.equal(typeof issue.message, "string");
            assert.ok(issue.message.length > 0);
            if (issue.line !== undefined) assert.ok(issue.line >= 1 && issue.line <= lines + 1);
          }
        }),
        runs(10_000),
      ),
    );
  });
});

const message = fc.record(
  {
    role: fc.constantFrom("system", "user", "assistant", "tool", "robot"),
    content: fc.oneof(
      untrustedText,
      fc.constant(null),
      fc.array(fc.record({ type: fc.constantFrom("text", "image_url"), text: untrustedText })),
    ),
  },
  { requiredKeys: [] },
);
const chatBody = fc.oneof(
  fc.string(),
  fc.json(),
  fc
    .record(
      {
        model: fc.oneof(fc.constant("vmpilot"), fc.string({ maxLength: 400 })),
        messages: fc.oneof(fc.array(message, { maxLength: 4 }), fc.anything()),
        stream: fc.oneof(fc.boolean(), fc.constant(null), fc.string()),
        chat_id: fc.oneof(fc.string({ maxLength: 300 }), fc.integer()),
      },
      { requiredKeys: [] },
    )
    .map((value) => JSON.stringify(value)),
);

describe("chat request bodies", () => {
  it("parse to a request or to a 400 in OpenAI's error format", () => {
    withoutHang<string>(60_000, (track) =>
      fc.assert(
        fc.property(chatBody, (text) => {
          track(text);
          try {
            const request = parseCompletionRequest(text);
            assert.ok(request.messages.length >= 1);
          } catch (error) {
            assert.ok(error instanceof ApiError, String(error));
            assert.equal(error.status, 400);
            assert.equal(error.body.error.type, "invalid_request_error");
          }
        }),
        runs(10_000),
      ),
    );
  });
});

let root: string;
let outside: string;

beforeAll(async () => {
  const base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-fuzz-")));
  root = join(base, "root");
  outside = join(base, "outside");
  await mkdir(join(root, "src", "deep"), { recursive: true });
  await mkdir(outside);
  await writeFile(join(root, "src", "a.txt"), "a");
  await symlink(outside, join(root, "out-link"));
  await symlink("../src", join(root, "src", "deep", "up"));
});
afterAll(async () => {
  if (root) await rm(join(root, ".."), { recursive: true, force: true });
});

const segment = fc.oneof(
  fc.constantFrom("..", ".", "", "src", "deep", "up", "out-link", "a.txt", "~", "\0", "%2e%2e"),
  fc.string({ maxLength: 6 }),
);
const editorPath = fc.oneof(
  fc.array(segment, { maxLength: 6 }).map((parts) => parts.join("/")),
  fc.array(segment, { maxLength: 4 }).map((parts) => `/${parts.join("/")}`),
  fc.string(),
);

describe("editor paths", () => {
  it("resolve inside the checkout, through any link, or are refused as escapes", async () => {
    await fc.assert(
      fc.asyncProperty(editorPath, async (path) => {
        try {
          const resolved = await resolveInside(root, path);
          const rel = relative(root, resolved);
          assert.ok(!rel.startsWith("..") && !rel.startsWith("/"), `${path} → ${resolved}`);
          assert.ok(!resolved.startsWith(outside), `${path} → ${resolved}`);
        } catch (error) {
          assert.ok(error instanceof PathEscapeError, `${path}: ${String(error)}`);
        }
      }),
      runs(10_000),
    );
  });
});
