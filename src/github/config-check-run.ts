// The "vmpilot config" check run's request body: the errors of `.github/vmpilot.yml` and of the
// skills' front matter as annotations at their lines, or the settings the file sets.
import {
  type ConfigIssue,
  getSetting,
  type RepoConfig,
  settingKeys,
} from "../config/repo-config.ts";
import { codeSpan } from "./markdown.ts";
import { issueMarkdown, REPO_CONFIG_PATH } from "./repo-config-loader.ts";

const CONFIG_CHECK_NAME = "vmpilot config";
/** GitHub takes at most this many annotations per request. */
const MAX_ANNOTATIONS = 50;
/** A long value (setup commands) is cut in the summary; the file shows it whole. */
const VALUE_CHARS = 200;

interface Annotation {
  path: string;
  start_line: number;
  end_line: number;
  annotation_level: "failure";
  message: string;
}

interface CheckRunBody {
  name: string;
  head_sha: string;
  status: "completed";
  conclusion: "success" | "failure";
  output: { title: string; summary: string; annotations?: Annotation[] };
}

const fileOf = (issue: ConfigIssue) => issue.file ?? REPO_CONFIG_PATH;

/** A failing check run with one annotation per issue, at the issue's line (else the first). */
export function configFailureRun(headSha: string, issues: readonly ConfigIssue[]): CheckRunBody {
  const shown = issues
    .toSorted((a, b) => fileOf(a).localeCompare(fileOf(b)) || (a.line ?? 1) - (b.line ?? 1))
    .slice(0, MAX_ANNOTATIONS);
  const left = issues.length - shown.length;
  const count = `${issues.length} ${issues.length === 1 ? "error" : "errors"}`;
  const files = [...new Set(issues.map(fileOf))];
  const where = (issue: ConfigIssue) => (issue.file ? `${codeSpan(issue.file)} ` : "");
  const summary = [
    ...(files.includes(REPO_CONFIG_PATH)
      ? [`vmpilot refuses to start a job with this \`${REPO_CONFIG_PATH}\` until it is fixed:`]
      : []),
    ...(files.some((file) => file !== REPO_CONFIG_PATH)
      ? ["vmpilot leaves a skill out of its jobs until its front matter is fixed:"]
      : []),
    "",
    ...shown.map((issue) => `- ${where(issue)}line ${issue.line ?? 1}: ${issueMarkdown(issue)}`),
    ...(left > 0 ? ["", `${left} more not shown: GitHub takes ${MAX_ANNOTATIONS} at most.`] : []),
  ].join("\n");
  return {
    name: CONFIG_CHECK_NAME,
    head_sha: headSha,
    status: "completed",
    conclusion: "failure",
    output: {
      title: `${count} in ${files.join(", ")}`,
      summary,
      annotations: shown.map((issue) => ({
        path: fileOf(issue),
        start_line: issue.line ?? 1,
        end_line: issue.line ?? 1,
        annotation_level: "failure",
        message: issue.path ? `${issue.path}: ${issue.message}` : issue.message,
      })),
    },
  };
}

/**
 * A passing check run listing what the file itself sets. Check runs are public, on a fork's pull
 * request too: the settings page and the operator's defaults (allowed users, the network
 * allow-list, budgets) are not the file's to show. Without the file (`present` false: the head
 * removes it), a job reads the owner's `.github` repository's.
 */
export function configSuccessRun(
  headSha: string,
  config: RepoConfig,
  present: boolean,
  /** Skills checked besides, whose front matter is valid. */
  skills: readonly string[] = [],
): CheckRunBody {
  const set = settingKeys.flatMap((key) => {
    const value = getSetting(config, key);
    return value === undefined ? [] : [`- \`${key}\`: ${shown(value)}`];
  });
  const automations = config.automations ?? [];
  if (automations.length > 0)
    set.push(`- \`automations\`: ${shown(automations.map((a) => a.name))}`);
  const summary = present
    ? [
        `\`${REPO_CONFIG_PATH}\` is valid.${set.length > 0 ? " It sets:" : " It sets nothing."}`,
        ...(set.length > 0 ? ["", ...set] : []),
        "",
        "What it does not set comes from the repository's settings page and vmpilot's defaults.",
      ]
    : [
        `There is no \`${REPO_CONFIG_PATH}\` at this commit: a job would read the owner's \`.github\` repository's file, if there is one.`,
      ];
  if (skills.length > 0) {
    summary.push("", `These skills' front matter is valid: ${skills.map(codeSpan).join(", ")}.`);
  }
  return {
    name: CONFIG_CHECK_NAME,
    head_sha: headSha,
    status: "completed",
    conclusion: "success",
    output: {
      title: present ? `${REPO_CONFIG_PATH} is valid` : `No ${REPO_CONFIG_PATH}`,
      summary: summary.join("\n"),
    },
  };
}

function shown(value: unknown): string {
  let text = JSON.stringify(value);
  if (text.length > VALUE_CHARS) text = `${text.slice(0, VALUE_CHARS)}…`;
  return codeSpan(text);
}
