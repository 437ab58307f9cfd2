import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getRepository } from "../../src/store/installations.ts";
import { updateJob } from "../../src/store/jobs.ts";
import type { FakeRepo } from "./helpers/github-fake.ts";
import { startWebHarness, type WebHarness } from "./helpers/harness.ts";

const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOTS = new URL("../../test-output/screenshots/", import.meta.url);
// CI installs Debian's chromium; elsewhere the story is skipped when it is missing.
const available = existsSync(CHROMIUM);
if (!available && process.env.CI)
  throw new Error(`${CHROMIUM} is missing: apt-get install chromium`);

describe.skipIf(!available)("in a real browser", () => {
  let h: WebHarness;
  let browser: Browser;
  let page: Page;
  let repo: FakeRepo;

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    h = await startWebHarness();
    repo = await h.addRepo({
      id: 700,
      installationId: 70,
      fullName: "acme/widgets",
      private: true,
      access: { maintainer: "admin" },
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
      ],
    });
    page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await h?.close();
    expect(h.github.problems).toEqual([]);
  });

  const nav = (name: string) =>
    page.getByRole("navigation", { name: "Main" }).getByRole("link", { name, exact: true });
  const shoot = (name: string) =>
    page.screenshot({ path: new URL(`${name}.png`, SCREENSHOTS).pathname, fullPage: true });

  it("tells the story: sign in, change settings, see an error, watch a job live", async () => {
    // 1. Sign in through the fake GitHub.
    await page.goto(h.url);
    await shoot("01-home-signed-out");
    h.github.signInAs("maintainer");
    await page.getByRole("link", { name: "Sign in with GitHub" }).first().click();
    await page.getByText("Signed in as").waitFor();
    expect(await page.locator(".account strong").textContent()).toBe("maintainer");

    // 2. Change the label and the max cost; the saved values come back.
    await nav("Settings").click();
    await shoot("02-settings-list");
    await page.getByRole("link", { name: "acme/widgets" }).click();
    await page.getByLabel("Trigger label").fill("ai-fix");
    await page.getByLabel("Max cost per job (USD)").fill("2.5");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    expect(await page.getByLabel("Trigger label").inputValue()).toBe("ai-fix");
    expect(await page.getByLabel("Max cost per job (USD)").inputValue()).toBe("2.5");
    expect(await page.locator('label[for="f-label"] .source').textContent()).toBe(
      "set on this page",
    );
    expect((await getRepository(h.db.pool, repo.id))?.settings).toEqual({
      label: "ai-fix",
      maxCostUsd: 2.5,
    });
    await shoot("03-settings-saved");

    // 3. An invalid value is rejected with an error next to its field.
    await page.getByLabel("Max steps per job").fill("0");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.locator("#f-maxSteps-error").waitFor();
    expect(await page.locator("#f-maxSteps-error").textContent()).toBe("Must be at least 1.");
    expect(await page.getByLabel("Max steps per job").getAttribute("aria-invalid")).toBe("true");
    await shoot("04-settings-error");

    // 4. A running job's page grows a new step without a reload.
    const job = await h.addJob(repo, { status: "running", startedAt: new Date() });
    await h.addEvent(job, "acknowledged", { message: "vmpilot is on it" });
    await h.addEvent(job, "step_started", { step: 1 });
    await h.addEvent(job, "text", { step: 1, text: "I will run the tests first." });
    await page.goto(`${h.url}/jobs/${job.id}`);
    await page.locator("#live").waitFor();
    const loaded = await page.evaluate(() => performance.timeOrigin);
    const call = await h.addEvent(job, "tool_call", {
      step: 1,
      id: "t1",
      name: "bash",
      input: { command: "npm test" },
    });
    await page.locator(`#ev-${call}`).waitFor();
    expect(await page.locator(`#ev-${call} pre.command`).textContent()).toBe("$ npm test");
    const result = await h.addEvent(job, "tool_result", {
      step: 1,
      id: "t1",
      name: "bash",
      isError: false,
      output: "1 passing",
      durationMs: 800,
    });
    await page.locator(`#ev-${result} summary`).click();
    await page.getByText("1 passing").waitFor();
    await h.addEvent(job, "tool_call", {
      step: 1,
      id: "t2",
      name: "str_replace_based_edit_tool",
      input: {
        command: "str_replace",
        path: "src/add.js",
        old_str: "return a - b;",
        new_str: "return a + b;",
      },
    });
    await h.addEvent(job, "usage", {
      step: 1,
      request: {
        inputTokens: 1200,
        outputTokens: 300,
        cacheReadInputTokens: 0,
        cacheCreationInputTokens: 0,
        costUsd: 0.0081,
      },
      totals: { costUsd: 0.0081 },
    });
    // As the worker does with each usage event: the job row's tokens and cost, which the header shows.
    await updateJob(h.db.pool, job.id, {
      costUsd: 0.0081,
      usage: { inputTokens: 1200, outputTokens: 300, cacheReadInputTokens: 0 },
    });
    await page.locator("pre.diff .add").waitFor();
    await page.locator("#job-cost").filter({ hasText: "$0.0081" }).waitFor();
    expect(await page.locator("#job-tokens").textContent()).toBe("1,500");
    await shoot("05-job-live");
    await updateJob(h.db.pool, job.id, { status: "succeeded" });
    await page.locator("#job-status").filter({ hasText: "succeeded" }).waitFor();
    await page.getByText("The job has finished.").waitFor();
    // Same document throughout: the steps arrived without a reload.
    expect(await page.evaluate(() => performance.timeOrigin)).toBe(loaded);

    // 5. The other pages.
    await nav("Jobs").click();
    await page.getByRole("heading", { name: "acme/widgets" }).waitFor();
    await shoot("06-jobs");
    await nav("Usage").click();
    await page.locator("figure.chart svg").waitFor();
    await shoot("07-usage");

    // A phone-sized screen.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${h.url}/settings/acme/widgets`);
    await shoot("08-settings-phone");
    await page.goto(`${h.url}/jobs/${job.id}`);
    await shoot("09-job-phone");
    const overflow = await page.evaluate(
      // A string: the test's TypeScript has no DOM types.
      "document.documentElement.scrollWidth - window.innerWidth",
    );
    expect(overflow).toBeLessThanOrEqual(0);
  });

  it("works from the keyboard alone: skip link, then the form", async () => {
    await page.setViewportSize({ width: 1200, height: 900 });
    await page.goto(`${h.url}/settings/acme/widgets`);
    const focused = () =>
      page.evaluate("document.activeElement.id || document.activeElement.textContent");
    await page.keyboard.press("Tab");
    expect(await focused()).toBe("Skip to content");
    await page.keyboard.press("Enter");
    const seen: unknown[] = [];
    for (let i = 0; i < 10 && seen.at(-1) !== "f-label"; i++) {
      await page.keyboard.press("Tab");
      seen.push(await focused());
    }
    expect(seen).toEqual(["f-enabled", "f-label"]);
    await page.keyboard.press("ControlOrMeta+a");
    await page.keyboard.type("keyboard");
    await page.keyboard.press("Enter");
    await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    expect(await page.getByLabel("Trigger label").inputValue()).toBe("keyboard");
  });

  it("makes an API key, copies it, shows it only once, and revokes it", async () => {
    const context = await browser.newContext({
      permissions: ["clipboard-read", "clipboard-write"],
    });
    const tab = await context.newPage();
    h.github.signInAs("maintainer");
    await tab.goto(`${h.url}/login?next=/keys`);
    await tab.getByRole("heading", { name: "API keys" }).waitFor();
    await tab.getByLabel("Name").fill("Open WebUI");
    await tab.getByRole("button", { name: "Create key" }).click();
    const field = tab.getByLabel("The new API key");
    const secret = await field.inputValue();
    expect(secret).toMatch(/^vmp_/);
    await tab.getByRole("button", { name: "Copy" }).click();
    await tab.getByRole("button", { name: "Copied" }).waitFor();
    expect(await tab.evaluate("navigator.clipboard.readText()")).toBe(secret);
    await tab.screenshot({
      path: new URL("10-keys-new.png", SCREENSHOTS).pathname,
      fullPage: true,
    });

    await tab.goto(`${h.url}/keys`);
    expect(await tab.content()).not.toContain(secret);
    await tab.getByRole("cell", { name: `…${secret.slice(-4)}` }).waitFor();
    await tab.getByRole("button", { name: "Revoke" }).click();
    await tab.getByText(/^revoked /).waitFor();
    await context.close();
  });

  it("runs no inline script and reports no CSP violation", async () => {
    const violations: string[] = [];
    page.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    for (const path of ["/", "/settings", "/jobs", "/usage", "/keys"])
      await page.goto(`${h.url}${path}`);
    expect(await page.locator("script:not([src])").count()).toBe(0);
    expect(violations).toEqual([]);
  });
});
