import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);

// The fallback writes to the process's stdout, so it runs in a child whose stdout we read.
const SCRIPT = `
import { registerSecret } from "./src/log/redact.ts";
import { fallbackLogger } from "./src/log/logger.ts";
registerSecret("registered-secret-value-42");
fallbackLogger().warn({ detail: "clone failed with registered-secret-value-42" }, "mirror");
`;

describe("the fallback logger of components given none", () => {
  it("redacts a registered secret", async () => {
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", SCRIPT], {
      cwd: new URL("../..", import.meta.url),
    });
    expect(stdout).toContain("clone failed with [REDACTED]");
    expect(stdout).not.toContain("registered-secret-value-42");
  });
});
