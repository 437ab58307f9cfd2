// Which client a request comes from, for the limits kept per address (wrong API keys, live
// streams). Behind a proxy every request comes from the proxy's address, so the operator names the
// header the proxy sets (CLIENT_ADDRESS_HEADER: `fly-client-ip`, `x-real-ip`, `x-forwarded-for`);
// a header no trusted proxy sets would be the client's to choose, so none is read by default.
import type { IncomingMessage } from "node:http";

export function clientAddress(req: IncomingMessage, header?: string): string {
  const socket = req.socket.remoteAddress ?? "";
  if (!header) return socket;
  const value = req.headers[header];
  const joined = Array.isArray(value) ? value.join(",") : value;
  // A list (X-Forwarded-For) ends with the address the proxy itself saw; earlier ones are hearsay.
  const last = joined?.split(",").at(-1)?.trim();
  return last ? last.slice(0, 100) : socket;
}
