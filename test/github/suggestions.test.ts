// The mapping from a job's change to suggestions, on diffs real git wrote: applying every
// suggestion as GitHub does and the patch with `git apply` gives the job's result, whatever the
// change (fast-check), and each file goes one way or the other.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { postSuggestions, suggestionReviewBody } from "../../src/github/suggestion-review.ts";
import { parseDiff, type SuggestionComment, suggestChanges } from "../../src/github/suggestions.ts";
import { runs } from "../fuzz/params.ts";
import { github, useGitHubMock } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";

useGitHubMock();

type Files = Record<string, string>;

const root = mkdtempSync(join(tmpdir(), "vmpilot-suggestions-"));
const repo = join(root, "repo");
const git = (args: string[], cwd = repo, input?: string) =>
  execFileSync("git", args, { cwd, encoding: "utf8", input, env: { PATH: process.env.PATH } });
git(["init", "-q", repo], root);
afterAll(() => rmSync(root, { recursive: true, force: true }));

function write(dir: string, files: Files): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
}

/** As the worker runs it (src/workspace/git/fork.ts). */
const DIFF = "git -c core.quotePath=false diff --no-color --src-prefix=a/ --dst-prefix=b/ -U3 -M";

/**
 * The job's change (head to result) and the pull request's diff (base to head) as git writes
 * them, in one shell: a git process costs more than the rest of a run.
 */
function diffs(states: [Files, Files, Files]): { change: string; pull: string } {
  states.forEach((files, i) => {
    const dir = join(root, `state${i}`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
    write(dir, files);
  });
  const tree = (i: number) =>
    `rm -f "$R/index"; GIT_INDEX_FILE="$R/index" git --work-tree="$R/state${i}" add -A; t${i}=$(GIT_INDEX_FILE="$R/index" git write-tree)`;
  const script = [
    "set -e",
    tree(0),
    tree(1),
    tree(2),
    `${DIFF} $t1 $t2 >"$R/change.diff"`,
    `${DIFF} $t0 $t1 >"$R/pull.diff"`,
  ].join("\n");
  execFileSync("sh", ["-c", script], { cwd: repo, env: { PATH: process.env.PATH, R: root } });
  const read = (name: string) => readFileSync(join(root, name), "utf8");
  return { change: read("change.diff"), pull: read("pull.diff") };
}

/** The suggestions committed as GitHub's "commit suggestions" does, bottom first. */
function applySuggestions(text: string, comments: readonly SuggestionComment[]): string {
  const lines = text.split("\n");
  const sorted = [...comments].sort((a, b) => b.line - a.line);
  for (const comment of sorted) {
    const body = comment.body.split("\n").slice(1, -1);
    const from = comment.start_line ?? comment.line;
    lines.splice(from - 1, comment.line - from + 1, ...body);
  }
  return lines.join("\n");
}

function suggestAndApply(base: Files, head: Files, result: Files) {
  const { change, pull } = diffs([base, head, result]);
  const found = suggestChanges(parseDiff(change), parseDiff(pull));
  const out = join(root, "out");
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out);
  write(out, head);
  for (const path of new Set(found.comments.map((c) => c.path))) {
    const file = join(out, path);
    const mine = found.comments.filter((c) => c.path === path);
    writeFileSync(file, applySuggestions(readFileSync(file, "utf8"), mine));
  }
  const patch = found.patched.map((file) => file.text).join("");
  if (patch) git(["apply", "--whitespace=nowarn", "-"], out, patch);
  const files: Files = {};
  for (const entry of readdirSync(out, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isFile()) files[relative(out, path)] = readFileSync(path, "utf8");
  }
  return { found, files };
}

const line = fc.constantFrom(
  "a",
  "b",
  "c",
  "",
  "  indented",
  "```",
  "````js",
  "diff --git a/x b/x",
  "-- dashes",
  "+ plus",
  "@@ -1 +1 @@",
);

/** A file's lines changed at random: kept, dropped, replaced, or with lines put before them. */
const edit = (lines: string[]) =>
  fc
    .tuple(
      fc.array(
        fc.oneof(
          { weight: 6, arbitrary: fc.constant({ op: "keep" as const }) },
          fc.constant({ op: "drop" as const }),
          fc.record({ op: fc.constant("put" as const), lines: fc.array(line, { maxLength: 3 }) }),
          fc.record({ op: fc.constant("swap" as const), lines: fc.array(line, { maxLength: 3 }) }),
        ),
        { minLength: lines.length, maxLength: lines.length },
      ),
      fc.array(line, { maxLength: 2 }),
    )
    .map(([ops, tail]) => [
      ...lines.flatMap((text, i) => {
        const op = ops[i] ?? { op: "keep" };
        if (op.op === "keep") return [text];
        if (op.op === "drop") return [];
        return op.op === "put" ? [...op.lines, text] : op.lines;
      }),
      ...tail,
    ]);

