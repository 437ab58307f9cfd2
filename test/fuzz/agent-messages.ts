// The workspace agent's messages as its protocol (src/workspace/agent/protocol.ts) allows them,
// written out here field by field, apart from the schemas: what each field may hold, what it may
// not, and whether it may be left out. A message made from them knows whether it is allowed.
import fc from "fast-check";
import { untrustedText as text } from "./text.ts";

export interface Field {
  allowed: fc.Arbitrary<unknown>;
  refused: fc.Arbitrary<unknown>;
  optional?: boolean;
}
export type Spec = Record<string, Field>;

const DAY_MS = 24 * 3_600_000;

const notText = fc.constantFrom(null, 0, 1.5, true, false, [], {}, ["x"]);
const id: Field = {
  allowed: fc.oneof(fc.string({ minLength: 1, maxLength: 100 }), fc.constant("i".repeat(100))),
  refused: fc.oneof(notText, fc.constant(""), fc.string({ minLength: 101, maxLength: 200 })),
};
const path: Field = { allowed: text, refused: notText };
const flag: Field = { allowed: fc.boolean(), refused: fc.constantFrom(null, 0, 1, "true", [], {}) };
const output: Field = { allowed: text, refused: notText };

export const specs = {
  execRequest: {
    id,
    command: {
      allowed: text.filter((command) => command !== ""),
      refused: fc.oneof(notText, fc.constant("")),
    },
    cwd: { ...path, optional: true },
    env: {
      allowed: fc.dictionary(text, text, { maxKeys: 3, noNullPrototype: true }),
      refused: fc.oneof(
        fc.constantFrom(null, 0, "PATH=/bin", true, ["x"]),
        fc.dictionary(text, notText, { minKeys: 1, maxKeys: 2, noNullPrototype: true }),
      ),
      optional: true,
    },
    timeoutMs: {
      allowed: fc.oneof(fc.integer({ min: 1, max: DAY_MS }), fc.constant(DAY_MS)),
      refused: fc.oneof(
        fc.constantFrom(0, 1.5, DAY_MS + 1, "1000", null, true),
        fc.integer({ max: 0 }),
        fc.integer({ min: DAY_MS + 1 }),
      ),
      optional: true,
    },
  },
  execResult: {
    stdout: output,
    stderr: output,
    exitCode: {
      allowed: fc.oneof(fc.integer(), fc.constant(null)),
      refused: fc.constantFrom(1.5, "0", true, [], {}),
    },
    timedOut: flag,
    truncated: flag,
    fullStdout: output,
    fullStderr: output,
    durationMs: {
      // JSON has no -0: it comes back as 0.
      allowed: fc.double({ noNaN: true, noDefaultInfinity: true }).map((ms) => ms + 0),
      refused: fc.constantFrom("1", null, true, [], {}),
    },
  },
  cancelRequest: { id },
  readRequest: {
    path,
    maxBytes: {
      allowed: fc.oneof(fc.nat(64), fc.nat()),
      refused: fc.oneof(fc.constantFrom(1.5, "1", null, true, []), fc.integer({ max: -1 })),
    },
  },
  listRequest: { path },
  listResult: {
    entries: {
      allowed: fc.array(text, { maxLength: 4 }),
      refused: fc.oneof(
        fc.constantFrom(null, "a.txt", 0, {}),
        fc.array(notText, { minLength: 1, maxLength: 2 }),
      ),
    },
  },
} satisfies Record<string, Spec>;

/** The message itself, in `Message.broken`: not an object, or with a key no field has. */
export const WHOLE = "";

export interface Message {
  value: unknown;
  /** The fields the protocol refuses, WHOLE among them; none for an allowed message. */
  broken: string[];
}

/** Mostly allowed values; now and then a refused one, a field left out or an unknown key. */
export function message(spec: Spec): fc.Arbitrary<Message> {
  const names = Object.keys(spec);
  const fields = names.map((name) => {
    const field = spec[name] as Field;
    return fc.oneof(
      { weight: 8, arbitrary: field.allowed.map((value) => ({ value, ok: true })) },
      { weight: 1, arbitrary: field.refused.map((value) => ({ value, ok: false })) },
      { weight: 1, arbitrary: fc.constant({ value: undefined, ok: field.optional === true }) },
    );
  });
  const object = fc
    .record({
      values: fc.tuple(...fields),
      extra: fc.oneof(
        { weight: 9, arbitrary: fc.constant(null) },
        { weight: 1, arbitrary: fc.constantFrom("ID", "shell", "x") },
      ),
    })
    .map(({ values, extra }): Message => {
      const value: Record<string, unknown> = {};
      const broken: string[] = [];
      values.forEach((field, at) => {
        const name = names[at] as string;
        if (field.value !== undefined) value[name] = field.value;
        if (!field.ok) broken.push(name);
      });
      if (extra !== null) {
        value[extra] = "";
        broken.push(WHOLE);
      }
      return { value, broken };
    });
  const notObject = fc
    .constantFrom(null, 0, "{}", [], [{}], true)
    .map((value): Message => ({ value, broken: [WHOLE] }));
  return fc.oneof({ weight: 9, arbitrary: object }, { weight: 1, arbitrary: notObject });
}
