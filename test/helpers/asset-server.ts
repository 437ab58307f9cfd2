// A loopback stand-in for GitHub's signed attachment URLs: it serves the files it is given by
// path and records the headers of every request, so a test can tell what the fetcher sent.
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import type { AssetPolicy } from "../../src/github/images.ts";

/** A 1×1 PNG. */
export const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

export const SVG = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><rect width="1" height="1"/></svg>',
);

/** The test servers are on loopback, over plain http; production allows neither. */
export const LOOPBACK_POLICY: AssetPolicy = {
  protocols: ["http:"],
  refuseAddress: () => undefined,
};

export type Asset =
  | { body: Buffer; type?: string; chunked?: boolean }
  | { redirect: string }
  /** Says it is this long, and sends nothing until the client has hung up. */
  | { claimedLength: number };

export interface AssetServer {
  url: string;
  /** Path and headers of every request, in order. */
  requests: { path: string; headers: IncomingHttpHeaders }[];
  close(): Promise<void>;
}

export async function startAssetServer(assets: Record<string, Asset>): Promise<AssetServer> {
  const requests: AssetServer["requests"] = [];
  const server = createServer((req, res) => {
    const path = req.url ?? "/";
    requests.push({ path, headers: req.headers });
    const asset = assets[path.split("?")[0] ?? ""];
    if (!asset) return res.writeHead(404).end();
    if ("redirect" in asset) return res.writeHead(302, { location: asset.redirect }).end();
    if ("claimedLength" in asset) {
      res.writeHead(200, { "content-type": "image/png", "content-length": asset.claimedLength });
      res.flushHeaders();
      return;
    }
    const type = asset.type ?? "image/png";
    if (!asset.chunked) {
      return res
        .writeHead(200, { "content-type": type, "content-length": asset.body.length })
        .end(asset.body);
    }
    res.writeHead(200, { "content-type": type });
    const piece = 64 * 1024;
    for (let at = 0; at < asset.body.length; at += piece)
      res.write(asset.body.subarray(at, at + piece));
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
