import { mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { editorTool } from "../../src/agent/tools/editor.ts";
import type { AgentTool } from "../../src/agent/tools/types.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let repo: TestRepo;
let editor: AgentTool;

beforeEach(async () => {
  repo = await makeRepo({
    "src/app.ts": "const a = 1;\nconst b = 2;\nconst a2 = 1;\n",
    "src/dup.txt": "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n",
    "src/deep/deeper/leaf.txt": "leaf\n",
    ".hidden/secret.txt": "no\n",
    "win.txt": "one\r\ntwo\r\nthree\r\n",
    "mixed.txt": "one\r\ntwo\nthree\r\n",
    "image.png": Buffer.from([
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d,
    ]),
  });
  editor = editorTool(repo.workspace, { maxCharacters: 200, maxFileBytes: 10_000 });
});

afterEach(async () => {
  await repo.cleanup();
});

function edit(input: Record<string, unknown>) {
  return editor.run(input, { remainingMs: 60_000 });
}

const file = (path: string) => readFile(join(repo.root, path), "utf8");

describe("editor: view", () => {
  it("shows a file with line numbers, whole or in a range", async () => {
    expect(await edit({ command: "view", path: "src/app.ts" })).toEqual({
      content: "     1\tconst a = 1;\n     2\tconst b = 2;\n     3\tconst a2 = 1;",
      isError: false,
    });
    expect((await edit({ command: "view", path: "src/app.ts", view_range: [2, -1] })).content).toBe(
      "     2\tconst b = 2;\n     3\tconst a2 = 1;",
    );
    expect(await edit({ command: "view", path: "src/app.ts", view_range: [3, 9] })).toMatchObject({
      isError: true,
      content: "view_range [3,9] is outside src/app.ts, which has 3 lines.",
    });
  });

  it("lists a directory two levels deep, without hidden entries", async () => {
    const { content, isError } = await edit({ command: "view", path: "." });
    expect(isError).toBe(false);
    const entries = content.split("\n").slice(1);
    expect(entries).toEqual([
      "image.png",
      "mixed.txt",
      "src/",
      "src/app.ts",
      "src/deep/",
      "src/dup.txt",
      "win.txt",
    ]);
  });

  it("accepts an absolute path inside the workspace", async () => {
    const result = await edit({
      command: "view",
      path: join(repo.root, "src/app.ts"),
      view_range: [1, 1],
    });
    expect(result).toEqual({ content: "     1\tconst a = 1;", isError: false });
  });

  it("refuses a whole-file view over the size cap and points to view_range", async () => {
    await writeFile(join(repo.root, "long.txt"), `${"line of text\n".repeat(40)}`);
    const whole = await edit({ command: "view", path: "long.txt" });
    expect(whole.isError).toBe(true);
    expect(whole.content).toBe(
      "long.txt has 40 lines (520 characters), more than one view shows (200). View a part with view_range, e.g. [1, 200].",
    );
    const part = await edit({ command: "view", path: "long.txt", view_range: [1, 40] });
    expect(part.isError).toBe(false);
    expect(part.content).toMatch(
      /\[output stops at line 10 to stay under 200 characters; view from line 11 with view_range\]$/,
    );
  });

  it("refuses files over the byte limit for every command", async () => {
    await writeFile(join(repo.root, "huge.txt"), "y\n".repeat(6_000));
    for (const input of [
      { command: "view", path: "huge.txt", view_range: [1, 2] },
      { command: "str_replace", path: "huge.txt", old_str: "y", new_str: "n" },
    ]) {
      const result = await edit(input);
      expect(result.isError).toBe(true);
      expect(result.content).toContain("over the 10000-byte limit");
    }
  });
});

describe("editor: str_replace", () => {
  it("replaces exactly one match and shows the edited lines", async () => {
    const result = await edit({
      command: "str_replace",
      path: "src/app.ts",
      old_str: "const b = 2;",
      new_str: "const b = 3;",
    });
    expect(result.isError).toBe(false);
    expect(result.content).toContain("     2\tconst b = 3;");
    expect(await file("src/app.ts")).toBe("const a = 1;\nconst b = 3;\nconst a2 = 1;\n");
  });

  it("says so when nothing matches, and leaves the file alone", async () => {
    const result = await edit({
      command: "str_replace",
      path: "src/app.ts",
      old_str: "const  b = 2;",
      new_str: "",
    });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(
      /^No match for old_str in src\/app\.ts\. It must match the file exactly/,
    );
    expect(await file("src/app.ts")).toBe("const a = 1;\nconst b = 2;\nconst a2 = 1;\n");
  });

  it("refuses several matches, saying how many and where", async () => {
    const result = await edit({
      command: "str_replace",
      path: "src/dup.txt",
      old_str: "x = 1",
      new_str: "x = 2",
    });
    expect(result).toEqual({
      isError: true,
      content:
        "old_str matches 3 times in src/dup.txt (at lines 1, 3, 5). Include more surrounding lines so it matches exactly once.",
    });
  });

  it("deletes the match when new_str is omitted", async () => {
    await edit({ command: "str_replace", path: "src/dup.txt", old_str: "z = 3\n" });
    expect(await file("src/dup.txt")).toBe("x = 1\ny = 2\nx = 1\nx = 1\n");
  });

  it("matches CRLF files with LF text and keeps them CRLF", async () => {
    const result = await edit({
      command: "str_replace",
      path: "win.txt",
      old_str: "one\ntwo",
      new_str: "uno\ndos\nmas",
    });
    expect(result.isError).toBe(false);
    expect(await file("win.txt")).toBe("uno\r\ndos\r\nmas\r\nthree\r\n");
    // The model may also send the CRLF it saw elsewhere.
    await edit({
      command: "str_replace",
      path: "win.txt",
      old_str: "mas\r\nthree",
      new_str: "tres",
    });
    expect(await file("win.txt")).toBe("uno\r\ndos\r\ntres\r\n");
  });

  it("edits files with mixed line endings byte for byte", async () => {
    await edit({
      command: "str_replace",
      path: "mixed.txt",
      old_str: "two\nthree",
      new_str: "2\n3",
    });
    expect(await file("mixed.txt")).toBe("one\r\n2\n3\r\n");
  });

  it("refuses binary files", async () => {
    for (const command of ["view", "str_replace"]) {
      const result = await edit({ command, path: "image.png", old_str: "PNG", new_str: "GIF" });
      expect(result.isError).toBe(true);
      expect(result.content).toBe(
        "image.png is a binary file (12 bytes); the editor only handles UTF-8 text. Inspect it with bash (file, xxd | head) instead.",
      );
    }
  });
});

describe("editor: create and insert", () => {
  it("creates files in new folders and overwrites existing ones", async () => {
    expect(
      await edit({ command: "create", path: "docs/new/guide.md", file_text: "# Guide\n" }),
    ).toEqual({
      content: "Created docs/new/guide.md (1 line).",
      isError: false,
    });
    expect(await file("docs/new/guide.md")).toBe("# Guide\n");
    expect((await edit({ command: "create", path: "win.txt", file_text: "a\nb\n" })).content).toBe(
      "Overwrote win.txt (2 lines).",
    );
    expect(await file("win.txt")).toBe("a\r\nb\r\n");
  });

  it("inserts after a line, at the top, and at the end", async () => {
    await edit({
      command: "insert",
      path: "src/app.ts",
      insert_line: 1,
      insert_text: "// after one",
    });
    await edit({ command: "insert", path: "src/app.ts", insert_line: 0, insert_text: "// top\n" });
    const result = await edit({
      command: "insert",
      path: "src/app.ts",
      insert_line: 5,
      insert_text: "// end",
    });
    expect(result.isError).toBe(false);
    expect(await file("src/app.ts")).toBe(
      "// top\nconst a = 1;\n// after one\nconst b = 2;\nconst a2 = 1;\n// end\n",
    );
  });

  it("accepts the documented new_str for insert too, and keeps CRLF", async () => {
    await edit({ command: "insert", path: "win.txt", insert_line: 2, new_str: "one and a half\n" });
    expect(await file("win.txt")).toBe("one\r\ntwo\r\none and a half\r\nthree\r\n");
  });

  it("rejects an insert_line outside the file", async () => {
    expect(
      await edit({ command: "insert", path: "src/app.ts", insert_line: 7, insert_text: "x" }),
    ).toEqual({
      isError: true,
      content: "insert_line must be between 0 and 3 (src/app.ts has 3 lines).",
    });
  });

  it("names the commands it has when given another", async () => {
    expect(await edit({ command: "undo_edit", path: "src/app.ts" })).toEqual({
      isError: true,
      content:
        'Invalid input, so nothing was run. command: Invalid option: expected one of "view"|"create"|"str_replace"|"insert".',
    });
  });
});

describe("editor: paths", () => {
  let outside: string;

  beforeEach(async () => {
    outside = await mkdtemp(join(tmpdir(), "vmpilot-outside-"));
    await writeFile(join(outside, "target.txt"), "outside\n");
  });

  afterEach(async () => {
    await rm(outside, { recursive: true, force: true });
  });

  it("refuses .., absolute paths elsewhere and escaping symlinks with a clear error", async () => {
    await symlink(outside, join(repo.root, "link"));
    const attempts = [
      { command: "view", path: "../../etc/passwd" },
      { command: "view", path: "/etc/passwd" },
      { command: "view", path: "link/target.txt" },
      { command: "create", path: "link/planted.txt", file_text: "x" },
      {
        command: "str_replace",
        path: `${outside}/target.txt`,
        old_str: "outside",
        new_str: "inside",
      },
    ];
    for (const input of attempts) {
      const result = await edit(input);
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(
        /is outside the workspace: .*Only files inside the workspace can be used\.$/,
      );
    }
    expect(await readFile(join(outside, "target.txt"), "utf8")).toBe("outside\n");
    await expect(readFile(join(outside, "planted.txt"))).rejects.toThrow();
  });

  it("reports a missing file plainly", async () => {
    expect(await edit({ command: "view", path: "nope.txt" })).toEqual({
      isError: true,
      content: "nope.txt does not exist.",
    });
  });
});
