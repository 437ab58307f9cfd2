import { describe, expect, it } from "vitest";
import { parseCommand, UsageError } from "../../src/cli/args.ts";
import { invocationOptions } from "../../src/cli/run.ts";
import { DEFAULT_WORKSPACE } from "../../src/config/workspace.ts";

describe("parseCommand", () => {
  it("reads every option of run and joins the task text", () => {
    expect(
      parseCommand([
        "run",
        "--repo",
        "../app",
        "--branch",
        "vmpilot/x",
        "--isolation",
        "none",
        "--model",
        "claude-haiku-4-5",
        "--max-steps",
        "12",
        "--json",
        "-f",
        "build.log",
        "--file",
        "notes.txt",
        "--stdin",
        "fix",
        "it",
      ]),
    ).toEqual({
      command: "run",
      args: {
        repo: "../app",
        branch: "vmpilot/x",
        workspace: { isolation: "none", engine: "local" },
        model: "claude-haiku-4-5",
        maxSteps: 12,
        continueLatest: false,
        conversationId: undefined,
        json: true,
        files: ["build.log", "notes.txt"],
        stdin: "read",
        task: "fix it",
      },
    });
  });

  it("defaults to the server's default workspace", () => {
    const parsed = parseCommand(["run", "--repo", ".", "task"]);
    expect(parsed.command === "run" && parsed.args.workspace).toEqual(DEFAULT_WORKSPACE);
    expect(parsed.command === "run" && parsed.args.warning).toBeUndefined();
  });

  it("reads the old --provider as it meant, with a warning naming the new flags", () => {
    const parsed = parseCommand(["chat", "--repo", ".", "--provider", "fly"]);
    expect(parsed).toMatchObject({
      command: "chat",
      args: {
        workspace: { isolation: "vm", engine: "fly" },
        warning: expect.stringContaining("--isolation vm --engine fly"),
      },
    });
    if (parsed.command !== "chat") throw new Error("not chat");
    const said: string[] = [];
    const options = invocationOptions(
      parsed.args,
      { ANTHROPIC_API_KEY: "sk-ant-test" },
      {
        write: (text) => said.push(text),
      },
    );
    expect(options.workspace).toEqual({ isolation: "vm", engine: "fly" });
    expect(said).toEqual([
      "vmpilot: --provider fly is read as --isolation vm --engine fly: give those instead (--provider will go)\n",
    ]);
  });

  it("detects whether to read standard input unless --stdin or --no-stdin says", () => {
    const stdin = (...flags: string[]) => {
      const parsed = parseCommand(["run", "--repo", ".", ...flags, "task"]);
      return parsed.command === "run" && parsed.args.stdin;
    };
    expect(stdin()).toBe("detect");
    expect(stdin("--stdin")).toBe("read");
    expect(stdin("--no-stdin")).toBe("skip");
  });

  it("picks a conversation with --continue or --conversation, which needs no --repo", () => {
    const latest = parseCommand(["run", "--repo", ".", "--continue", "more"]);
    expect(latest.command === "run" && latest.args.continueLatest).toBe(true);
    const byId = parseCommand(["chat", "--conversation", "7"]);
    expect(byId).toMatchObject({ command: "chat", args: { conversationId: 7, repo: undefined } });
    expect(parseCommand(["conversations", "--repo", "."])).toEqual({
      command: "conversations",
      repo: ".",
    });
  });

  it.each([
    [["run", "task"], /missing --repo/],
    [["run", "--repo", "."], /missing the task text/],
    [
      ["run", "--repo", ".", "--provider", "docker", "t"],
      /--provider must be one of sandbox, agent, fly, kubernetes, host/,
    ],
    [["run", "--repo", ".", "--isolation", "vm", "t"], /vm isolation needs a VM engine/],
    [["run", "--repo", ".", "--engine", "fly", "t"], /the fly engine runs vm isolation only/],
    [
      ["run", "--repo", ".", "--isolation", "full", "t"],
      /--isolation must be one of none, sandbox, vm/,
    ],
    [
      ["run", "--repo", ".", "--provider", "fly", "--isolation", "vm", "t"],
      /replace --provider: give only them/,
    ],
    [["run", "--repo", ".", "--max-steps", "0", "t"], /--max-steps must be a positive integer/],
    [["run", "--repo", ".", "--colour", "t"], /Unknown option/],
    [["run", "--repo", ".", "--stdin", "--no-stdin", "t"], /contradict each other/],
    [["run", "--repo", ".", "--no-stdin", "-"], /which --no-stdin turns off/],
    [["run", "--repo", ".", "--continue", "--conversation", "3", "t"], /give one of them/],
    [
      ["run", "--repo", ".", "--conversation", "x", "t"],
      /--conversation must be a positive integer/,
    ],
    [["run", "--continue", "--branch", "b", "--repo", ".", "t"], /a continued one has its own/],
    [["chat", "--repo", ".", "task"], /reads its turns from the terminal/],
    [["conversations"], /missing --repo/],
    [["deploy"], /usage:\n {2}vmpilot run/],
  ])("rejects %j", (argv, message) => {
    expect(() => parseCommand(argv)).toThrow(UsageError);
    expect(() => parseCommand(argv)).toThrow(message);
  });
});
