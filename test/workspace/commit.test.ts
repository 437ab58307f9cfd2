import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { commitInWorkspace } from "../../src/workspace/git/commit.ts";
import { launchAndCollect } from "../../src/workspace/process/launcher.ts";
import { makeRepo, type TestRepo } from "../agent/setup.ts";

let repo: TestRepo;

beforeEach(async () => {
  repo = await makeRepo({ "README.md": "hello\n" });
});

afterEach(async () => {
  await repo.cleanup();
});

describe("commitInWorkspace", () => {
  it("drops NUL bytes from the message and identities, and the launcher keeps serving", async () => {
    await writeFile(join(repo.root, "README.md"), "changed\n");
    const commit = await commitInWorkspace(repo.workspace, {
      message: "Fix\0 the thing",
      author: { name: "bot\0", email: "bot@example.com" },
      coAuthors: [{ name: "Ann\0 Lee", email: "ann@example.com\0" }],
    });
    expect(commit?.files).toEqual(["README.md"]);
    expect(await repo.git("log", "-1", "--format=%an <%ae>%n%B")).toBe(
      "bot <bot@example.com>\nFix the thing\n\nCo-authored-by: Ann Lee <ann@example.com>\n\n",
    );
    const after = await launchAndCollect({
      file: "sh",
      args: ["-c", "echo alive"],
      cwd: "/",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      group: false,
    });
    expect(after.stdout).toBe("alive\n");
  });
});
