// Fuzzing the intake's CI parsers: GitHub's example check_run, check_suite and workflow_run
// payloads with some of the fields the parser reads changed. A payload still of GitHub's shape
// parses to exactly the run it tells of, its own pull requests only; any other shape is a
// MalformedDelivery naming a changed field.
import assert from "node:assert/strict";
import fc from "fast-check";
import { describe, it } from "vitest";
import { type CiRun, fromCheckRun, fromCheckSuite, fromWorkflowRun } from "../../src/intake/ci.ts";
import { MalformedDelivery } from "../../src/intake/deliveries.ts";
import { examples, type Payload } from "../helpers/webhooks.ts";
import { runs } from "./params.ts";
import { get, set } from "./payloads.ts";
import { untrustedText } from "./text.ts";

type Event = CiRun["event"];
const parsers: Array<[Event, (payload: unknown) => CiRun]> = [
  ["check_run", fromCheckRun],
  ["check_suite", fromCheckSuite],
  ["workflow_run", fromWorkflowRun],
];

/** The run a payload of GitHub's shape tells of, read from it as the parser is meant to. */
function expected(event: Event, payload: Payload): CiRun {
  const run = payload[event];
  const { id, full_name, html_url, clone_url, default_branch } = payload.repository;
  const branch = event === "check_run" ? run.check_suite.head_branch : run.head_branch;
  const own = (pr: Payload) => pr && pr.head.repo.id === id && pr.base.repo.id === id;
  return {
    event,
    installationId: payload.installation?.id,
    repository: { id, full_name, html_url, clone_url, default_branch },
    status: run.status,
    conclusion: run.conclusion,
    headSha: run.head_sha,
    headBranch: branch ?? null,
    prNumbers: run.pull_requests.filter(own).map((pr: Payload) => pr.number),
    ...(event === "check_suite" ? { suiteId: run.id } : {}),
  };
}

type Kind = "int" | "text" | "text|null" | "text?" | "object" | "object?" | "pulls" | "pull";

// The fields the parsers read, by what GitHub sends in them; `run` stands for the event's object.
const FIELDS: Record<string, Kind> = {
  installation: "object?",
  "installation.id": "int",
  repository: "object",
  "repository.id": "int",
  "repository.full_name": "text",
  "repository.html_url": "text",
  "repository.clone_url": "text",
  "repository.default_branch": "text",
  run: "object",
  "run.status": "text|null",
  "run.conclusion": "text|null",
  "run.head_sha": "text",
  "run.pull_requests": "pulls",
  "run.pull_requests.0": "pull",
  "run.pull_requests.0.number": "int",
  "run.pull_requests.0.head": "object",
  "run.pull_requests.0.head.repo": "object",
  "run.pull_requests.0.head.repo.id": "int",
  "run.pull_requests.0.base.repo.id": "int",
};
const OWN: Record<Event, Record<string, Kind>> = {
  check_run: { "run.check_suite": "object", "run.check_suite.head_branch": "text?" },
  check_suite: { "run.id": "int", "run.head_branch": "text|null" },
  workflow_run: { "run.head_branch": "text|null" },
};

const seeds = parsers.map(([event]) => examples(event));
// The examples' own repositories, so that generated pull requests are often theirs.
const repoIds = [...new Set(seeds.flat().map((payload) => payload.repository.id as number))];
const repoId = fc.oneof(fc.constantFrom(...repoIds), fc.integer());
const pull = fc.oneof(
  fc.constant(null),
  fc.record({
    number: fc.nat(),
    head: fc.record({ repo: fc.record({ id: repoId }), ref: untrustedText }),
    base: fc.record({ repo: fc.record({ id: repoId }) }),
  }),
);
const text = fc.oneof(
  untrustedText,
  fc.constantFrom("completed", "failure", "timed_out", "success", "vmpilot/fix-1", "main"),
);

// An object left as the example has it: its fields are changed one by one.
const KEPT = "(as sent)";

