// Changing a field of a real webhook payload, deep inside it, without touching the example.
import type { Payload } from "../helpers/webhooks.ts";

/** `payload` with `path` set (undefined deletes it), copying only the objects on the way. */
export function set(payload: Payload, path: string[], value: unknown): Payload {
  const [key, ...rest] = path as [string, ...string[]];
  if (payload === null || typeof payload !== "object") return payload;
  const copy = Array.isArray(payload) ? [...payload] : { ...payload };
  if (rest.length > 0) copy[key] = set(payload[key], rest, value);
  else if (value === undefined) delete copy[key];
  else copy[key] = value;
  return copy;
}

export function get(payload: Payload, path: string): unknown {
  return path.split(".").reduce((value, key) => value?.[key], payload);
}
