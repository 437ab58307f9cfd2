import { describe, expect, it } from "vitest";
import { isPermanent } from "../../src/errors.ts";
import { IsolationUnavailable, providerFor } from "../../src/workspace/isolation.ts";

describe("providerFor", () => {
  it("gives the operator's provider unless the repository asks for a VM", () => {
    expect(providerFor("sandbox", "sandbox", "fly")).toBe("sandbox");
    expect(providerFor("agent", "sandbox", undefined)).toBe("agent");
  });

  it("gives a VM when asked, and never less than the operator's VM", () => {
    expect(providerFor("sandbox", "vm", "fly")).toBe("fly");
    expect(providerFor("agent", "vm", "kubernetes")).toBe("kubernetes");
    expect(providerFor("kubernetes", "vm", "fly")).toBe("kubernetes");
    expect(providerFor("fly", "sandbox", undefined)).toBe("fly");
  });

  it("refuses, permanently, a VM the operator does not run", () => {
    const ask = () => providerFor("sandbox", "vm", undefined);
    expect(ask).toThrow(IsolationUnavailable);
    expect(ask).toThrow(/WORKSPACE_VM_PROVIDER/);
    try {
      ask();
    } catch (error) {
      expect(isPermanent(error)).toBe(true);
    }
  });
});
