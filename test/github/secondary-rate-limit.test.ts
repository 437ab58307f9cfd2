// Secondary rate limits are retried where they happen, after the wait GitHub asks for, a few times
// and only for short waits; other refusals are not retried.
import { expect, it } from "vitest";
import { github, useGitHubMock } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";
import { secondaryRateLimitWaits } from "../helpers/secondary-wait.ts";

useGitHubMock();

const limited = (seconds: string) =>
  [
    403,
    { message: "You have exceeded a secondary rate limit." },
    { "retry-after": seconds },
  ] as const;
const comment = () =>
  testOctokit().rest.issues.createComment({ owner: "o", repo: "r", issue_number: 1, body: "hi" });

it("makes the call again after retry-after, up to three times", async () => {
  const waits = secondaryRateLimitWaits.length;
  github()
    .post("/repos/o/r/issues/1/comments")
    .times(2)
    .reply(...limited("1"))
    .post("/repos/o/r/issues/1/comments")
    .reply(201, { id: 7 });
  expect((await comment()).data).toEqual({ id: 7 });
  expect(secondaryRateLimitWaits.slice(waits)).toEqual([1000, 1000]);

  github()
    .post("/repos/o/r/issues/1/comments")
    .times(4)
    .reply(...limited("2"));
  await expect(comment()).rejects.toMatchObject({ status: 403 });
  expect(secondaryRateLimitWaits.slice(waits + 2)).toEqual([2000, 2000, 2000]);
});

it("leaves a long wait, and refusals without one, to the caller", async () => {
  const waits = secondaryRateLimitWaits.length;
  github()
    .post("/repos/o/r/issues/1/comments")
    .reply(...limited("3600"));
  await expect(comment()).rejects.toMatchObject({ status: 403 });
  github().post("/repos/o/r/issues/1/comments").reply(403, { message: "Resource not accessible" });
  await expect(comment()).rejects.toMatchObject({ status: 403 });
  expect(secondaryRateLimitWaits.length).toBe(waits);
});
