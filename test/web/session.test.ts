import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { localPath } from "../../src/web/auth.ts";
import { CookieJar } from "../../src/web/session.ts";

const SECRET = "a-session-secret-of-at-least-32-characters";

function request(setCookie: string): IncomingMessage {
  return { headers: { cookie: setCookie.split(";")[0] } } as IncomingMessage;
}

describe("CookieJar", () => {
  const user = { login: "alice", userId: 7, token: "ghu_secrettoken1234567890", sid: "sid-1" };

  it("round-trips a session and hides the token", () => {
    const jar = new CookieJar(SECRET, false);
    const cookie = jar.sessionCookie(user);
    expect(cookie).toMatch(
      /^vmpilot_session=[^;]+; Path=\/; Max-Age=28800; HttpOnly; SameSite=Lax$/,
    );
    expect(decodeURIComponent(cookie)).not.toContain("secrettoken");
    const value = cookie.split(";")[0]?.split("=")[1] ?? "";
    expect(Buffer.from(value.split(".")[0] ?? "", "base64url").toString()).not.toContain(
      "secrettoken",
    );
    const session = jar.readSession(request(cookie));
    expect(session).toMatchObject({ login: "alice", userId: 7, token: user.token });
    expect(session?.csrf).toMatch(/^[\w-]{43}$/);
  });

  it("uses __Host- cookies marked Secure on https", () => {
    const jar = new CookieJar(SECRET, true);
    const cookie = jar.sessionCookie(user);
    expect(cookie).toMatch(/^__Host-vmpilot_session=.*; Secure$/);
    expect(jar.readSession(request(cookie))?.login).toBe("alice");
  });

  it("rejects another secret's cookie, an expired one, and a state cookie posing as a session", () => {
    const jar = new CookieJar(SECRET, false);
    const other = new CookieJar(`${SECRET}-other`, false);
    expect(jar.readSession(request(other.sessionCookie(user)))).toBeNull();
    const old = jar.sessionCookie(user, Date.now() - 9 * 3600_000);
    expect(jar.readSession(request(old))).toBeNull();
    const state = jar
      .stateCookie({ state: "s", next: "/" })
      .replace("vmpilot_oauth", "vmpilot_session");
    expect(jar.readSession(request(state))).toBeNull();
  });

  it("expires the OAuth state after ten minutes", () => {
    const jar = new CookieJar(SECRET, false);
    const fresh = jar.stateCookie({ state: "s1", next: "/jobs" });
    expect(jar.readState(request(fresh))).toEqual({ state: "s1", next: "/jobs" });
    const stale = jar.stateCookie({ state: "s1", next: "/" }, Date.now() - 11 * 60_000);
    expect(jar.readState(request(stale))).toBeNull();
  });

  it("rejects a session whose encrypted token was swapped for another cookie's", () => {
    const jar = new CookieJar(SECRET, false);
    const a = jar.sessionCookie(user).split(";")[0]?.split("=")[1] ?? "";
    const payload = JSON.parse(Buffer.from(a.split(".")[0] ?? "", "base64url").toString());
    payload.token = "AAAAAAAAAAAAAAAA.BBBB.CCCCCCCCCCCCCCCCCCCCCC";
    const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
    expect(jar.readSession(request(`vmpilot_session=${body}.${a.split(".")[1]}`))).toBeNull();
  });
});

describe("localPath", () => {
  it.each([
    ["/jobs/1", "/jobs/1"],
    ["/settings?x=1", "/settings?x=1"],
    ["//evil.example", "/"],
    ["/\\evil.example", "/"],
    ["https://evil.example", "/"],
    ["/\t/evil.example/x", "/"],
    ["/\n/evil.example", "/"],
    ["/../x?y=1#z", "/x?y=1#z"],
    [null, "/"],
  ])("%j → %j", (input, expected) => {
    expect(localPath(input)).toBe(expected);
  });
});
