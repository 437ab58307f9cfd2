import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileAddressPolicy } from "../../src/config/address-policy.ts";
import {
  attachmentPolicy,
  fetchImage,
  imageSources,
  sniffImageType,
} from "../../src/github/images.ts";
import {
  type AssetServer,
  LOOPBACK_POLICY,
  PNG,
  SVG,
  startAssetServer,
} from "../helpers/asset-server.ts";

let assets: AssetServer;

beforeAll(async () => {
  assets = await startAssetServer({
    "/shot.png": { body: PNG, type: "application/octet-stream" },
    "/logo.svg": { body: SVG, type: "image/png" },
    "/moved": { redirect: "/shot.png" },
    "/to-https": { redirect: "https://127.0.0.1/shot.png" },
    "/to-loopback": { redirect: "http://127.0.0.2:1/shot.png" },
    "/big": { body: Buffer.concat([PNG, Buffer.alloc(2000)]), chunked: true },
    "/claims-big": { claimedLength: 10 * 1024 * 1024 },
  });
});
afterAll(() => assets.close());

describe("imageSources", () => {
  it("lists each attachment of rendered HTML once, entities decoded, emoji left out", () => {
    const signed = "https://private-user-images.githubusercontent.com/1/a.png?jwt=x.y&amp;v=1";
    const html = `<p>Broken:</p><p><a href="${signed}"><img src="${signed}" alt="image" style="max-width: 100%;"></a>
      <img class="emoji" title=":octocat:" src="https://github.githubassets.com/images/icons/emoji/octocat.png">
      <img alt="x" src="https://camo.githubusercontent.com/abc"> <img src="${signed}"></p>`;
    expect(imageSources(html)).toEqual([
      "https://private-user-images.githubusercontent.com/1/a.png?jwt=x.y&v=1",
      "https://camo.githubusercontent.com/abc",
    ]);
    expect(imageSources(null)).toEqual([]);
  });
});

describe("sniffImageType", () => {
  it("knows PNG, JPEG, GIF and WebP by their first bytes, and nothing else", () => {
    expect(sniffImageType(PNG)).toBe("image/png");
    expect(sniffImageType(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0]))).toBe("image/jpeg");
    expect(sniffImageType(Buffer.from("GIF89a\x01\x00", "latin1"))).toBe("image/gif");
    expect(sniffImageType(Buffer.from("RIFF\x10\x00\x00\x00WEBPVP8 ", "latin1"))).toBe(
      "image/webp",
    );
    expect(sniffImageType(SVG)).toBeUndefined();
    expect(sniffImageType(Buffer.from("RIFF\x10\x00\x00\x00WAVEfmt ", "latin1"))).toBeUndefined();
  });
});

