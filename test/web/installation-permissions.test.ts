// An installation made before vmpilot asked for the checks and actions permissions: the settings
// list says so, from what GET /user/installations already answers (no extra call).
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
  it("tells an owner when the installation lacks the checks and actions permissions, and where to accept them", async () => {
    // GitHub's example of an older installation: checks write, no actions.
    const { installation } = examplePayload("installation", "created");
    mockInstallation(installation);
    const [repo] = await new GitHubUserApi("https://api.github.com", "ghu_alice").repos();
    expect(repo?.installation.url).toBe(installation.html_url);
    expect(String(permissionsNotice(repo?.installation ?? {}))).toMatchInlineSnapshot(
      `"<p class="notice error">This installation has not accepted the actions (read) permission yet: vmpilot cannot fix failing checks on its pull requests or mark them ready for review. An owner can accept them on <a href="https://github.com/settings/installations/957387">the installation&#39;s page on GitHub</a>.</p>"`,
    );
  });

  it("says nothing once they are granted, nor when GitHub does not say", async () => {
    const granted = { checks: "write", actions: "read", issues: "write" };
    expect(permissionsNotice({ permissions: granted })).toBe("");
    expect(permissionsNotice({ permissions: { ...granted, checks: "read" } })).not.toBe("");
    expect(permissionsNotice({})).toBe("");
  });
});
