// Images attached to issues and comments. GitHub gives apps no plain link to an attachment: the
// rendered HTML (body_html) carries a short-lived signed URL for each one, which is fetched here
// without credentials (the installation token never goes there), capped in size, and checked to
// be an image by its first bytes, not by what the server says it is.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { compileAddressPolicy } from "../config/address-policy.ts";
import type { ImageMediaType } from "../store/message-param.ts";

/** The most of one image read; the model APIs take no larger one either. */
const IMAGE_MAX_BYTES = 5 * 1024 * 1024;
const MAX_REDIRECTS = 5;
const TIMEOUT_MS = 30_000;

/** Where images may be fetched from: which URL schemes, and which resolved addresses not. */
export interface AssetPolicy {
  protocols: readonly string[];
  /** Why an address may not be reached (loopback, private...), or undefined when it may. */
  refuseAddress(address: string): string | undefined;
  /**
   * Origins reached as the GitHub API is: on their own protocol, at whatever address their name
   * resolves to. Only the URL's own origin counts: a redirect elsewhere is checked as usual.
   */
  trusted?: readonly string[];
}

/** Production: https only, never the worker's own network. */
const PUBLIC_HTTPS: AssetPolicy = { protocols: ["https:"], refuseAddress: compileAddressPolicy() };

/**
 * The policy for attachments under the app's GitHub API base. github.com serves them from public
 * CDNs over https; a GitHub Enterprise server serves them itself (or from its `media.` subdomain),
 * often on a private network and sometimes over http, so those two origins are reached as its API
 * is, and everything else as on github.com.
 */
export function attachmentPolicy(apiUrl: string): AssetPolicy {
  const api = new URL(apiUrl);
  if (api.origin === "https://api.github.com") return PUBLIC_HTTPS;
  // An address literal has no subdomain.
  const media = `${api.protocol}//media.${api.host}`;
  const trusted = [api.origin, ...(URL.canParse(media) ? [new URL(media).origin] : [])];
  return { ...PUBLIC_HTTPS, trusted };
}

export interface ImageFetchOptions {
  /** Default: https to public addresses only. Tests serve images on loopback. */
  policy?: AssetPolicy;
  maxBytes?: number;
  /** For the whole fetch, redirects included; default 30 s. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface FetchedImage {
  mediaType: ImageMediaType;
  data: Buffer;
}

export type ImageOutcome = { ok: true; image: FetchedImage } | { ok: false; reason: string };

const ENTITIES: Record<string, string> = { amp: "&", quot: '"', "#39": "'", lt: "<", gt: ">" };

/** The `src` of every `<img>` in rendered HTML, in order, once each; emoji are not attachments. */
export function imageSources(html: string | null | undefined): string[] {
  const found: string[] = [];
  for (const [tag] of (html ?? "").matchAll(/<img\b[^>]*>/gi)) {
    if (/\bclass="[^"]*\bemoji\b/i.test(tag)) continue;
    const src = /\ssrc="([^"]*)"/i.exec(tag)?.[1];
    if (!src) continue;
    const url = src.replace(/&(amp|quot|#39|lt|gt);/g, (_, name: string) => ENTITIES[name] ?? "");
    if (!found.includes(url)) found.push(url);
  }
  return found;
}

/** The image format the bytes are in, by their magic numbers; undefined for anything else (SVG too). */
export function sniffImageType(bytes: Buffer): ImageMediaType | undefined {
  const starts = (magic: string, at = 0) =>
    bytes.subarray(at, at + magic.length).equals(Buffer.from(magic, "latin1"));
  if (starts("\x89PNG\r\n\x1a\n")) return "image/png";
  if (starts("\xff\xd8\xff")) return "image/jpeg";
  if (starts("GIF87a") || starts("GIF89a")) return "image/gif";
  if (starts("RIFF") && starts("WEBP", 8)) return "image/webp";
  return undefined;
}

function megabytes(bytes: number): string {
  const mb = bytes / 1024 / 1024;
  return mb >= 1 ? `${Math.round(mb * 10) / 10} MB` : `${Math.ceil(bytes / 1024)} KB`;
}

/**
 * An image given inline as a base64 data: URL (a chat client's), held to the limits of a fetched
 * one: at most `maxBytes` decoded, and a PNG, JPEG, GIF or WebP by its bytes, whatever type the
 * URL names.
 */
