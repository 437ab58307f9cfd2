// Real webhook payloads from @octokit/webhooks-examples, patched per case and signed the way
// GitHub signs them.
import { createHmac, randomUUID } from "node:crypto";
import { createRequire } from "node:module";

interface Definition {
  name: string;
  examples: Array<Record<string, unknown>>;
}
const definitions = createRequire(import.meta.url)("@octokit/webhooks-examples") as Definition[];

// biome-ignore lint/suspicious/noExplicitAny: payloads are patched freely by tests.
export type Payload = any;

/** A deep copy of GitHub's example for event.action (one sent to an app where there is one). */
export function examplePayload(event: string, action?: string): Payload {
  const examples = definitions.find((d) => d.name === event)?.examples ?? [];
  const matching = examples.filter((e) => action === undefined || e.action === action);
  const example = matching.find((e) => e.installation) ?? matching[0];
  if (!example) throw new Error(`no example payload for ${event}.${action}`);
  return structuredClone(example);
}

/** Deep copies of all of GitHub's examples for `event`. */
export function examples(event: string): Payload[] {
  return structuredClone(definitions.find((d) => d.name === event)?.examples ?? []);
}

export function signature(body: string, secret: string): string {
  return `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
}

export interface Delivery {
  event: string;
  payload: unknown;
  secret: string;
  /** X-GitHub-Delivery; a fresh UUID by default. */
  id?: string;
  /** Overrides the computed X-Hub-Signature-256; null leaves the header out. */
  signature?: string | null;
}

export async function deliver(
  serverUrl: string,
  delivery: Delivery,
): Promise<{ status: number; body: string; id: string }> {
  const id = delivery.id ?? randomUUID();
  const body = JSON.stringify(delivery.payload);
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": "GitHub-Hookshot/test",
    "x-github-event": delivery.event,
    "x-github-delivery": id,
  };
  const sig =
    delivery.signature === undefined ? signature(body, delivery.secret) : delivery.signature;
  if (sig !== null) headers["x-hub-signature-256"] = sig;
  const response = await fetch(`${serverUrl}/api/github/webhooks`, {
    method: "POST",
    headers,
    body,
  });
  return { status: response.status, body: await response.text(), id };
}
