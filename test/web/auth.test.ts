import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/database.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { Client, startWebHarness, type WebHarness } from "./helpers/harness.ts";

let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await db.close();
});

describe("sign-in", () => {
  let h: WebHarness;
  beforeAll(async () => {
    h = await startWebHarness({ db });
  });
  afterAll(async () => {
    await h.close();
    expect(h.github.problems).toEqual([]);
  });

  it("signs in through GitHub's OAuth flow and keeps the token out of reach of page scripts", async () => {
    const client = new Client(h.url);
    const start = await client.get("/login?next=/jobs");
    expect(start.status).toBe(303);
    const authorize = new URL(start.headers.get("location") ?? "");
    expect(authorize.origin + authorize.pathname).toBe(`${h.github.webUrl}/login/oauth/authorize`);
    expect(authorize.searchParams.get("client_id")).toBe(h.github.clientId);
    expect(authorize.searchParams.get("redirect_uri")).toBe(`${h.url}/login/callback`);
    const stateCookie = start.headers.getSetCookie()[0] ?? "";
    expect(stateCookie).toMatch(/^vmpilot_oauth=.*HttpOnly; SameSite=Lax/);

    h.github.signInAs("alice");
    const back = await client.request(authorize.toString(), {});
    const done = await client.get(back.headers.get("location") ?? "");
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe("/jobs");
    const session = done.headers.getSetCookie().find((c) => c.startsWith("vmpilot_session="));
    expect(session).toMatch(/HttpOnly; SameSite=Lax/);
    expect(session).not.toMatch(/Secure/); // http:// public URL
    // The token is encrypted inside the signed cookie: neither it nor its prefix shows.
    expect(
      Buffer.from(session?.split("=")[1]?.split(".")[0] ?? "", "base64url").toString(),
    ).not.toContain("ghu_");

    const home = await client.get("/");
    expect(await home.text()).toContain("Signed in as <strong>alice</strong>");
  });

  it.each([
    "//evil.example/x",
    "/\\evil.example/x",
    "https://evil.example/x",
    "/%2F%2Fevil.example",
    "/..//evil.example",
  ])("returns only to a same-origin path after sign-in: next=%s", async (next) => {
    const client = new Client(h.url);
    const start = await client.get(`/login?next=${encodeURIComponent(next)}`);
    h.github.signInAs("alice");
    const back = await client.request(start.headers.get("location") ?? "", {});
    const done = await client.get(back.headers.get("location") ?? "");
    const target = new URL(done.headers.get("location") ?? "", h.url);
    expect(target.origin).toBe(new URL(h.url).origin);
    expect(done.headers.get("location")).toMatch(/^\/(?!\/)/);
  });

  it.each(["/%09/evil.example/x", "/%0A/evil.example", "/jobs%0D%0ASet-Cookie:%20x=1"])(
    "answers 400, not 500 or a redirect elsewhere, to control characters in next=%s",
    async (next) => {
      const res = await new Client(h.url).get(`/login?next=${next}`);
      expect(res.status).toBe(400);
    },
  );

  it("refuses a callback whose state does not match the browser's state cookie (login CSRF)", async () => {
    const victim = new Client(h.url);
    await victim.get("/login");
    // An attacker's own authorization, replayed into the victim's browser.
    const attacker = new Client(h.url);
    h.github.signInAs("mallory");
    const start = await attacker.get("/login");
    const back = await attacker.request(start.headers.get("location") ?? "", {});
    const forged = await victim.get(back.headers.get("location") ?? "");
    expect(forged.status).toBe(400);
    expect(forged.headers.getSetCookie().some((c) => c.startsWith("vmpilot_session="))).toBe(false);
    const noCookie = await new Client(h.url).get(back.headers.get("location") ?? "");
    expect(noCookie.status).toBe(400);
  });

  it("ignores a tampered session cookie", async () => {
    const client = new Client(h.url);
    await client.signIn(h.github, "alice");
    const value = client.cookies.get("vmpilot_session") ?? "";
    const [body, sig] = value.split(".");
    const payload = JSON.parse(Buffer.from(body ?? "", "base64url").toString());
    payload.login = "admin";
    client.cookies.set(
      "vmpilot_session",
      `${Buffer.from(JSON.stringify(payload)).toString("base64url")}.${sig}`,
    );
    const home = await client.get("/");
    expect(await home.text()).toContain("Sign in with GitHub");
  });

  it("only redirects to local paths after signing in", async () => {
    const client = new Client(h.url);
    const done = await client.signIn(h.github, "alice", "//evil.example/x");
    expect(done.headers.get("location")).toBe("/");
  });

  it("signs out with a POST carrying the CSRF token, and refuses one without", async () => {
    const client = new Client(h.url);
    await client.signIn(h.github, "alice");
    const page = await (await client.get("/")).text();
    const refused = await client.post("/logout", {});
    expect(refused.status).toBe(403);
    expect(client.cookies.has("vmpilot_session")).toBe(true);
    const out = await client.post("/logout", { csrf: Client.csrf(page) });
    expect(out.status).toBe(303);
    expect(client.cookies.has("vmpilot_session")).toBe(false);
  });

  it("ends the session on the server when signing out: a copy of the cookie stops working", async () => {
    const client = new Client(h.url);
    await client.signIn(h.github, "alice");
    const copy = new Client(h.url);
    copy.cookies.set("vmpilot_session", client.cookies.get("vmpilot_session") ?? "");
    expect(await (await copy.get("/")).text()).toContain("Signed in as <strong>alice</strong>");
    const page = await (await client.get("/")).text();
    await client.post("/logout", { csrf: Client.csrf(page) });
    const after = await (await copy.get("/")).text();
    expect(after).not.toContain("Signed in as");
    expect((await copy.get("/settings")).status).toBe(303);
  });

  it("ends the session when GitHub no longer accepts the token", async () => {
    const client = new Client(h.url);
    await client.signIn(h.github, "alice");
    h.github.revokeTokens();
    const res = await client.get("/settings");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/login?next=%2Fsettings");
    expect(client.cookies.has("vmpilot_session")).toBe(false);
  });
});

describe("without OAuth credentials", () => {
  let h: WebHarness;
  beforeAll(async () => {
    h = await startWebHarness({ oauth: false, db });
  });
  afterAll(async () => {
    await h.close();
  });

  it("says sign-in is not configured and how to set it up", async () => {
    const res = await new Client(h.url).get("/login");
    expect(res.status).toBe(503);
    const text = await res.text();
    expect(text).toContain("Sign-in is not configured");
    expect(text).toContain("GITHUB_CLIENT_ID");
    expect(text).toContain(`${h.url}/login/callback`);
  });
});