export function decodeDataImage(url: string, maxBytes = IMAGE_MAX_BYTES): ImageOutcome {
  const header = /^data:([^,]*),/i.exec(url);
  if (!header) return { ok: false, reason: "it is not a data: URL" };
  if (!/;base64$/i.test(header[1] ?? "")) return { ok: false, reason: "it is not base64-encoded" };
  const payload = url.slice(header[0].length).replace(/\s+/g, "");
  // Four characters carry three bytes: an oversize image is refused before it is decoded.
  const size = Math.floor((payload.length * 3) / 4) - (payload.match(/=+$/)?.[0].length ?? 0);
  if (size > maxBytes) {
    return { ok: false, reason: `it is ${megabytes(size)}, over the ${megabytes(maxBytes)} limit` };
  }
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(payload) || payload.length % 4 === 1) {
    return { ok: false, reason: "its base64 data is not valid" };
  }
  const data = Buffer.from(payload, "base64");
  const mediaType = sniffImageType(data);
  if (!mediaType) return { ok: false, reason: "it is not a PNG, JPEG, GIF or WebP image" };
  return { ok: true, image: { mediaType, data } };
}

/** Fetches one image; every way it can fail is a reason to tell the model, never a throw. */
export async function fetchImage(
  url: string,
  options: ImageFetchOptions = {},
): Promise<ImageOutcome> {
  const policy = options.policy ?? PUBLIC_HTTPS;
  const maxBytes = options.maxBytes ?? IMAGE_MAX_BYTES;
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return { ok: false, reason: "its address is not a URL" };
  }
  // A deadline for the whole fetch: a server that sends a byte now and then cannot hold the job.
  const deadline = AbortSignal.timeout(options.timeoutMs ?? TIMEOUT_MS);
  const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;
  try {
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const trusted = policy.trusted?.includes(target.origin) ?? false;
      const refused = trusted ? undefined : refusal(target, policy);
      if (refused) return { ok: false, reason: refused };
      const response = await get(target, trusted ? undefined : policy, signal);
      const status = response.statusCode ?? 0;
      const location = response.headers.location;
      if (status >= 300 && status < 400 && location) {
        response.destroy();
        target = new URL(location, target);
        continue;
      }
      if (status !== 200) {
        response.destroy();
        return { ok: false, reason: `the server answered ${status}` };
      }
      const length = Number(response.headers["content-length"]);
      if (length > maxBytes) {
        response.destroy();
        return {
          ok: false,
          reason: `it is ${megabytes(length)}, over the ${megabytes(maxBytes)} limit`,
        };
      }
      const data = await readCapped(response, maxBytes);
      if (!data) return { ok: false, reason: `it is over the ${megabytes(maxBytes)} limit` };
      const mediaType = sniffImageType(data);
      if (!mediaType) return { ok: false, reason: "it is not a PNG, JPEG, GIF or WebP image" };
      return { ok: true, image: { mediaType, data } };
    }
    return { ok: false, reason: "it redirected too many times" };
  } catch (error) {
    return { ok: false, reason: `it could not be fetched (${(error as Error).message})` };
  }
}

/** Why `url` may not be fetched under `policy` before any lookup, or undefined. */
export function refusal(url: URL, policy: AssetPolicy): string | undefined {
  if (!policy.protocols.includes(url.protocol))
    return `it is not served over ${policy.protocols.map((p) => p.replace(":", "")).join(" or ")}`;
  // Node connects to an address literal without a lookup: check it here.
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const why = isIP(host) ? policy.refuseAddress(host) : undefined;
  return why && `it is on a ${why} address`;
}

/** A lookup that refuses a name when any of its addresses is refused; the socket uses what it checked. */
export function checkedLookup(policy: AssetPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, "");
      const why = addresses.map((a) => policy.refuseAddress(a.address)).find(Boolean);
      if (why) return callback(new Error(`${hostname} resolves to a ${why} address`), "");
      const first = addresses[0];
      if (!first) return callback(new Error(`${hostname} has no address`), "");
      if (options.all) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}

/** `policy` checks the addresses the name resolves to; none for a trusted origin. */
function get(
  url: URL,
  policy: AssetPolicy | undefined,
  signal: AbortSignal,
): Promise<http.IncomingMessage> {
  const transport = url.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    // Only these headers: no Authorization, no cookie. A fresh connection per request (agent: false).
    const request = transport.get(
      url,
      {
        headers: { accept: "image/*", "user-agent": "vmpilot" },
        ...(policy && { lookup: checkedLookup(policy) }),
        agent: false,
        signal,
      },
      resolve,
    );
    request.on("error", reject);
  });
}

/** The body, or undefined as soon as it passes `max` bytes (the rest is not read). */
async function readCapped(
  response: http.IncomingMessage,
  max: number,
): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response) {
    size += (chunk as Buffer).length;
    if (size > max) {
      response.destroy();
      return undefined;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
