// The gate asks GitHub about a login, but decides on a person: the answer must be about the
// numeric id the door saw, since a login can be renamed and registered again by someone else.
import { describe, expect, it } from "vitest";
import { gate } from "../../src/jobs/run/gate.ts";
import { expectGitHubDone, github, useGitHubMock } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";

useGitHubMock();

const REPO = "acme/widgets";
const settings = { allowedUsers: [], triggerPolicy: "write" as const };
const repository = { owner: "acme", name: "widgets", octokit: testOctokit() };

function permission(login: string, id: number, role: string) {
  github()
    .get(`/repos/${REPO}/collaborators/${login}/permission`)
    .reply(200, { permission: role, role_name: role, user: { login, id } });
}

describe("the gate, by numeric id", () => {
  it("refuses when the login the door saw now belongs to someone else with write access", async () => {
    // Person 7 was "octocat" when they commented; 7 is now "octo-old" with read access, and
    // "octocat" was registered again by user 99, an admin.
    permission("octocat", 99, "admin");
    github().get("/user/7").reply(200, { login: "octo-old", id: 7 });
    permission("octo-old", 7, "read");
    const person = { person: { login: "octocat", id: 7 } };
    const result = await gate(person, repository, settings, []);
    expect(result).toMatchObject({ allowed: false, via: "read" });
    expectGitHubDone();
  });

  it("follows a person who was renamed to the login they have now", async () => {
    // Their old login was taken by user 99, who has no access.
    permission("octocat", 99, "none");
    github().get("/user/7").reply(200, { login: "octo-renamed", id: 7 });
    permission("octo-renamed", 7, "write");
    const result = await gate({ person: { login: "octocat", id: 7 } }, repository, settings, []);
    expect(result).toMatchObject({ allowed: true, via: "write" });
    expectGitHubDone();
  });

  it("refuses a person GitHub no longer has", async () => {
    permission("octocat", 99, "admin");
    github().get("/user/7").reply(404, {});
    const result = await gate({ person: { login: "octocat", id: 7 } }, repository, settings, []);
    expect(result).toMatchObject({ allowed: false, via: "none" });
    expectGitHubDone();
  });

  it("asks once when the answer is about the same person", async () => {
    permission("octocat", 7, "maintain");
    const result = await gate({ person: { login: "octocat", id: 7 } }, repository, settings, []);
    expect(result).toMatchObject({ allowed: true, via: "maintain" });
    expectGitHubDone();
  });
});
