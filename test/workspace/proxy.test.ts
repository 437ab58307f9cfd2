import { describe, expect, it } from "vitest";
import { compileAllowList } from "../../src/workspace/proxy.ts";

describe("compileAllowList", () => {
  const allowed = compileAllowList([
    "registry.npmjs.org",
    "github.com:443",
    "*.pythonhosted.org",
    "127.0.0.2:8080",
    "[::1]:9000",
  ]);

  it.each([
    ["registry.npmjs.org", 443],
    ["REGISTRY.npmjs.org.", 80],
    ["github.com", 443],
    ["files.pythonhosted.org", 443],
    ["127.0.0.2", 8080],
    ["::1", 9000],
  ])("allows %s:%i", (host, port) => {
    expect(allowed(host, port)).toBe(true);
  });

  it.each([
    ["github.com", 22],
    ["api.github.com", 443],
    ["pythonhosted.org", 443],
    ["evilpythonhosted.org", 443],
    ["registry.npmjs.org.evil.com", 443],
    ["127.0.0.2", 8081],
  ])("refuses %s:%i", (host, port) => {
    expect(allowed(host, port)).toBe(false);
  });

  it.each(["http://x.com", "a b", "x.com:0", "x.com:99999", "*"])(
    "rejects the entry %j",
    (entry) => {
      expect(() => compileAllowList([entry])).toThrow(/Invalid network allow-list entry/);
    },
  );
});
