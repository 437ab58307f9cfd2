import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PathEscapeError, resolveInside } from "../../src/workspace/paths.ts";

let base: string;
let root: string;
let outside: string;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-paths-")));
  root = join(base, "root");
  outside = join(base, "outside");
  await mkdir(join(root, "src"), { recursive: true });
  await mkdir(outside);
  await writeFile(join(root, "src", "a.ts"), "a");
  await writeFile(join(outside, "secret"), "s");
  await symlink(outside, join(root, "escape"));
  await symlink(join(outside, "new-file"), join(root, "dangling"));
  await symlink("src", join(root, "inner"));
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe("resolveInside", () => {
  it("resolves relative and absolute paths inside the root", async () => {
    expect(await resolveInside(root, "src/a.ts")).toBe(join(root, "src/a.ts"));
    expect(await resolveInside(root, join(root, "src/a.ts"))).toBe(join(root, "src/a.ts"));
    expect(await resolveInside(root, "src/../src/a.ts")).toBe(join(root, "src/a.ts"));
    expect(await resolveInside(root, ".")).toBe(root);
  });

  it("allows paths that do not exist yet", async () => {
    expect(await resolveInside(root, "new/dir/file.ts")).toBe(join(root, "new/dir/file.ts"));
  });

  it("follows symlinks that stay inside", async () => {
    expect(await resolveInside(root, "inner/a.ts")).toBe(join(root, "src/a.ts"));
  });

  it.each([
    ["../outside/secret"],
    ["src/../../outside/secret"],
    ["/etc/passwd"],
    ["escape/secret"],
    ["escape/not-yet"],
    ["dangling"],
    ["src/\0a"],
  ])("rejects %j", async (path) => {
    await expect(resolveInside(root, path)).rejects.toBeInstanceOf(PathEscapeError);
  });
});
