import { Probot } from "probot";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/github/logger.ts";
import { clearRegisteredSecrets, registerSecret } from "../../src/github/redact.ts";
import { appPrivateKey } from "../helpers/app.ts";

const token = `ghs_${"Q".repeat(36)}`;

function capture(format: "json" | "pretty" = "json") {
  const lines: string[] = [];
  const logger = createLogger({
    level: "debug",
    format,
    destination: { write: (l) => lines.push(l) },
  });
  return { logger, output: () => lines.join("") };
}

afterEach(() => clearRegisteredSecrets());

describe("createLogger", () => {
  it("redacts secrets in messages, fields, nested objects and errors", () => {
    const { logger, output } = capture();
    registerSecret("configured-webhook-secret");
    logger.info(`cloning with ${token}`);
    logger.info(
      {
        headers: { authorization: `token ${token}` },
        url: `https://x-access-token:${token}@github.com/o/r`,
      },
      "push",
    );
    logger.warn({ nested: { deeper: ["sk-ant-api03-abcdefghijklmnop"] } }, "model");
    logger.error({ err: new Error(`failed: configured-webhook-secret ${token}`) }, "boom");
    logger.info({ token: "opaque-value-without-prefix" }, "named field");
    const text = output();
    expect(text).not.toContain(token);
    expect(text).not.toContain("configured-webhook-secret");
    expect(text).not.toContain("sk-ant-api03");
    expect(text).not.toContain("opaque-value-without-prefix");
    expect(text.match(/\[REDACTED\]/g)?.length).toBeGreaterThanOrEqual(6);
    for (const line of text.trim().split("\n")) expect(() => JSON.parse(line)).not.toThrow();
  });

  it("redacts in pretty format too", () => {
    const { logger, output } = capture("pretty");
    logger.info(`token ${token}`);
    expect(output()).toContain("token [REDACTED]");
  });

  it("is the logger Probot logs through", async () => {
    const { logger, output } = capture();
    const probot = new Probot({ appId: 1, privateKey: appPrivateKey(), log: logger });
    await probot.ready();
    probot.log.info({ installationToken: token }, "got token");
    expect(output()).toContain('"name":"probot"');
    expect(output()).not.toContain(token);
  });
});
