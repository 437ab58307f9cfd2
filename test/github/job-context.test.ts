import { describe, expect, it } from "vitest";
import { isPermanent } from "../../src/errors.ts";
import { readJobContext } from "../../src/store/job-context.ts";

const context = {
  owner: "octo",
  name: "repo",
  itemKind: "issue",
  title: "Fix it",
  htmlUrl: "https://github.com/octo/repo/issues/1",
  cloneUrl: "https://github.com/octo/repo.git",
  defaultBranch: "main",
  target: { type: "issue_comment", id: 5 },
  appSlug: "vmpilot",
  command: "vmpilot",
  label: "vmpilot",
};

describe("readJobContext", () => {
  it("reads back the context the intake stored", () => {
    expect(readJobContext({ id: 7, context })).toEqual(context);
  });

  it("refuses a corrupted context with a permanent error naming the job and field", () => {
    const corrupted = { ...context, target: { type: "issue_comment" } };
    let thrown: unknown;
    try {
      readJobContext({ id: 7, context: corrupted });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect((thrown as Error).message).toMatch(/^jobs\.context of job 7 is not valid: .*target\.id/);
    expect(isPermanent(thrown)).toBe(true);
  });
});