/** Values GitHub may send in a field of `kind`. */
function allowed(kind: Kind): fc.Arbitrary<unknown> {
  switch (kind) {
    case "int":
      return repoId;
    case "text":
      return text;
    case "text|null":
      return fc.oneof(text, fc.constant(null));
    case "text?":
      return fc.oneof(text, fc.constantFrom(null, undefined));
    case "object":
      return fc.constant(KEPT);
    case "object?":
      return fc.oneof(fc.constantFrom(KEPT, undefined), fc.record({ id: repoId }));
    case "pulls":
      return fc.array(pull, { maxLength: 4 });
    case "pull":
      return pull;
  }
}

const notObject = [null, 0, "x", true, [], [{}]];
// Values no field of `kind` may hold (undefined is a field left out).
const REFUSED: Record<Kind, unknown[]> = {
  int: [undefined, null, 1.5, -0.5, "1", "", true, [], {}],
  text: [undefined, null, 0, true, [], {}],
  "text|null": [undefined, 0, true, [], {}],
  "text?": [0, false, [], {}],
  object: [undefined, ...notObject],
  "object?": [...notObject, {}, { id: "1" }, { id: 1.5 }],
  pulls: [undefined, null, {}, "x", [1], ["x"], [{}], [{ number: 1, head: {}, base: {} }]],
  pull: [0, "x", [], {}, { number: 1 }],
};

interface Change {
  field: string;
  value: unknown;
  ok: boolean;
}

const OPTIONAL: ReadonlySet<Kind> = new Set(["object?", "text?"]);

/**
 * One of the event's examples (by its index) with up to four of the fields the parser reads
 * changed, each to a value GitHub may send there (ok) or not.
 */
function mutation(event: Event, seeds: Payload[]) {
  const fields = { ...FIELDS, ...OWN[event] };
  const path = (field: string) => field.replace(/^run(?=\.|$)/, event);
  return fc
    .record({
      seed: fc.nat(seeds.length - 1),
      picked: fc.uniqueArray(fc.constantFrom(...Object.keys(fields)), {
        minLength: 1,
        maxLength: 4,
      }),
    })
    .chain(({ seed, picked }) => {
      // A field inside one changed as a whole is left alone, and so is one the example lacks
      // (unless GitHub may leave it out).
      const changed = picked.filter(
        (field) =>
          !picked.some((other) => field.startsWith(`${other}.`)) &&
          (get(seeds[seed], path(field)) !== undefined || OPTIONAL.has(fields[field] as Kind)),
      );
      const changes = changed.map((field) => {
        const kind = fields[field] as Kind;
        return fc
          .oneof(
            { weight: 3, arbitrary: allowed(kind).map((value) => ({ value, ok: true })) },
            {
              weight: 1,
              arbitrary: fc.constantFrom(...REFUSED[kind]).map((value) => ({ value, ok: false })),
            },
          )
          .map((change): Change => ({ field: path(field), ...change }));
      });
      return fc.tuple(...changes).map((made) => ({ seed, changes: made }));
    });
}

describe.each(parsers.map(([event, parse], at) => [event, parse, seeds[at] ?? []] as const))(
  "%s payloads",
  (event, parse, seeds) => {
    it("parse to the run they tell of when GitHub's shape holds, or to MalformedDelivery", () => {
      fc.assert(
        fc.property(mutation(event, seeds), ({ seed, changes }) => {
          let payload = seeds[seed];
          for (const { field, value } of changes) {
            if (value !== KEPT) payload = set(payload, field.split("."), value);
          }
          if (changes.every((change) => change.ok)) {
            assert.deepEqual(parse(payload), expected(event, payload));
            return;
          }
          assert.throws(
            () => parse(payload),
            (error) =>
              error instanceof MalformedDelivery &&
              changes.some((change) => !change.ok && error.message.includes(change.field)),
          );
        }),
        runs(10_000),
      );
    });
  },
);
