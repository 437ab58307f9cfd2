import { describe, expect, it } from "vitest";
import { parseRunArgs, UsageError } from "../../src/cli/args.ts";

describe("parseRunArgs", () => {
  it("reads every option and joins the task text", () => {
    expect(
      parseRunArgs([
        "run",
        "--repo",
        "../app",
        "--branch",
        "vmpilot/x",
        "--provider",
        "host",
        "--model",
        "claude-haiku-4-5",
        "--max-steps",
        "12",
        "--json",
        "-f",
        "build.log",
        "--file",
        "notes.txt",
        "fix",
        "it",
      ]),
    ).toEqual({
      repo: "../app",
      branch: "vmpilot/x",
      provider: "host",
      model: "claude-haiku-4-5",
      maxSteps: 12,
      json: true,
      files: ["build.log", "notes.txt"],
      task: "fix it",
    });
  });

  it("defaults to the sandbox provider", () => {
    expect(parseRunArgs(["run", "--repo", ".", "task"]).provider).toBe("sandbox");
  });

  it.each([
    [["run", "task"], /missing --repo/],
    [["run", "--repo", "."], /missing the task text/],
    [["run", "--repo", ".", "--provider", "docker", "t"], /--provider must be sandbox or host/],
    [["run", "--repo", ".", "--max-steps", "0", "t"], /--max-steps must be a positive integer/],
    [["run", "--repo", ".", "--colour", "t"], /Unknown option/],
    [["deploy"], /usage: vmpilot run/],
  ])("rejects %j", (argv, message) => {
    expect(() => parseRunArgs(argv)).toThrow(UsageError);
    expect(() => parseRunArgs(argv)).toThrow(message);
  });
});
