import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  checkRepoConfig,
  defaults,
  MAX_REPO_CONFIG_BYTES,
  parseRepoConfig,
  repoConfigJsonSchema,
  resolveSettings,
} from "../../src/config/repo-config.ts";

const SCHEMA_FILE = new URL("../../schema/vmpilot.schema.json", import.meta.url);

describe("parseRepoConfig", () => {
  it("accepts a full config", () => {
    const text = `
enabled: true
label: ai
triggerPolicy: allow-list
allowedUsers: [alice, bob-2]
model: claude-sonnet-4-5
maxSteps: 30
maxCostUsd: 2.5
timeoutMinutes: 90
maxDailyCostUsd: 20
setup: [npm ci]
network:
  allow: [registry.npmjs.org, "*.pypi.org:443", npm.corp.example:8080]
plugins: [code_review]
publicJobs: true
`;
    const result = parseRepoConfig(text);
    expect(result).toEqual({
      ok: true,
      config: {
        enabled: true,
        label: "ai",
        triggerPolicy: "allow-list",
        allowedUsers: ["alice", "bob-2"],
        model: "claude-sonnet-4-5",
        maxSteps: 30,
        maxCostUsd: 2.5,
        timeoutMinutes: 90,
        maxDailyCostUsd: 20,
        setup: ["npm ci"],
        network: { allow: ["registry.npmjs.org", "*.pypi.org:443", "npm.corp.example:8080"] },
        plugins: ["code_review"],
        publicJobs: true,
      },
    });
  });

  it("accepts automations on a schedule (five-field cron, UTC) and on new issues", () => {
    const text = `
automations:
  - name: weekly-deps
    schedule: "0 6 * * 1"
    prompt: Update the lockfile and fix what breaks.
  - name: nightly
    schedule: "*/30 1-3 1,15 jan-jun mon-fri"
    prompt: Fix the failing tests on main.
  - name: triage
    on: issues.opened
    mode: triage
    authors: any
    labels: [bug, question]
    prompt: Label the issue and thank its author.
`;
    expect(parseRepoConfig(text)).toEqual({
      ok: true,
      config: {
        automations: [
          {
            name: "weekly-deps",
            schedule: "0 6 * * 1",
            prompt: "Update the lockfile and fix what breaks.",
          },
          {
            name: "nightly",
            schedule: "*/30 1-3 1,15 jan-jun mon-fri",
            prompt: "Fix the failing tests on main.",
          },
          {
            name: "triage",
            on: "issues.opened",
            mode: "triage",
            authors: "any",
            labels: ["bug", "question"],
            prompt: "Label the issue and thank its author.",
          },
        ],
      },
    });
  });

  it("treats an empty file or a comment-only file as no settings", () => {
    expect(parseRepoConfig("")).toEqual({ ok: true, config: {} });
    expect(parseRepoConfig("# nothing yet\n")).toEqual({ ok: true, config: {} });
  });

  it.each([
    ["lable: x", "lable: unknown key"],
    ["network:\n  allow: [a.com]\n  deny: [b.com]", "network.deny: unknown key"],
    ["maxSteps: 0", "maxSteps: must be at least 1"],
    ["maxSteps: 501", "maxSteps: must be at most 500"],
    ["timeoutMinutes: 241", "timeoutMinutes: must be at most 240"],
    ["timeoutMinutes: 1.5", "timeoutMinutes: must be a whole number"],
    ["maxSteps: 2.5", "maxSteps: must be a whole number"],
    ["maxCostUsd: 0", "maxCostUsd: must be greater than 0"],
    ["maxDailyCostUsd: lots", "maxDailyCostUsd: must be a number"],
    ["enabled: yes", "enabled: expected boolean, received string"],
    ["triggerPolicy: anyone", "triggerPolicy: must be write or allow-list"],
    ["allowedUsers: [ok, 'no spaces']", "allowedUsers[1]: must be a GitHub user name"],
    ["network:\n  allow: ['https://a.com/x']", "network.allow[0]: must be a host name"],
    [
      "network:\n  allow: [a.com, '127.0.0.1:5432']",
      "network.allow[1]: must not be an internal address (loopback)",
    ],
    [
      "network:\n  allow: [localhost]",
      "network.allow[0]: must not be an internal address (loopback)",
    ],
    [
      "network:\n  allow: ['*.localhost']",
      "network.allow[0]: must not be an internal address (loopback)",
    ],
    [
      "network:\n  allow: [169.254.169.254]",
      "network.allow[0]: must not be an internal address (link-local)",
    ],
    [
      "network:\n  allow: ['0.0.0.0:80']",
      "network.allow[0]: must not be an internal address (unspecified)",
    ],
    ["setup: ['  ']", "setup[0]: must not be empty"],
    ["label: ''", "label: must not be empty"],
    ["plugins: [Bad!]", "plugins[0]: must be a plugin name"],
    ["- a list", "must be a mapping of settings"],
    ["label: [unclosed", "invalid YAML"],
    ["label: a\nlabel: b", "invalid YAML: Map keys must be unique"],
    [
      "automations:\n  - {name: a, prompt: x}",
      "automations[0]: must have exactly one trigger: schedule or on",
    ],
    [
      "automations:\n  - {name: a, prompt: x, schedule: '0 6 * * 1', on: issues.opened}",
      "automations[0]: must have exactly one trigger: schedule or on",
    ],
    [
      "automations:\n  - {name: a, prompt: x, schedule: '0 6 * *'}",
      "automations[0].schedule: must be a cron expression of five fields",
    ],
    [
      "automations:\n  - {name: a, prompt: x, schedule: '0 24 * * 1'}",
      "automations[0].schedule: the hour field (24) must be *, a number from 0 to 23",
    ],
    [
      "automations:\n  - {name: a, prompt: x, schedule: '@weekly'}",
      "automations[0].schedule: must be a cron expression of five fields",
    ],
    [
      "automations:\n  - {name: a, prompt: x, schedule: '0 6 * * 1', mode: triage}",
      "automations[0].mode: triage works on an issue",
    ],
    [
      "automations:\n  - {name: a, prompt: x, schedule: '0 6 * * 1', authors: any}",
      "automations[0].authors: only applies to automations with on:",
    ],
    [
      "automations:\n  - {name: a, prompt: x, on: issues.opened, authors: any}",
      "automations[0].authors: any lets anyone's issue steer the run: only with mode: triage",
    ],
    [
      "automations:\n  - {name: a, prompt: x, on: issues.opened, mode: fix, authors: any, labels: [bug]}",
      "automations[0].authors: any lets anyone's issue steer the run: only with mode: triage",
    ],
    [
      "automations:\n  - {name: a, prompt: x, on: issues.opened, mode: triage, authors: any}",
      "automations[0].authors: any needs labels: the labels a stranger's issue may get",
    ],
    [
      "automations:\n  - {name: a, prompt: x, on: issues.opened, labels: [bug]}",
      "automations[0].labels: only applies to automations with mode: triage",
    ],
    [
      "automations:\n  - {name: a, prompt: x, on: issues.opened, mode: triage, labels: []}",
      "automations[0].labels: must name at least one label",
    ],
    ["automations:\n  - {name: a, prompt: x, on: issues.closed}", "automations[0].on: must be"],
    ["automations:\n  - {name: Weekly, prompt: x, on: issues.opened}", "automations[0].name"],
    ["automations:\n  - {name: a, prompt: ' ', on: issues.opened}", "prompt: must not be empty"],
    [
      "automations:\n  - {name: a, prompt: x, on: issues.opened}\n  - {name: a, prompt: y, on: issues.opened}",
      "automations[1].name: is used twice",
    ],
  ])("rejects %j naming the key", (text, expected) => {
    const result = parseRepoConfig(text);
    expect(result.ok).toBe(false);
    expect(result.ok ? "" : result.message).toContain(expected);
  });

  it("refuses an alias bomb with a config error instead of throwing", () => {
    const lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 1; i < 9; i++) {
      const prev = String.fromCharCode(96 + i);
      const next = String.fromCharCode(97 + i);
      lines.push(`${next}: &${next} [${Array(9).fill(`*${prev}`).join(",")}]`);
    }
    const result = parseRepoConfig(lines.join("\n"));
    expect(result).toMatchObject({ ok: false, message: expect.stringMatching(/aliases expand/) });
  });

  it("refuses a file over the size cap before parsing it", () => {
    const result = parseRepoConfig(`model: ${"x".repeat(MAX_REPO_CONFIG_BYTES)}`);
    expect(result).toMatchObject({
      ok: false,
      message: expect.stringMatching(/larger than 64 KiB/),
    });
  });

  it("lists every problem at once", () => {
    const result = checkRepoConfig({ foo: 1, bar: 2, maxSteps: -1 });
    expect(result.ok ? [] : result.issues.map((i) => i.path).sort()).toEqual([
      "bar",
      "foo",
      "maxSteps",
    ]);
  });
});

