// An installation made before vmpilot asked for the checks, actions and statuses permissions: the
// settings list says so, from what GET /user/installations already answers (no extra call).
import { describe, expect, it } from "vitest";
import { GitHubUserApi } from "../../src/web/github-user.ts";
import { permissionsNotice } from "../../src/web/installation-permissions.ts";
import { github, useGitHubMock } from "../helpers/github-mock.ts";
import { examplePayload } from "../helpers/webhooks.ts";

useGitHubMock();

function mockInstallation(installation: Record<string, unknown>) {
  github()
    .get("/user/installations")
    .query(true)
    .reply(200, { total_count: 1, installations: [installation] })
    .get(`/user/installations/${installation.id}/repositories`)
    .query(true)
    .reply(200, {
      total_count: 1,
      repositories: [
        { id: 5, full_name: "acme/app", private: true, permissions: { admin: true, pull: true } },
      ],
    });
}

describe("the settings list", () => {
  it("tells an owner when the installation lacks the checks, actions or statuses permissions, and where to accept them", async () => {
    // GitHub's example of an older installation: checks and statuses write, no actions.
    const { installation } = examplePayload("installation", "created");
    mockInstallation(installation);
    const [repo] = await new GitHubUserApi("https://api.github.com", "ghu_alice").repos();
    expect(repo?.installation.url).toBe(installation.html_url);
    expect(String(permissionsNotice(repo?.installation ?? {}))).toMatchInlineSnapshot(
      `"<p class="notice error">This installation has not accepted the actions (read) permission yet: vmpilot cannot fix failing CI on its pull requests or tell when they are ready for review. An owner can accept them on <a href="https://github.com/settings/installations/957387">the installation&#39;s page on GitHub</a>.</p>"`,
    );
    // One that accepted checks and actions, but not the statuses vmpilot asked for last; one made
    // before all three.
    const granted = { checks: "write", actions: "read", issues: "write" };
    expect(String(permissionsNotice({ permissions: granted }))).toMatchInlineSnapshot(
      `"<p class="notice error">This installation has not accepted the statuses (read) permission yet: vmpilot cannot fix failing CI on its pull requests or tell when they are ready for review. An owner can accept them on the installation&#39;s page on GitHub.</p>"`,
    );
    expect(String(permissionsNotice({ permissions: { issues: "write" } }))).toMatchInlineSnapshot(
      `"<p class="notice error">This installation has not accepted the checks (write), actions (read), and statuses (read) permissions yet: vmpilot cannot fix failing CI on its pull requests or tell when they are ready for review. An owner can accept them on the installation&#39;s page on GitHub.</p>"`,
    );
  });

  it("says nothing once they are granted, nor when GitHub does not say", async () => {
    const granted = { checks: "write", actions: "read", statuses: "read", issues: "write" };
    expect(permissionsNotice({ permissions: granted })).toBe("");
    expect(permissionsNotice({ permissions: { ...granted, checks: "read" } })).not.toBe("");
    expect(permissionsNotice({})).toBe("");
  });
});
