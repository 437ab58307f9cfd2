// Fuzzing the workspace agent's protocol: a message is accepted exactly when each of its fields
// holds what the protocol allows (agent-messages.ts), and comes out of the wire as it went in; a
// refused one is refused for its broken fields only.
import assert from "node:assert/strict";
import fc from "fast-check";
import { describe, it } from "vitest";
import type { z } from "zod";
import {
  cancelRequest,
  execRequest,
  execResult,
  listRequest,
  listResult,
  readRequest,
} from "../../src/workspace/agent/protocol.ts";
import { message, specs, WHOLE } from "./agent-messages.ts";
import { runs } from "./params.ts";

const schemas: Record<keyof typeof specs, z.ZodType> = {
  execRequest,
  execResult,
  cancelRequest,
  readRequest,
  listRequest,
  listResult,
};
const names = Object.keys(specs) as Array<keyof typeof specs>;
const messages = fc.oneof(
  ...names.map((name) => message(specs[name]).map((sent) => ({ name, ...sent }))),
);

describe("the workspace agent's protocol", () => {
  it("accepts exactly the messages it allows, unchanged, and refuses the rest for their broken fields", () => {
    fc.assert(
      fc.property(messages, ({ name, value, broken }) => {
        const parsed = schemas[name].safeParse(JSON.parse(JSON.stringify(value)));
        if (broken.length === 0) {
          assert.ok(parsed.success, parsed.error?.message);
          assert.deepEqual(parsed.data, value);
          return;
        }
        assert.ok(!parsed.success, `${name} accepted ${JSON.stringify(value)}`);
        for (const issue of parsed.error.issues) {
          assert.ok(broken.includes(String(issue.path[0] ?? WHOLE)), issue.message);
        }
      }),
      runs(10_000),
    );
  });
});