describe("fetchImage", () => {
  it("reads an image by its bytes, whatever its content type, following a redirect; sends no credentials", async () => {
    const before = assets.requests.length;
    const image = await fetchImage(`${assets.url}/moved`, { policy: LOOPBACK_POLICY });
    expect(image).toEqual({ ok: true, image: { mediaType: "image/png", data: PNG } });
    const sent = assets.requests.slice(before);
    expect(sent.map((r) => r.path)).toEqual(["/moved", "/shot.png"]);
    for (const { headers } of sent) {
      expect(Object.keys(headers).sort()).toEqual(["accept", "connection", "host", "user-agent"]);
    }
  });

  it("refuses an SVG (even served as image/png), and what passes the size cap", async () => {
    const policy = LOOPBACK_POLICY;
    expect(await fetchImage(`${assets.url}/logo.svg`, { policy })).toEqual({
      ok: false,
      reason: "it is not a PNG, JPEG, GIF or WebP image",
    });
    // Counted as it streams (no Content-Length) ...
    expect(await fetchImage(`${assets.url}/big`, { policy, maxBytes: 1024 })).toEqual({
      ok: false,
      reason: "it is over the 1 KB limit",
    });
    // ... and refused unread when the server says how long it is (it sends nothing else).
    expect(await fetchImage(`${assets.url}/claims-big`, { policy })).toEqual({
      ok: false,
      reason: "it is 10 MB, over the 5 MB limit",
    });
  });

  it("by default fetches https from public addresses only: no loopback, no http", async () => {
    const before = assets.requests.length;
    const port = new URL(assets.url).port;
    expect(await fetchImage(`https://127.0.0.1:${port}/shot.png`)).toEqual({
      ok: false,
      reason: "it is on a loopback address",
    });
    expect(await fetchImage("https://[::ffff:10.0.0.1]/a.png")).toEqual({
      ok: false,
      reason: "it is on a private address",
    });
    expect(await fetchImage(`${assets.url}/shot.png`)).toEqual({
      ok: false,
      reason: "it is not served over https",
    });
    expect(assets.requests.length).toBe(before);
  });

  it("checks a name once resolved, and every redirect", async () => {
    const port = new URL(assets.url).port;
    const publicOnly = compileAddressPolicy();
    const http = { protocols: ["http:"], refuseAddress: publicOnly };
    expect(await fetchImage(`http://localhost:${port}/shot.png`, { policy: http })).toEqual({
      ok: false,
      reason: "it could not be fetched (localhost resolves to a loopback address)",
    });
    // The test server itself may be reached; the addresses redirects point to are checked.
    const server = {
      protocols: ["http:"],
      refuseAddress: (address: string) =>
        address === "127.0.0.1" ? undefined : publicOnly(address),
    };
    expect(await fetchImage(`${assets.url}/to-loopback`, { policy: server })).toEqual({
      ok: false,
      reason: "it is on a loopback address",
    });
    expect(await fetchImage(`${assets.url}/to-https`, { policy: LOOPBACK_POLICY })).toEqual({
      ok: false,
      reason: "it is not served over http",
    });
  });
});

describe("attachmentPolicy", () => {
  it("adds nothing on github.com; on GitHub Enterprise, its host and media. subdomain on their own protocol", () => {
    expect(attachmentPolicy("https://api.github.com").trusted).toBeUndefined();
    expect(attachmentPolicy("http://GHE.corp:8080/api/v3").trusted).toEqual([
      "http://ghe.corp:8080",
      "http://media.ghe.corp:8080",
    ]);
    // The default port is no part of an origin; an address literal has no subdomain.
    expect(attachmentPolicy("https://ghe.corp:443/api/v3").trusted).toEqual([
      "https://ghe.corp",
      "https://media.ghe.corp",
    ]);
    expect(attachmentPolicy("http://10.1.2.3/api/v3").trusted).toEqual(["http://10.1.2.3"]);
  });

  it("reaches the Enterprise host over http on loopback, and no other host, not even by a redirect", async () => {
    const port = new URL(assets.url).port;
    // The Enterprise server is the asset server; localhost is the same server under another name.
    const ghes = attachmentPolicy(`${assets.url}/api/v3`);
    const other = `localhost:${port}`;
    expect(await fetchImage(`${assets.url}/moved`, { policy: ghes })).toEqual({
      ok: true,
      image: { mediaType: "image/png", data: PNG },
    });
    const before = assets.requests.length;
    expect(await fetchImage(`http://${other}/shot.png`, { policy: ghes })).toEqual({
      ok: false,
      reason: "it is not served over https",
    });
    expect(await fetchImage(`https://${other}/shot.png`, { policy: ghes })).toEqual({
      ok: false,
      reason: "it could not be fetched (localhost resolves to a loopback address)",
    });
    expect(await fetchImage(`https://127.0.0.1:${port}/shot.png`, { policy: ghes })).toEqual({
      ok: false,
      reason: "it is on a loopback address",
    });
    expect(assets.requests.length).toBe(before);
    // A redirect from the Enterprise host is checked as any other URL.
    const away = await startAssetServer({
      "/to-other": { redirect: `http://${other}/shot.png` },
      "/to-other-https": { redirect: `https://127.0.0.2:${port}/shot.png` },
    });
    try {
      const via = attachmentPolicy(`${away.url}/api/v3`);
      expect(await fetchImage(`${away.url}/to-other`, { policy: via })).toEqual({
        ok: false,
        reason: "it is not served over https",
      });
      expect(await fetchImage(`${away.url}/to-other-https`, { policy: via })).toEqual({
        ok: false,
        reason: "it is on a loopback address",
      });
    } finally {
      await away.close();
    }
    expect(assets.requests.length).toBe(before);
  });
});