describe("resolveSettings", () => {
  it("takes each field from the repo file, else the page, else the defaults, and says which", () => {
    const resolved = resolveSettings({
      page: { label: "page-label", maxSteps: 10, network: { allow: ["a.com"] } },
      file: { label: "file-label", plugins: ["code_review"] },
    });
    expect(resolved.values).toEqual({
      ...defaults,
      label: "file-label",
      maxSteps: 10,
      network: { allow: ["a.com"] },
      plugins: ["code_review"],
    });
    expect(resolved.sources).toMatchObject({
      label: "file",
      maxSteps: "page",
      "network.allow": "page",
      plugins: "file",
      model: "default",
      enabled: "default",
    });
  });

  it("does not share arrays with its inputs", () => {
    const page = { setup: ["npm ci"] };
    const resolved = resolveSettings({ page });
    resolved.values.setup.push("rm -rf /");
    expect(page.setup).toEqual(["npm ci"]);
    expect(defaults.setup).toEqual([]);
  });

  it("keeps the page's cost limits as ceilings: the file may lower them, never raise them", () => {
    const page = { maxDailyCostUsd: 10, maxMonthlyCostUsdPerUser: 20, maxCostUsd: 1 };
    const raised = resolveSettings({
      page,
      file: { maxDailyCostUsd: 1000, maxMonthlyCostUsdPerUser: 20, maxCostUsd: 2 },
    });
    expect(raised.values).toMatchObject({
      maxDailyCostUsd: 10,
      maxMonthlyCostUsdPerUser: 20,
      maxCostUsd: 2,
    });
    expect(raised.sources).toMatchObject({
      maxDailyCostUsd: "page",
      maxMonthlyCostUsdPerUser: "page",
      maxCostUsd: "file",
    });
    const lowered = resolveSettings({
      page,
      file: { maxDailyCostUsd: 3, maxMonthlyCostUsdPerUser: 5 },
    });
    expect(lowered.values).toMatchObject({ maxDailyCostUsd: 3, maxMonthlyCostUsdPerUser: 5 });
    expect(lowered.sources).toMatchObject({
      maxDailyCostUsd: "file",
      maxMonthlyCostUsdPerUser: "file",
    });
    // Without a limit on the page, the file sets any.
    const unset = resolveSettings({
      file: { maxDailyCostUsd: 1000, maxMonthlyCostUsdPerUser: 1000 },
    });
    expect(unset.values).toMatchObject({ maxDailyCostUsd: 1000, maxMonthlyCostUsdPerUser: 1000 });
  });

  it("reads memory: false as lessons off, and a mapping as on with its path", () => {
    const parse = (yml: string) => {
      const parsed = parseRepoConfig(yml);
      if (!parsed.ok) throw new Error(parsed.message);
      return resolveSettings({ file: parsed.config });
    };
    expect(parse("memory: false\n").values.memory).toEqual({
      enabled: false,
      path: ".github/vmpilot/memory.md",
    });
    expect(parse("memory: { path: docs/lessons.md }\n").values.memory).toEqual({
      enabled: true,
      path: "docs/lessons.md",
    });
    // The page turned them off; the file's mapping alone does not turn them back on.
    const resolved = resolveSettings({
      page: { memory: { enabled: false } },
      file: { memory: { path: "docs/lessons.md" } },
    });
    expect(resolved.values.memory).toEqual({ enabled: false, path: "docs/lessons.md" });
    expect(resolved.sources["memory.path"]).toBe("file");
    expect(parse("review: { beforePullRequest: false }\n").values.review).toEqual({
      beforePullRequest: false,
    });
    for (const path of ["../secrets.md", "/etc/passwd", ".git/config", "a//b.md"]) {
      expect(parseRepoConfig(`memory: { path: "${path}" }\n`)).toMatchObject({
        ok: false,
        issues: [
          {
            path: "memory.path",
            message: "must be a path in the repository, like .github/vmpilot/memory.md",
          },
        ],
      });
    }
  });

  it("lets a file switch a page setting back off", () => {
    const resolved = resolveSettings({ page: { enabled: false }, file: { enabled: true } });
    expect(resolved.values.enabled).toBe(true);
    expect(resolved.sources.enabled).toBe("file");
  });
});

describe("schema/vmpilot.schema.json", () => {
  it("matches the zod schema (UPDATE_SCHEMA=1 rewrites it)", () => {
    const generated = repoConfigJsonSchema();
    if (process.env.UPDATE_SCHEMA === "1") {
      writeFileSync(SCHEMA_FILE, JSON.stringify(generated));
      execFileSync("node_modules/.bin/biome", ["format", "--write", SCHEMA_FILE.pathname]);
    }
    expect(JSON.parse(readFileSync(SCHEMA_FILE, "utf8"))).toEqual(generated);
    expect(generated).toMatchObject({ type: "object", additionalProperties: false });
  });
});
