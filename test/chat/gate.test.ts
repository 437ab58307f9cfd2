// Who may use the chat face: the gate of the issue path (write access, or the repository's
// allow-list under `triggerPolicy: allow-list`), on the repository's effective settings, checked
// on every request; and scratch only for someone who may use a repository. The real web role;
// GitHub behind nock.
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import { createApiKey } from "../../src/store/api-keys.ts";
import type { Database } from "../../src/store/database.ts";
import {
  forgetFileSettings,
  getRepository,
  setRepositoryFileSettings,
  setRepositorySettings,
  upsertInstallation,
  upsertRepository,
} from "../../src/store/installations.ts";
import { APP_SLUG, startTestServer, testConfig } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/db.ts";
import {
  expectGitHubDone,
  github,
  mockApp,
  mockInstallationToken,
  mockPermission,
  mockRepoConfig,
  useGitHubMock,
} from "../helpers/github-mock.ts";

useGitHubMock();

const REPO = "acme/widgets";
const REPO_ID = 700;
// Open WebUI's title chore: answered at once, so a request that passes the gate runs no turn.
const TITLE_CHORE =
  '### Task:\nGenerate a concise, 3-5 word title.\n### Output:\nJSON format: { "title": "your concise title here" }\n### Chat History:\n<chat_history>\nUSER: tidy up\n</chat_history>';

let db: Database;
let server: RunningServer;
let nextUserId = 100;
let nextInstallation = 70;

/** A key of a new person; GitHub is asked once who they are now (the gate goes by login). */
async function keyFor(login: string): Promise<OpenAI> {
  const id = nextUserId++;
  const { secret } = await createApiKey(db.pool, {
    name: "laptop",
    ownerLogin: login,
    ownerId: id,
  });
  github().get(`/user/${id}`).reply(200, { login, id });
  return new OpenAI({ apiKey: secret, baseURL: `${server.url}/v1`, maxRetries: 0 });
}

const models = async (client: OpenAI) => (await client.models.list()).data.map((m) => m.id);

function ask(client: OpenAI, model: string, content = TITLE_CHORE) {
  return client.chat.completions.create({ model, messages: [{ role: "user", content }] });
}

beforeAll(async () => {
  db = await openTestDatabase();
  mockApp(APP_SLUG);
  server = await startTestServer(db, { config: testConfig(), role: "web" });
  expectGitHubDone();
});

afterAll(async () => {
  await server?.close();
  await db?.close();
});

/** Each test its own installation, so no installation token is cached from an earlier one. */
let installation: number;
beforeEach(async () => {
  installation = nextInstallation++;
  await upsertInstallation(db.pool, { id: installation, accountLogin: "acme" });
  await upsertRepository(db.pool, {
    id: REPO_ID,
    installationId: installation,
    fullName: REPO,
    removed: false,
  });
  await setRepositorySettings(db.pool, REPO_ID, {});
  await forgetFileSettings(db.pool, { repositoryId: REPO_ID });
});

describe("the chat face's gate", () => {
  it("keeps a writer off a repository whose settings page allows only others, and off scratch", async () => {
    await setRepositorySettings(db.pool, REPO_ID, {
      triggerPolicy: "allow-list",
      allowedUsers: ["alice"],
    });
    await setRepositoryFileSettings(db.pool, REPO_ID, {});
    mockInstallationToken(installation);
    const bob = await keyFor("bob");
    // Bob can push, but the allow-list decides alone: GitHub is asked only who he is now.
    expect(await models(bob)).toEqual([]);
    for (const [model, content] of [
      [`vmpilot/${REPO}`, "fix the typo\n/vmpilot pr"],
      ["vmpilot", "make hello.txt"],
    ]) {
      await expect(ask(bob, model as string, content)).rejects.toMatchObject({
        status: 404,
        code: "model_not_found",
      });
    }
    const alice = await keyFor("alice");
    expect(await models(alice)).toEqual(["vmpilot", `vmpilot/${REPO}`]);
    expect((await ask(alice, `vmpilot/${REPO}`)).model).toBe(`vmpilot/${REPO}`);
    const { rows } = await db.pool.query("SELECT 1 FROM jobs WHERE trigger = 'chat'");
    expect(rows).toEqual([]);
  });

  it("reads the policy of .github/vmpilot.yml when the store does not know it, and remembers it", async () => {
    mockInstallationToken(installation);
    mockRepoConfig(REPO, "triggerPolicy: allow-list\nallowedUsers: [alice]\n");
    const bob = await keyFor("bob");
    await expect(ask(bob, `vmpilot/${REPO}`)).rejects.toMatchObject({ status: 404 });
    expect((await getRepository(db.pool, REPO_ID))?.fileSettings).toEqual({
      triggerPolicy: "allow-list",
      allowedUsers: ["alice"],
    });
    // Known now: the next request asks GitHub nothing.
    expect(await models(bob)).toEqual([]);
  });

  it("applies a change of policy to the very next request", async () => {
    await setRepositoryFileSettings(db.pool, REPO_ID, {});
    const bob = await keyFor("bob");
    mockInstallationToken(installation);
    mockPermission(REPO, "bob", "write");
    expect(await models(bob)).toEqual(["vmpilot", `vmpilot/${REPO}`]);
    // Bob's write access is remembered a minute: no second question to GitHub.
    expect((await ask(bob, `vmpilot/${REPO}`)).model).toBe(`vmpilot/${REPO}`);
    await setRepositorySettings(db.pool, REPO_ID, {
      triggerPolicy: "allow-list",
      allowedUsers: ["alice"],
    });
    await expect(ask(bob, `vmpilot/${REPO}`)).rejects.toMatchObject({ status: 404 });
    await expect(ask(bob, "vmpilot")).rejects.toMatchObject({ status: 404 });
  });

  it("re-checks a key's scratch workspace on every request, not only when the key was made", async () => {
    await setRepositoryFileSettings(db.pool, REPO_ID, {});
    // Mona could push when she made her key; she can only read now.
    const mona = await keyFor("mona");
    mockInstallationToken(installation);
    mockPermission(REPO, "mona", "read");
    await expect(ask(mona, "vmpilot")).rejects.toMatchObject({
      status: 404,
      code: "model_not_found",
    });
    // The answer is remembered as the repository's is: no second question to GitHub.
    expect(await models(mona)).toEqual([]);
  });
});
