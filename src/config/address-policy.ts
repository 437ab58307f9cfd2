// Which resolved addresses the sandbox proxy may connect to. Names are checked after resolving,
// so a name that resolves (or rebinds) to the worker's loopback or the cloud metadata service is
// refused like the literal address.
import { BlockList, isIP } from "node:net";

type Family = "ipv4" | "ipv6";

interface AddressRange {
  address: string;
  prefix: number;
  family: Family;
}

/** Parses `10.1.0.0/16`, `fd00::/8` or a single address; undefined when it is neither. */
export function parseAddressRange(value: string): AddressRange | undefined {
  const [address = "", prefixText, ...rest] = value.trim().split("/");
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return undefined;
  const bits = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (prefix > bits) return undefined;
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

// IPv4-mapped IPv6 addresses (::ffff:127.0.0.1) match the IPv4 ranges: BlockList maps them.
const REFUSED: readonly [reason: string, ranges: readonly string[]][] = [
  ["unspecified", ["0.0.0.0/8", "::/128"]],
  ["loopback", ["127.0.0.0/8", "::1/128"]],
  ["private", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"]],
  ["link-local", ["169.254.0.0/16", "fe80::/10"]],
  ["multicast", ["224.0.0.0/4", "ff00::/8"]],
  // 240/4 holds the broadcast address; ::/96 the deprecated IPv4-compatible forms; 64:ff9b:1::/48
  // is a network's own NAT64 prefix, with IPv4 addresses embedded where its operator chose.
  ["reserved", ["240.0.0.0/4", "::/96", "fec0::/10", "64:ff9b:1::/48"]],
];

/** The eight 16-bit groups of an IPv6 address, dotted IPv4 tails and `::` expanded. */
function groups(address: string): number[] {
  let text = address.toLowerCase().replace(/%.*$/, "");
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const start = head ? head.split(":") : [];
  const end = tail ? tail.split(":") : [];
  const fill = tail === undefined ? [] : Array(8 - start.length - end.length).fill("0");
  return [...start, ...fill, ...end].map((group) => Number.parseInt(group, 16));
}

/**
 * The IPv4 address inside a translated IPv6 one: NAT64's well-known 64:ff9b::/96 (a DNS64
 * resolver hands these out for IPv4-only names, and the gateway connects to the IPv4 address
 * from inside the network) and 6to4's 2002::/16.
 */
function embeddedIPv4(address: string): { address: string; via: string } | undefined {
  const g = groups(address);
  const quad = (high = 0, low = 0) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) {
    return { address: quad(g[6], g[7]), via: "NAT64" };
  }
  if (g[0] === 0x2002) return { address: quad(g[1], g[2]), via: "6to4" };
  return undefined;
}

function blockList(ranges: readonly string[]): BlockList {
  const list = new BlockList();
  for (const text of ranges) {
    const range = parseAddressRange(text);
    if (!range) throw new Error(`Invalid address range ${JSON.stringify(text)}`);
    list.addSubnet(range.address, range.prefix, range.family);
  }
  return list;
}

const refusedLists = REFUSED.map(([reason, ranges]) => ({ reason, list: blockList(ranges) }));

/**
 * Compiles the check for resolved addresses: it returns why an address is refused (loopback,
 * private...), or undefined when it may be reached. `allowRanges` are the operator's explicit
 * exceptions (NETWORK_ALLOW_PRIVATE).
 */
export function compileAddressPolicy(
  allowRanges: readonly string[] = [],
): (address: string) => string | undefined {
  const allowed = blockList(allowRanges);
  const check = (address: string, family: Family) => {
    if (allowed.check(address, family)) return undefined;
    return refusedLists.find(({ list }) => list.check(address, family))?.reason;
  };
  return (address) => {
    const family: Family = isIP(address) === 6 ? "ipv6" : "ipv4";
    const direct = check(address, family);
    if (direct !== undefined || allowed.check(address, family)) return direct;
    const inner = family === "ipv6" ? embeddedIPv4(address) : undefined;
    const why = inner && check(inner.address, "ipv4");
    return why && `${why} (${inner?.via})`;
  };
}
