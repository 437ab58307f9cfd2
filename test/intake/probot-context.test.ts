// Probot makes each handler of a delivery a context of its own, and an app's Probot an installation
// client for each. The intake calls no GitHub API: its Probot (roles/web.ts) shares one client among
// all events, and each event has one handler (intake/app.ts).
import { expect, it } from "vitest";
import { deliveries } from "../../src/metrics.ts";
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

it("handles a push in one handler: the delivery counts once", async () => {
  const recordedPushes = async () =>
    (await deliveries.get()).values.find(
      (value) => value.labels.event === "push" && value.labels.outcome === "recorded",
    )?.value ?? 0;
  const before = await recordedPushes();
  const payload = examplePayload("push");
  payload.installation = { id: 7 };
  payload.ref = "refs/heads/some-feature";
  expect((await t.send("push", payload)).status).toBe(200);
  expect((await recordedPushes()) - before).toBe(1);
});
