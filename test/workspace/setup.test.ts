import { mkdtemp, readFile, realpath, rm } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorkspace } from "../../src/workspace/factory.ts";
import { runSetup } from "../../src/workspace/setup.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { recordingLogger } from "./helpers.ts";

let root: string;
let server: http.Server;
let port: number;

beforeAll(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-setup-")));
  server = http.createServer((_req, res) => res.end("package tarball"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.2", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(root, { recursive: true, force: true });
});

describe("runSetup", () => {
  it("runs each command in the sandbox with the allow-listed network and reports it", async () => {
    const seen: string[] = [];
    const workspace = await createWorkspace({
      root,
      allowHosts: [`127.0.0.2:${port}`],
      allowPrivate: ["127.0.0.2"],
      logger: recordingLogger(),
    });
    const report = await runSetup(
      workspace,
      [
        `curl -sS -o deps.txt http://127.0.0.2:${port}/`,
        "curl -sS http://registry.invalid/ || true",
      ],
      { onStep: (step) => seen.push(step.command) },
    );
    await workspace.dispose();
    expect(report.ok).toBe(true);
    expect(seen).toHaveLength(2);
    expect(await readFile(join(root, "deps.txt"), "utf8")).toBe("package tarball");
    expect(report.blocked.map((b) => b.host)).toEqual(["registry.invalid"]);
  });

  it("stops at the first failing command", async () => {
    const workspace: Workspace = await createWorkspace({ root, logger: recordingLogger() });
    const report = await runSetup(workspace, ["exit 3", "touch never"]);
    await workspace.dispose();
    expect(report.ok).toBe(false);
    expect(report.steps).toHaveLength(1);
    expect(report.steps[0]?.result.exitCode).toBe(3);
    await expect(readFile(join(root, "never"))).rejects.toThrow();
  });
});
