import { describe, expect, it } from "vitest";
import { defaults } from "../../src/config/repo-config.ts";
import {
  configFromValues,
  overridesOf,
  valuesFromForm,
  valuesFromSettings,
} from "../../src/web/settings-form.ts";

describe("settings form", () => {
  it("shows the defaults and reads them back unchanged, storing nothing", () => {
    const values = valuesFromSettings(defaults);
    const result = configFromValues(values);
    expect(result.ok).toBe(true);
    if (result.ok) expect(overridesOf(result.config, defaults)).toEqual({});
  });

  it("reads lists split by lines or commas, and empty fields as the default", () => {
    const form = new URLSearchParams({
      label: "  ",
      allowedUsers: "alice,bob\r\n carol ",
      setup: "npm ci --foo=a,b\n\nmake test",
      maxSteps: "",
      maxCostUsd: "3",
      enabled: "on",
    });
    form.append("plugins", "code_review");
    const result = configFromValues(valuesFromForm(form));
    expect(result).toEqual({
      ok: true,
      config: {
        enabled: true,
        allowedUsers: ["alice", "bob", "carol"],
        setup: ["npm ci --foo=a,b", "make test"],
        maxCostUsd: 3,
        network: { allow: [] },
        plugins: ["code_review"],
        publicJobs: false,
        ci: { autofix: false },
        readyForReview: false,
        review: { beforePullRequest: false },
        memory: { enabled: false },
        showCost: false,
      },
    });
  });

  it("names the field of each problem, quoting the bad list entry", () => {
    const result = configFromValues(
      valuesFromForm(
        new URLSearchParams({ maxSteps: "many", "network.allow": "ok.com\nbad host" }),
      ),
    );
    expect(result).toEqual({
      ok: false,
      errors: {
        maxSteps: ["Must be a whole number."],
        "network.allow": [
          "“bad host”: must be a host name with an optional port, like registry.npmjs.org or *.example.com:443.",
        ],
      },
      general: [],
    });
  });
});
