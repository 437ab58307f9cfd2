import { describe, expect, it } from "vitest";
import { DEFAULT_WORKSPACE } from "../../src/config/workspace.ts";
import { isPermanent } from "../../src/errors.ts";
import { createWorkspace } from "../../src/workspace/factory.ts";
import { IsolationUnavailable, workspaceFor } from "../../src/workspace/isolation.ts";
import { SandboxUnavailableError } from "../../src/workspace/sandbox/bwrap.ts";

const sandbox = { isolation: "sandbox", engine: "local" } as const;

describe("workspaceFor", () => {
  it("gives the operator's isolation on this machine unless the repository asks for a VM", () => {
    expect(workspaceFor({ isolation: "sandbox", engine: "fly" }, "sandbox")).toEqual(sandbox);
    expect(workspaceFor(undefined, "sandbox")).toEqual(DEFAULT_WORKSPACE);
    const none = { isolation: "none", engine: "local" } as const;
    expect(workspaceFor(none, "sandbox")).toEqual(none);
  });

  it("gives a VM on the operator's engine when asked, and never less than the operator's VM", () => {
    expect(workspaceFor({ isolation: "sandbox", engine: "fly" }, "vm")).toEqual({
      isolation: "vm",
      engine: "fly",
    });
    const kubernetes = { isolation: "vm", engine: "kubernetes" } as const;
    expect(workspaceFor(kubernetes, "vm")).toEqual(kubernetes);
    expect(workspaceFor(kubernetes, "sandbox")).toEqual(kubernetes);
  });

  it("refuses, permanently, a VM the operator does not run", () => {
    const ask = () => workspaceFor(sandbox, "vm");
    expect(ask).toThrow(IsolationUnavailable);
    expect(ask).toThrow(/WORKSPACE_ENGINE/);
    try {
      ask();
    } catch (error) {
      expect(isPermanent(error)).toBe(true);
    }
  });
});

describe("createWorkspace", () => {
  it("refuses an isolation its engine does not carry out, before starting anything", async () => {
    const open = (isolation: "vm" | "sandbox", engine: "local" | "fly") =>
      createWorkspace({ isolation, engine, root: "/nonexistent" });
    await expect(open("vm", "local")).rejects.toThrow(SandboxUnavailableError);
    await expect(open("vm", "local")).rejects.toThrow("vm isolation needs a VM engine");
    await expect(open("sandbox", "fly")).rejects.toThrow(
      "the fly engine runs vm isolation only, not sandbox",
    );
  });
});
