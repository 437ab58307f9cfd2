import { MODELS } from "../config/models.ts";
import { OPENAI_MODELS } from "../config/openai-models.ts";
import {
  describeSetting,
  getSetting,
  type RepoConfig,
  type SettingKey,
  type SettingSource,
  settingKeys,
} from "../config/repo-config.ts";
import type { FileLesson } from "../github/memory-file.ts";
import { REPO_CONFIG_PATH as CONFIG_PATH } from "../github/repo-config-loader.ts";
import { type Html, html } from "./html.ts";
import { csrfField } from "./layout.ts";
import type { Session } from "./session.ts";
import { FIELD_KINDS, type FormValues } from "./settings-form.ts";

export interface SettingsView {
  session: Session;
  repo: string;
  values: FormValues;
  sources: Record<SettingKey, SettingSource>;
  /** The repo file's settings, when it exists and is valid. */
  file: RepoConfig | null;
  /** Why the repo file was ignored, when it is invalid. */
  fileError: string | null;
  errors: Partial<Record<SettingKey, string[]>>;
  general: string[];
  saved: boolean;
  plugins: string[];
  /** The model providers the operator configured, by the prefix model ids use. */
  providers: string[];
  /** The lessons from review on the default branch, and their file; null when they are off. */
  lessons: { path: string; list: FileLesson[] } | null;
}

const LABELS: Record<SettingKey, string> = {
  enabled: "Enabled",
  label: "Trigger label",
  triggerPolicy: "Who may trigger",
  allowedUsers: "Allowed users",
  model: "Model",
  maxSteps: "Max steps per job",
  maxCostUsd: "Max cost per job (USD)",
  timeoutMinutes: "Time limit per job (minutes)",
  maxDailyCostUsd: "Max cost per day (USD)",
  maxMonthlyCostUsdPerUser: "Max cost per person per month (USD)",
  setup: "Setup commands",
  "network.allow": "Network allow-list",
  isolation: "Isolation",
  plugins: "Plugins",
  publicJobs: "Public job pages",
  "ci.autofix": "Fix failing CI on vmpilot's pull requests",
  "ci.maxFixAttempts": "Most CI fix attempts per pull request",
  "ci.graceMinutes": "Wait for CI to appear (minutes)",
  readyForReview: "Mark pull requests ready for review when checks pass",
  "review.beforePullRequest": "Take a second look at the diff before the pull request",
  "memory.enabled": "Learn lessons from review",
  "memory.path": "Lessons file",
  showCost: "Show each job's cost in its comment and pull request",
};

/** The options of each choice setting, with what the page says of them. */
const CHOICES: Partial<Record<SettingKey, Array<[string, string]>>> = {
  triggerPolicy: [
    ["write", "Anyone with write access, plus the allowed users"],
    ["allow-list", "Only the allowed users"],
  ],
  isolation: [
    ["sandbox", "The operator's choice (a sandbox on the worker, or a VM)"],
    ["vm", "A VM of its own for each job (Fly Machine or Kubernetes pod)"],
  ],
};

const SOURCE_TEXT: Record<SettingSource, string> = {
  default: "default",
  page: "set on this page",
  file: `from ${CONFIG_PATH}`,
};

const LINE_HINTS: Partial<Record<SettingKey, string>> = {
  allowedUsers: "One user name per line.",
  setup: "One command per line.",
  "network.allow": "One host per line.",
};

export function settingsForm(view: SettingsView): Html {
  const invalid = settingKeys.filter((k) => view.errors[k]?.length);
  const summary =
    invalid.length || view.general.length
      ? html`<div class="notice error" role="alert" id="error-summary">
  <h2>The settings were not saved</h2>
  <ul>${invalid.map((k) => html`<li><a href="#${fieldId(k)}">${LABELS[k]}: ${view.errors[k]?.join(" ")}</a></li>`)}
  ${view.general.map((g) => html`<li>${g}</li>`)}</ul>
</div>`
      : "";
  return html`<h1>Settings · ${view.repo}</h1>
${view.saved ? html`<p class="notice ok" role="status">Saved.</p>` : ""}
${summary}
${
  view.fileError
    ? html`<p class="notice error"><code>${CONFIG_PATH}</code> is invalid and is ignored until it is fixed: ${view.fileError}</p>`
    : ""
}
<p class="muted">Each setting comes from the first of: <code>${CONFIG_PATH}</code> in the repository,
this page, the default. Fields left empty use the default. The cost limits per day and per person
set here are ceilings: the file may lower them, never raise them.</p>
<form method="post" class="settings" novalidate>
${csrfField(view.session)}
${settingKeys.map((key) => field(view, key))}
<div><button type="submit" class="primary">Save settings</button></div>
</form>
<datalist id="models">${modelChoices(view.providers).map((m) => html`<option value="${m}"></option>`)}</datalist>
${lessonsSection(view.lessons)}`;
}

