// Between the settings form's fields and the repo config: both directions, and the errors.
import {
  type ConfigIssue,
  checkRepoConfig,
  getSetting,
  type RepoConfig,
  type RepoSettings,
  type SettingKey,
  settingEntry,
  settingKeys,
} from "../config/repo-config.ts";

/** What the form shows: text as typed, booleans for checkboxes, names for plugin checkboxes. */
export type FormValues = Record<SettingKey, string | boolean | string[]>;

type Kind = "checkbox" | "text" | "number" | "lines" | "choice" | "multi";

export const FIELD_KINDS: Record<SettingKey, Kind> = {
  enabled: "checkbox",
  label: "text",
  triggerPolicy: "choice",
  allowedUsers: "lines",
  model: "text",
  maxSteps: "number",
  maxCostUsd: "number",
  timeoutMinutes: "number",
  maxDailyCostUsd: "number",
  maxMonthlyCostUsdPerUser: "number",
  setup: "lines",
  "network.allow": "lines",
  isolation: "choice",
  plugins: "multi",
  publicJobs: "checkbox",
  "ci.autofix": "checkbox",
  "ci.maxFixAttempts": "number",
  "ci.graceMinutes": "number",
  readyForReview: "checkbox",
  "review.beforePullRequest": "checkbox",
  "memory.enabled": "checkbox",
  "memory.path": "text",
  showCost: "checkbox",
};

// User and host lists may also be separated by commas; commands may contain them.
const SPLIT: Partial<Record<SettingKey, RegExp>> = {
  allowedUsers: /[\n,]/,
  "network.allow": /[\n,]/,
  setup: /\n/,
};

export function valuesFromSettings(settings: RepoSettings): FormValues {
  const out = {} as FormValues;
  for (const key of settingKeys) {
    const value = getSetting(settings, key);
    const kind = FIELD_KINDS[key];
    if (kind === "lines") out[key] = (value as string[]).join("\n");
    else if (kind === "multi") out[key] = [...(value as string[])];
    else if (kind === "checkbox") out[key] = value as boolean;
    // A limit the defaults leave unset shows as an empty field, which reads back as unset.
    else out[key] = value === null ? "" : String(value);
  }
  return out;
}

export function valuesFromForm(form: URLSearchParams): FormValues {
  const out = {} as FormValues;
  for (const key of settingKeys) {
    const kind = FIELD_KINDS[key];
    if (kind === "checkbox") out[key] = form.get(key) === "on";
    else if (kind === "multi") out[key] = form.getAll(key);
    else out[key] = form.get(key) ?? "";
  }
  return out;
}

export type FormResult =
  | { ok: true; config: RepoConfig }
  | { ok: false; errors: Partial<Record<SettingKey, string[]>>; general: string[] };

/** Validates the form with the repo file's schema. An emptied text field means "the default". */
export function configFromValues(values: FormValues): FormResult {
  const candidate: Record<string, unknown> = {};
  for (const key of settingKeys) {
    const value = values[key];
    let parsed: unknown;
    if (typeof value === "boolean" || Array.isArray(value)) parsed = value;
    else if (FIELD_KINDS[key] === "lines") {
      parsed = value
        .split(SPLIT[key] ?? /\n/)
        .map((s) => s.trim())
        .filter(Boolean);
    } else if (value.trim() === "") continue;
    else if (FIELD_KINDS[key] === "number") {
      parsed = /^-?\d+(\.\d+)?$/.test(value.trim()) ? Number(value.trim()) : value.trim();
    } else parsed = value.trim();
    mergeEntry(candidate, settingEntry(key, parsed));
  }
  const checked = checkRepoConfig(candidate);
  if (checked.ok) return { ok: true, config: checked.config };
  return { ok: false, ...groupIssues(checked.issues, candidate) };
}

function groupIssues(
  issues: ConfigIssue[],
  candidate: RepoConfig,
): {
  errors: Partial<Record<SettingKey, string[]>>;
  general: string[];
} {
  const errors: Partial<Record<SettingKey, string[]>> = {};
  const general: string[] = [];
  for (const issue of issues) {
    const key = settingKeys.find((k) => issue.path === k || issue.path.startsWith(`${k}[`));
    if (!key) {
      general.push(issue.path ? `${issue.path}: ${issue.message}` : issue.message);
      continue;
    }
    const item = /\[(\d+)\]$/.exec(issue.path);
    const entry = item ? (getSetting(candidate, key) as unknown[])[Number(item[1])] : null;
    const message = item
      ? `“${String(entry)}”: ${issue.message}.`
      : `${issue.message.charAt(0).toUpperCase()}${issue.message.slice(1)}.`;
    errors[key] = [...(errors[key] ?? []), message];
  }
  return { errors, general };
}

/** Only what differs from the defaults is stored, so untouched fields follow future defaults. */
export function overridesOf(config: RepoConfig, defaults: RepoSettings): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of settingKeys) {
    const value = getSetting(config, key);
    if (value === undefined) continue;
    if (JSON.stringify(value) === JSON.stringify(getSetting(defaults, key))) continue;
    mergeEntry(out, settingEntry(key, value));
  }
  return out;
}

/** Adds a setting's entry, next to its siblings when it is nested (`ci.autofix`, `ci.maxFixAttempts`). */
function mergeEntry(target: Record<string, unknown>, entry: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(entry)) {
    const known = target[key];
    target[key] =
      known && typeof known === "object" && !Array.isArray(known) && typeof value === "object"
        ? { ...known, ...value }
        : value;
  }
}
