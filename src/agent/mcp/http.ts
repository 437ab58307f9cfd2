// How the worker reaches a streamable HTTP MCP server: through the egress policy that guards the
// images it fetches (github/images.ts), and the repository's allow-list. A request goes only to a
// host the allow-list names (a file's server; the operator's own was chosen by the operator), over
// a scheme the policy takes, to addresses it checked once resolved (never loopback, private or
// link-local unless NETWORK_ALLOW_PRIVATE opened them), and each answer is cut off once it passes
// MAX_ANSWER_BYTES, as it arrives. Redirects are not followed here: the SDK follows one only
// within the server's origin, which comes back through this fetch.
import http from "node:http";
import https from "node:https";
import { Readable, Transform } from "node:stream";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { compileAddressPolicy } from "../../config/address-policy.ts";
import { type AssetPolicy, checkedLookup, refusal } from "../../github/images.ts";
import { compileAllowList } from "../../workspace/sandbox/proxy.ts";

/** What one answer (or one event stream, all of it) may carry: a tool's answer with images. */
const MAX_ANSWER_BYTES = 32 * 1024 * 1024;

export interface McpEgress {
  /** Schemes and addresses; production: https to public addresses (and NETWORK_ALLOW_PRIVATE's). */
  policy: AssetPolicy;
  /** Hosts a server may be at (network.allow); undefined for the operator's servers: any. */
  allowHosts?: readonly string[];
}

/** Production's policy: https to public addresses, and to the ranges the operator opened. */
export function publicEgress(allowPrivate: readonly string[] = []): AssetPolicy {
  return { protocols: ["https:"], refuseAddress: compileAddressPolicy(allowPrivate) };
}

/** Why `url` may not be reached, or undefined. */
export function egressRefusal(url: URL, egress: McpEgress): string | undefined {
  const refused = refusal(url, egress.policy);
  if (refused) return refused;
  if (egress.allowHosts === undefined) return undefined;
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  return compileAllowList(egress.allowHosts)(host, port)
    ? undefined
    : `its host ${url.host} is not in network.allow`;
}

class AnswerTooLarge extends Error {
  override name = "AnswerTooLarge";
}

/** The node:http answer as a fetch Response whose body stops at MAX_ANSWER_BYTES. */
function responseOf(res: http.IncomingMessage): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    for (const each of Array.isArray(value) ? value : value === undefined ? [] : [value]) {
      headers.append(name, each);
    }
  }
  const status = res.statusCode ?? 502;
  if ([101, 204, 205, 304].includes(status) || status < 200) {
    res.resume();
    return new Response(null, { status: status < 200 ? 502 : status, headers });
  }
  let size = 0;
  const capped = res.pipe(
    new Transform({
      transform(chunk: Buffer, _encoding, next) {
        size += chunk.length;
        if (size <= MAX_ANSWER_BYTES) return next(null, chunk);
        res.destroy();
        next(new AnswerTooLarge(`the server's answer is over ${MAX_ANSWER_BYTES} bytes`));
      },
    }),
  );
  res.on("error", (error) => capped.destroy(error));
  const body = Readable.toWeb(capped) as ReadableStream<Uint8Array>;
  return new Response(body, { status, statusText: res.statusMessage, headers });
}

/** A fetch for the SDK's StreamableHTTPClientTransport that holds every request to `egress`. */
export function egressFetch(egress: McpEgress): FetchLike {
  const options = { keepAlive: true, lookup: checkedLookup(egress.policy) };
  const agents = { "http:": new http.Agent(options), "https:": new https.Agent(options) };
  return (input, init = {}) =>
    new Promise((resolve, reject) => {
      const url = new URL(String(input));
      const refused = egressRefusal(url, egress);
      if (refused) return reject(new Error(`${url.origin} may not be reached: ${refused}`));
      const protocol = url.protocol === "https:" ? https : http;
      const req = protocol.request(url, {
        method: init.method ?? "GET",
        headers: Object.fromEntries(new Headers(init.headers)),
        agent: agents[url.protocol as keyof typeof agents],
        signal: init.signal ?? undefined,
      });
      req.on("response", (res) => resolve(responseOf(res)));
      req.on("error", reject);
      const body = init.body;
      if (body === undefined || body === null) req.end();
      else if (typeof body === "string") req.end(body);
      else reject(new Error("a request body that is not text"));
    });
}