/** The lessons every job reads, as the file on the default branch has them. */
function lessonsSection(lessons: SettingsView["lessons"]): Html {
  const heading = html`<h2 id="lessons">Lessons from review</h2>`;
  if (!lessons) {
    return html`<section aria-labelledby="lessons">${heading}
<p class="muted">Off: vmpilot keeps no lessons for this repository.</p></section>`;
  }
  const items = lessons.list.map((lesson) => {
    const files = lesson.files.length
      ? html` · files: ${lesson.files.map((file, i) => html`${i ? ", " : ""}<code>${file}</code>`)}`
      : "";
    const from = /^https:\/\/\S+$/.test(lesson.citation)
      ? html`<a href="${lesson.citation}">learned from review</a>`
      : html`learned from ${lesson.citation}`;
    const stale = lesson.stale ? html`<strong>Stale:</strong> ` : "";
    return html`<li>${stale}${lesson.text} — ${from}${files}</li>`;
  });
  return html`<section aria-labelledby="lessons">${heading}
<p class="muted">Every job reads <code>${lessons.path}</code> from the default branch. Edit the file
to change them; vmpilot proposes new ones in a pull request from <code>vmpilot/memory</code>, and
merging it approves them.</p>
${items.length ? html`<ul class="lessons">${items}</ul>` : html`<p>No lessons yet.</p>`}
</section>`;
}

/** Anthropic's models, and OpenAI's when that provider is configured; others take any name. */
function modelChoices(providers: string[]): string[] {
  const openai = providers.includes("openai")
    ? Object.keys(OPENAI_MODELS).map((m) => `openai/${m}`)
    : [];
  return [...Object.keys(MODELS), ...openai];
}

function field(view: SettingsView, key: SettingKey): Html {
  const id = fieldId(key);
  const errors = view.errors[key] ?? [];
  const describedBy = [`${id}-hint`, errors.length ? `${id}-error` : ""].filter(Boolean).join(" ");
  const common = html`id="${id}" name="${key}" aria-describedby="${describedBy}" ${errors.length ? html`aria-invalid="true"` : ""}`;
  const value = view.values[key];
  const source = html`<span class="source source-${view.sources[key]}">${SOURCE_TEXT[view.sources[key]]}</span>`;
  const after = html`${errors.length ? html`<p class="error" id="${id}-error">${errors.join(" ")}</p>` : ""}
<p class="hint" id="${id}-hint">${describeSetting(key)} ${LINE_HINTS[key] ?? ""}
${key === "model" ? html`Configured providers: ${view.providers.join(", ")}.` : ""}
(<code>${key}</code> in the file)</p>
${fileNote(view, key)}`;
  switch (FIELD_KINDS[key]) {
    case "checkbox":
      return html`<div class="field"><div><label><input type="checkbox" ${common} ${value === true ? "checked" : ""}>
  ${LABELS[key]}</label> ${source}</div>${after}</div>`;
    case "choice": {
      const radios = (CHOICES[key] ?? []).map(
        ([option, text], i) =>
          html`<div><label><input type="radio" name="${key}" ${i === 0 ? html`id="${id}"` : ""} value="${option}" ${value === option ? "checked" : ""}>
    ${text}</label></div>`,
      );
      return html`<div class="field"><fieldset aria-describedby="${describedBy}"><legend>${LABELS[key]} ${source}</legend>
  ${radios}
</fieldset>${after}</div>`;
    }
    case "multi": {
      const names = [...new Set([...view.plugins, ...(value as string[])])].sort();
      const boxes = names.length
        ? names.map(
            (name) =>
              html`<div><label><input type="checkbox" name="${key}" value="${name}" ${(value as string[]).includes(name) ? "checked" : ""}> ${name}</label></div>`,
          )
        : html`<p class="muted" id="${id}">No plugins are installed.</p>`;
      return html`<div class="field"><fieldset aria-describedby="${describedBy}"><legend>${LABELS[key]} ${source}</legend>
  ${boxes}</fieldset>${after}</div>`;
    }
    case "lines":
      return html`<div class="field"><label for="${id}">${LABELS[key]} ${source}</label>
<textarea ${common} rows="3" spellcheck="false">${value as string}</textarea>${after}</div>`;
    case "number":
      return html`<div class="field"><label for="${id}">${LABELS[key]} ${source}</label>
<input type="number" step="any" inputmode="decimal" ${common} value="${value as string}">${after}</div>`;
    default:
      return html`<div class="field"><label for="${id}">${LABELS[key]} ${source}</label>
<input type="text" ${common} value="${value as string}" ${key === "model" ? html`list="models"` : ""} spellcheck="false">${after}</div>`;
  }
}

function fileNote(view: SettingsView, key: SettingKey): Html | string {
  const value = view.file ? getSetting(view.file, key) : undefined;
  if (value === undefined) return "";
  const shown = Array.isArray(value) ? value.join(", ") || "(empty list)" : String(value);
  if (view.sources[key] === "file") {
    return html`<p class="hint"><code>${CONFIG_PATH}</code> sets this to <strong>${shown}</strong>,
which takes precedence over this page.</p>`;
  }
  // Set in the file yet not from it: a ceiling of this page's, which the file tried to raise.
  return html`<p class="hint"><code>${CONFIG_PATH}</code> sets this to <strong>${shown}</strong>,
above this page's limit, which holds: the file may lower it, never raise it.</p>`;
}

function fieldId(key: SettingKey): string {
  return `f-${key.replace(".", "-")}`;
}
