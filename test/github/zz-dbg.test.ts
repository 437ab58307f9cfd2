import nock from "nock";
import { it, expect } from "vitest";
import { testOctokit, GITHUB_API, isolateNetwork } from "/work/main/test/helpers/octokit.ts";
it("x", async () => {
  isolateNetwork();
  nock(GITHUB_API).post("/graphql").reply(200, { data: { ok: 1 } });
  const r = await testOctokit().graphql("query { ok }");
  expect(r).toEqual({ ok: 1 });
  nock(GITHUB_API).post("/graphql").times(1).reply((uri, body) => [200, { data: { ok: 2 } }]);
  expect(await testOctokit().graphql("query { ok }")).toEqual({ ok: 2 });
});
