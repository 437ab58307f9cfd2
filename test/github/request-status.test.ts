import { RequestError } from "@octokit/request-error";
import { describe, expect, it } from "vitest";
import { githubStatus } from "../../src/github/request-status.ts";

describe("githubStatus", () => {
  it("reads the status of Octokit's request errors only", () => {
    const request = { method: "GET" as const, url: "https://api.github.com/x", headers: {} };
    expect(githubStatus(new RequestError("Not Found", 404, { request }))).toBe(404);
    // Anything else with a `status` field is not GitHub's answer.
    expect(githubStatus(Object.assign(new Error("boom"), { status: 404 }))).toBeUndefined();
    expect(githubStatus(undefined)).toBeUndefined();
  });
});