const text = (lines: string[], newline: boolean) =>
  lines.length === 0 ? "" : `${lines.join("\n")}${newline ? "\n" : ""}`;

/** Two files of a head, the base the pull request starts from, and the job's result. */
const change = fc
  .tuple(
    fc.array(fc.array(line, { minLength: 1, maxLength: 14 }), { minLength: 2, maxLength: 2 }),
    fc.boolean(),
  )
  .chain(([heads, newline]) =>
    fc.record({
      heads: fc.constant(heads),
      bases: fc.tuple(...heads.map(edit)),
      results: fc.tuple(...heads.map(edit)),
      newline: fc.constant(newline),
      added: fc.option(fc.array(line, { minLength: 1, maxLength: 3 })),
    }),
  );

describe("suggestChanges", () => {
  it("suggestions applied as GitHub does and the patch applied with git apply make the job's result", () => {
    const paths = ["src/one.txt", "docs/two words.txt"];
    fc.assert(
      fc.property(change, ({ heads, bases, results, newline, added }) => {
        const files = (all: string[][]) =>
          Object.fromEntries(paths.map((path, i) => [path, text(all[i] ?? [], newline)]));
        const head = files(heads);
        const result: Files = { ...files(results), ...(added && { "new.txt": text(added, true) }) };
        const { found, files: applied } = suggestAndApply(files(bases), head, result);

        expect(applied).toEqual(result);
        // Each file one way: never a suggestion and a patch both.
        const suggested = new Set(found.comments.map((c) => c.path));
        expect(found.patched.filter((p) => suggested.has(p.path))).toEqual([]);
        if (added) expect(found.patched.map((p) => p.path)).toContain("new.txt");
        // No two suggestions on one line: GitHub commits a batch only then.
        for (const path of suggested) {
          const spans = found.comments
            .filter((c) => c.path === path)
            .map((c) => [c.start_line ?? c.line, c.line] as const)
            .sort((a, b) => a[0] - b[0]);
          for (const [i, [from]] of spans.slice(1).entries()) {
            expect(from).toBeGreaterThan(spans[i]?.[1] ?? 0);
          }
        }
      }),
      runs(30),
    );
  });
});

