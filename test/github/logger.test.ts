import { Probot } from "probot";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_LOG_FIELD } from "../../src/log/log-cap.ts";
import { createLogger } from "../../src/log/logger.ts";
import { clearRegisteredSecrets, registerSecret } from "../../src/log/redact.ts";
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

  it("cuts a 1 MB field and a 1 MB message to the cap, saying how much was cut", () => {
    const { logger, output } = capture();
    const huge = "p".repeat(1024 * 1024);
    logger.info({ body: huge, nested: { list: [huge] }, short: "kept" }, huge);
    const line = output();
    expect(line.length).toBeLessThan(4 * MAX_LOG_FIELD + 1000);
    const parsed = JSON.parse(line);
    const cut = `${"p".repeat(MAX_LOG_FIELD)}…[${huge.length - MAX_LOG_FIELD} chars cut]`;
    expect(parsed).toMatchObject({ body: cut, nested: { list: [cut] }, short: "kept", msg: cut });
  });

  it("keeps webhook payloads and request bodies out of logged errors", () => {
    const { logger, output } = capture();
    const payload = '{"comment":{"body":"payload-marker"}}';
    const event = { id: "delivery-1", name: "issue_comment", payload, signature: "sha256=00" };
    const inner = Object.assign(new Error("signature does not match"), { event });
    const outer = Object.assign(new AggregateError([inner], "failed"), { event });
    logger.error(outer);
    logger.debug({ event }, "Webhook received");
    const requestError = Object.assign(new Error("HttpError"), {
      request: { method: "POST", url: "https://api.github.com/x", body: payload },
    });
    logger.error({ err: requestError }, "request failed");
    const text = output();
    expect(text).not.toContain("payload-marker");
    expect(text).not.toContain("sha256=00");
    expect(text).toContain('"id":"delivery-1"');
    expect(text).toContain("https://api.github.com/x");
  });
});
