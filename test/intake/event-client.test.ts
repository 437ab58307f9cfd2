// Probot makes an app's handlers an installation client for every delivery; the intake calls no
// GitHub API, so its Probot (roles/web.ts) shares one client among all events.
import { expect, it } from "vitest";
import { TestProbotOctokit } from "../helpers/app.ts";
import { useGitHubMock } from "../helpers/github-mock.ts";
import { useTestServer } from "../helpers/test-server.ts";
import { examplePayload } from "../helpers/webhooks.ts";

useGitHubMock();

let clients = 0;
/** The app's client class, counting the clients made of it. */
class CountedOctokit extends TestProbotOctokit {
  constructor(...args: ConstructorParameters<typeof TestProbotOctokit>) {
    super(...args);
    clients++;
  }
}

const t = useTestServer({ Octokit: CountedOctokit });

it("makes no installation client per delivery", async () => {
  const before = clients;
  for (let i = 0; i < 3; i++) {
    const payload = examplePayload("issue_comment", "created");
    payload.installation = { id: 7 };
    payload.comment.body = "no trigger in this comment";
    expect((await t.send("issue_comment", payload)).status).toBe(200);
  }
  expect(clients - before).toBe(0);
});