describe("a review of suggestions", () => {
  const base = {
    "app.ts": "one\n2\nthree\nfour\nfive\nsix\nseven\neight\nnine\n",
    "old name.txt": "x\ny\nz\n",
    "logo.png": "\0PNG",
  };
  const head = { ...base, "app.ts": base["app.ts"].replace("2", "two") };

  it("suggests on the lines the pull request shows, and patches the rest", () => {
    const { change, pull } = diffs([
      base,
      head,
      {
        "app.ts": "one\nTWO\nthree\n3.5\nfour\nsix\nseven\neight\nnine\n",
        "new name.txt": "x\ny\nz\n",
        "logo.png": "\0PNG2",
        "added.txt": "```\nnew\n",
      },
    ]);
    const found = suggestChanges(parseDiff(change), parseDiff(pull));
    expect(found.comments).toMatchInlineSnapshot(`
      [
        {
          "body": "\`\`\`suggestion
      TWO
      \`\`\`",
          "line": 2,
          "path": "app.ts",
          "side": "RIGHT",
        },
        {
          "body": "\`\`\`suggestion
      three
      3.5
      \`\`\`",
          "line": 3,
          "path": "app.ts",
          "side": "RIGHT",
        },
        {
          "body": "\`\`\`suggestion
      \`\`\`",
          "line": 5,
          "path": "app.ts",
          "side": "RIGHT",
        },
      ]
    `);
    expect(found.patched.map(({ path, why }) => `${path}: ${why}`)).toMatchInlineSnapshot(`
      [
        "added.txt: a new file",
        "new name.txt: a renamed file",
      ]
    `);
    expect(suggestionReviewBody("Fixed it, @octocat.", found, false)).toMatchInlineSnapshot(`
      "Fixed it, @​octocat.

      Left out, as a review cannot show them: \`logo.png\` is a binary file.

      These changes do not fit suggestions (\`added.txt\`: a new file; \`new name.txt\`: a renamed file); here they are as a patch for \`git apply\`:

      \`\`\`diff
      diff --git a/added.txt b/added.txt
      new file mode 100644
      index 0000000..0fb9b2f
      --- /dev/null
      +++ b/added.txt
      @@ -0,0 +1,2 @@
      +\`\`\`
      +new
      diff --git a/old name.txt b/new name.txt
      similarity index 100%
      rename from old name.txt
      rename to new name.txt
      \`\`\`"
    `);
  });

  it("suggests nothing of a file whose change is outside the pull request's diff", () => {
    const { change, pull } = diffs([
      base,
      head,
      { ...head, "app.ts": head["app.ts"].replace("nine", "NINE") },
    ]);
    const found = suggestChanges(parseDiff(change), parseDiff(pull));
    expect(found.comments).toEqual([]);
    expect(found.patched.map((file) => file.why)).toEqual([
      "it changes lines outside this pull request's diff",
    ]);
  });

  it("posts no change that holds a secret, neither as a suggestion nor as a patch", () => {
    const token = `ghp_${"A1b2C3d4".repeat(4)}Zz9x`;
    const { change, pull } = diffs([
      base,
      head,
      { ...head, "app.ts": head["app.ts"].replace("two", token) },
    ]);
    const found = suggestChanges(parseDiff(change), parseDiff(pull));
    expect(found).toMatchObject({ comments: [], patched: [], leftOut: [{ path: "app.ts" }] });
    const body = suggestionReviewBody("Done.", found, false);
    expect(body).not.toContain(token);
    expect(body).toContain(
      "Left out, as a review cannot show them: `app.ts` holds text that looks like a secret.",
    );
  });

  it("posts the review again as a patch alone when GitHub refuses a suggestion's lines", async () => {
    const { change, pull } = diffs([
      base,
      head,
      { ...head, "app.ts": head["app.ts"].replace("two", "TWO") },
    ]);
    const sent: { comments: unknown[]; body: string }[] = [];
    github()
      .post("/repos/acme/app/pulls/7/reviews")
      .times(2)
      .reply(async (request: Request) => {
        sent.push((await request.json()) as { comments: unknown[]; body: string });
        return sent.length === 1
          ? [422, { message: "Unprocessable Entity", errors: ["Line could not be resolved"] }]
          : [200, { html_url: "https://github.com/acme/app/pull/7#review-1" }];
      });

    const posted = await postSuggestions(testOctokit(), {
      owner: "acme",
      repo: "app",
      number: 7,
      commitId: "a".repeat(40),
      summary: "Done.",
      change: parseDiff(change),
      pull: parseDiff(pull),
      cut: false,
    });

    expect(posted).toEqual({
      url: "https://github.com/acme/app/pull/7#review-1",
      suggestions: 0,
      patched: 1,
    });
    expect(sent.map((review) => review.comments.length)).toEqual([1, 0]);
    expect(sent[1]?.body).toContain("`app.ts`: it changes lines outside this pull request's diff");
    expect(sent[1]?.body).toContain("+TWO");
  });

  it("reads the paths git quotes, and the files git renames, copies or finds binary", () => {
    const text = [
      'diff --git "a/q\\"uote\\303\\251.txt" "b/q\\"uote\\303\\251.txt"',
      "index 587be6b..d735d34 100644",
      '--- "a/q\\"uote\\303\\251.txt"',
      '+++ "b/q\\"uote\\303\\251.txt"',
      "@@ -1 +1 @@",
      "-x",
      "+x2",
      "diff --git a/sp ace.txt b/sp ace.txt",
      "--- a/sp ace.txt\t",
      "+++ b/sp ace.txt\t",
      "@@ -1,2 +1,2 @@",
      " a",
      "-b",
      "+B",
      "diff --git a/from b/to",
      "similarity index 100%",
      "rename from from",
      "rename to to",
      "diff --git a/x.sh b/x.sh",
      "old mode 100644",
      "new mode 100755",
      "diff --git a/gone.txt b/gone.txt",
      "deleted file mode 100644",
      "--- a/gone.txt",
      "+++ /dev/null",
      "@@ -1 +0,0 @@",
      "-bye",
      "diff --git a/logo.png b/logo.png",
      "Binary files a/logo.png and b/logo.png differ",
    ].join("\n");
    expect(parseDiff(text).map(({ path, whole, binary }) => ({ path, whole, binary }))).toEqual([
      { path: 'q"uoteé.txt', whole: undefined, binary: undefined },
      { path: "sp ace.txt", whole: undefined, binary: undefined },
      { path: "to", whole: "a renamed file", binary: undefined },
      { path: "x.sh", whole: "its mode changed", binary: undefined },
      { path: "gone.txt", whole: "a deleted file", binary: undefined },
      { path: "logo.png", whole: undefined, binary: true },
    ]);
  });
});
