import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bashTool } from "../../src/agent/tools/bash.ts";
import type { AgentTool } from "../../src/agent/tools/types.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let repo: TestRepo;
let bash: AgentTool;

beforeEach(async () => {
  repo = await makeRepo({ "src/lib/x.txt": "x\n" });
  // Generous: the first command also starts the launcher, which is slow on a loaded machine.
  bash = bashTool(repo.workspace, { timeoutMs: 30_000 });
});

afterEach(async () => {
  await repo.cleanup();
});

const sh = (input: Record<string, unknown>) => bash.run(input, { remainingMs: 60_000 });

describe("bash tool", () => {
  it("keeps the working directory between commands, and restart resets it", async () => {
    expect(await sh({ command: "cd src && pwd" })).toEqual({
      content: join(repo.root, "src"),
      isError: false,
      exec: { command: "cd src && pwd", exitCode: 0 },
    });
    expect((await sh({ command: "cd lib; ls" })).content).toBe("x.txt");
    expect((await sh({ command: "pwd" })).content).toBe(join(repo.root, "src/lib"));
    expect(await sh({ restart: true })).toEqual({
      content: "Shell restarted in the workspace root.",
      isError: false,
    });
    expect((await sh({ command: "pwd" })).content).toBe(repo.root);
  });

  it("falls back to the root when the remembered directory is gone", async () => {
    await sh({ command: "cd src/lib" });
    await rm(join(repo.root, "src/lib"), { recursive: true });
    const result = await sh({ command: "pwd" });
    expect(result.content).toBe(
      `${repo.root}\nstderr:\nnote: src/lib no longer exists; running in the workspace root`,
    );
  });

  it("does not keep variables, as each command is a fresh shell", async () => {
    await sh({ command: "export GREETING=hi" });
    expect((await sh({ command: 'echo "[$GREETING]"' })).content).toBe("[]");
  });

  it("reports stderr and a failing exit code as an error", async () => {
    expect(await sh({ command: "echo out; echo err >&2; exit 3" })).toEqual({
      content: "out\nstderr:\nerr\nExit code: 3",
      isError: true,
      exec: { command: "echo out; echo err >&2; exit 3", exitCode: 3 },
    });
  });

  it("stops a command at the timeout", async () => {
    const short = bashTool(repo.workspace, { timeoutMs: 300 });
    expect(await short.run({ command: "sleep 10" }, { remainingMs: 60_000 })).toEqual({
      content: "Command timed out after 300 ms; its processes were killed.",
      isError: true,
      exec: { command: "sleep 10", exitCode: null },
    });
  });

  it("keeps the exit code of a command that exits early, and says when there is no output", async () => {
    expect(await sh({ command: "true" })).toEqual({
      content: "(no output)",
      isError: false,
      exec: { command: "true", exitCode: 0 },
    });
    expect(await sh({ command: "cd src; exit 4" })).toEqual({
      content: "Exit code: 4",
      isError: true,
      exec: { command: "cd src; exit 4", exitCode: 4 },
    });
    expect((await sh({ command: "pwd" })).content).toBe(join(repo.root, "src"));
  });

  it("asks for a command when given none", async () => {
    expect(await sh({})).toEqual({
      content: "Provide a non-empty `command`, or `restart: true`.",
      isError: true,
    });
  });

  it("gives the model capped output and keeps the full output for the log", async () => {
    const result = await sh({ command: "seq 1 20000" });
    expect(result.content.length).toBeLessThanOrEqual(30_100);
    expect(result.content).toContain("characters cut");
    expect(result.log?.trimEnd().split("\n")).toHaveLength(20_000);
  });

  it("keeps its directory when a command forges the directory report", async () => {
    await sh({ command: "cd src" });
    // The trap never runs, so only the forged line could move the shell.
    const plain = "printf '\\n__VMPILOT_CWD__\\t/x\\t/etc\\n'; kill -9 $$";
    await sh({ command: plain });
    expect((await sh({ command: "pwd" })).content).toBe(join(repo.root, "src"));
    // A command can read its own script, mark included; a NUL or a path outside still does not count.
    const mark = `m=$(printf %s "$BASH_EXECUTION_STRING" | grep -o '__VMPILOT_CWD_[0-9a-f]*__' | head -n1); trap - EXIT`;
    await sh({ command: `${mark}; printf "\\n$m\\t%s\\t%s/a\\0b\\n" "$__vmpilot_root" "$PWD"` });
    expect((await sh({ command: "pwd" })).content).toBe(join(repo.root, "src"));
    await sh({ command: `${mark}; printf "\\n$m\\t/\\t/etc\\n"` });
    expect((await sh({ command: "pwd" })).content).toBe(join(repo.root, "src"));
    await sh({ command: `${mark}; printf "\\n$m\\t%s\\t%s/../..\\n" "$__vmpilot_root" "$PWD"` });
    expect((await sh({ command: "pwd" })).content).toBe(join(repo.root, "src"));
    // The same forgery naming a directory inside is taken: it is no more than a `cd`.
    await sh({ command: `${mark}; printf "\\n$m\\t%s\\t%s/lib\\n" "$__vmpilot_root" "$PWD"` });
    expect((await sh({ command: "pwd" })).content).toBe(join(repo.root, "src/lib"));
  });

  it("stays in the checkout when a command leaves it", async () => {
    await sh({ command: "cd src" });
    await sh({ command: "cd /" });
    expect((await sh({ command: "pwd" })).content).toBe(join(repo.root, "src"));
  });

  it("refuses a command with a NUL byte and keeps working", async () => {
    expect(await sh({ command: "echo a\0b" })).toEqual({
      content: "The command contains a NUL byte, which a command line cannot carry.",
      isError: true,
    });
    expect((await sh({ command: "echo still here" })).content).toBe("still here");
  });
});
