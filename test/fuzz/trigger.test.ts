// Fuzzing the intake's parsers: real webhook payloads with mutated fields through the delivery
// mapping and the trigger parser, and comment text through the command and mention parser. Every
// payload maps to a delivery or to MalformedDelivery; every delivery parses to a trigger or a
// reason it is ignored; a trigger's instruction shows nothing a reader would not see.
import assert from "node:assert/strict";
import fc from "fast-check";
import { describe, it } from "vitest";
import { stripInvisible } from "../../src/github/sanitize.ts";
import {
  fromIssueComment,
  fromIssues,
  fromReview,
  fromReviewComment,
  MalformedDelivery,
  type TriggerDelivery,
} from "../../src/intake/deliveries.ts";
import {
  type ParseResult,
  parseText,
  parseTrigger,
  type Trigger,
} from "../../src/intake/trigger.ts";
import { examplePayload, type Payload } from "../helpers/webhooks.ts";
import { runs, withoutHang } from "./params.ts";
import { get, set } from "./payloads.ts";
import { untrustedText } from "./text.ts";

const options = { appSlug: "vmpilot-bot", label: "vmpilot", command: "vmpilot" };
const VERBS = ["fix", "plan", "review", "stop", "retry", "status", "help"];

// node:assert rather than expect in the properties: it costs a tenth as much per case.
function assertClean(trigger: Trigger): void {
  assert.ok(VERBS.includes(trigger.verb), trigger.verb);
  assert.equal(trigger.instruction, trigger.instruction.trim());
  // Nothing hidden: no invisible or bidi characters, no tag characters, no carriage returns, no
  // lone surrogate halves.
  assert.equal(stripInvisible(trigger.instruction), trigger.instruction);
  assert.doesNotMatch(trigger.instruction, /\r|[\uD800-\uDFFF]/u);
  if (trigger.unknownVerb !== undefined) assert.equal(trigger.verb, "help");
}

function assertParsed(result: ParseResult): void {
  if ("trigger" in result) assertClean(result.trigger);
  else assert.equal(typeof result.ignored, "string");
}

describe("comment commands", () => {
  it("parse any comment to a trigger or a reason, with a clean instruction", () => {
    withoutHang<string>(30_000, (track) =>
      fc.assert(
        fc.property(untrustedText, (text) => {
          track(text);
          const result = parseTrigger(
            {
              event: "issue_comment",
              action: "created",
              sender: { login: "octocat", type: "User" },
              text,
              item: { locked: false, state: "open" },
            },
            options,
          );
          assertParsed(result);
        }),
        runs(10_000),
      ),
    );
  });

  it("never read a trigger from quoted text", () => {
    fc.assert(
      fc.property(untrustedText, (text) => {
        const quoted = text
          .split("\n")
          .map((line) => `> ${line.replace(/^\s+/, "")}`)
          .join("\n");
        assert.equal(parseText(quoted, options), null);
      }),
      runs(2_000),
    );
  });
});

type Mapper = (payload: Payload) => TriggerDelivery;
const events: Array<[string, string, Mapper]> = [
  ["issues", "opened", fromIssues],
  ["issues", "labeled", fromIssues],
  ["issues", "assigned", fromIssues],
  ["issue_comment", "created", fromIssueComment],
  ["pull_request_review_comment", "created", fromReviewComment],
  ["pull_request_review", "submitted", fromReview],
];
const examples = events.map(([event, action, map]) => {
  const payload = examplePayload(event, action);
  // Not every example was sent to an app; the intake only ever sees ones that were.
  payload.installation ??= { id: 1 };
  return { payload, map };
});

// The fields the mapping reads, and the objects that hold them.
const FIELDS = [
  "action",
  "installation",
  "installation.id",
  "sender",
  "sender.login",
  "sender.id",
  "sender.type",
  "repository",
  "repository.id",
  "repository.full_name",
  "repository.owner",
  "repository.owner.login",
  "repository.name",
  "repository.clone_url",
  "repository.default_branch",
  "issue",
  "issue.id",
  "issue.number",
  "issue.title",
  "issue.body",
  "issue.html_url",
  "issue.locked",
  "issue.state",
  "issue.user",
  "issue.user.login",
  "issue.pull_request",
  "issue.updated_at",
  "label",
  "label.id",
  "label.name",
  "assignee",
  "assignee.id",
  "assignee.login",
  "comment",
  "comment.id",
  "comment.body",
  "comment.html_url",
  "pull_request",
  "pull_request.number",
  "pull_request.title",
  "pull_request.locked",
  "pull_request.state",
  "pull_request.user",
  "review",
  "review.id",
  "review.body",
  "review.state",
  "review.html_url",
];

// Fields GitHub sends as null at times (or leaves out).
const NULLABLE = new Set([
  "issue.body",
  "issue.user",
  "issue.pull_request",
  "label",
  "assignee",
  "pull_request.user",
  "review.body",
]);

/** A value GitHub could send instead of `old`: same JSON type, new content; null where allowed. */
function sameShape(field: string, old: unknown): fc.Arbitrary<unknown> {
  const value =
    typeof old === "string"
      ? fc.oneof(untrustedText, fc.constantFrom("open", "closed", "labeled", "created"))
      : typeof old === "number"
        ? fc.integer()
        : typeof old === "boolean"
          ? fc.boolean()
          : fc.constant(old);
  return NULLABLE.has(field) ? fc.oneof(value, fc.constantFrom(null, undefined)) : value;
}

// Cheaper than fc.jsonValue, and every JSON type a field could wrongly hold.
const wrongValue = fc.oneof(
  fc.constantFrom(undefined, null, 0, -1, 1.5, "", "x", true, [], {}, { login: 5 }, [{}]),
  untrustedText,
);

interface Mutation {
  event: number;
  changes: Array<[string, unknown]>;
}

/** Changes to some of the fields the mapping reads: `value(old)` for each; shown when one fails. */
function mutations(
  value: (field: string, old: unknown) => fc.Arbitrary<unknown>,
): fc.Arbitrary<Mutation> {
  return fc
    .record({
      event: fc.nat(examples.length - 1),
      fields: fc.uniqueArray(fc.constantFrom(...FIELDS), { minLength: 1, maxLength: 6 }),
    })
    .chain(({ event, fields }) =>
      fc
        .tuple(...fields.map((f) => value(f, get(examples[event]?.payload, f)).map((v) => [f, v])))
        .map((changes) => ({ event, changes: changes as Array<[string, unknown]> })),
    );
}

/** The example payload with the changes made, mapped to a delivery. */
function deliver({ event, changes }: Mutation): TriggerDelivery {
  const example = examples[event] as (typeof examples)[number];
  let payload = example.payload;
  for (const [field, value] of changes) payload = set(payload, field.split("."), value);
  return example.map(payload);
}

describe("webhook payloads", () => {
  it("map and parse when GitHub's shape holds, whatever the content", () => {
    fc.assert(
      fc.property(mutations(sameShape), (mutation) => {
        assertParsed(parseTrigger(deliver(mutation).input, options));
      }),
      runs(10_000),
    );
  });

  it("refuse any other shape with MalformedDelivery", () => {
    fc.assert(
      fc.property(
        mutations(() => wrongValue),
        (mutation) => {
          try {
            const delivery = deliver(mutation);
            assertParsed(parseTrigger(delivery.input, options));
          } catch (error) {
            assert.ok(error instanceof MalformedDelivery, String(error));
          }
        },
      ),
      runs(5_000),
    );
  });
});
