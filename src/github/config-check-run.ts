// The "vmpilot config" check run's request body: the errors of `.github/vmpilot.yml` as
// annotations at their lines, or the settings a job would run with.
import {
  type ConfigIssue,
  getSetting,
  type ResolvedSettings,
  type SettingSource,
  settingKeys,
} from "../config/repo-config.ts";
import { codeSpan } from "./markdown.ts";
import { issueMarkdown, REPO_CONFIG_PATH } from "./repo-config-loader.ts";

const CONFIG_CHECK_NAME = "vmpilot config";
/** GitHub takes at most this many annotations per request. */
const MAX_ANNOTATIONS = 50;
/** A long value (setup commands) is cut in the summary; the file shows it whole. */
const VALUE_CHARS = 200;

const SOURCE_NAMES: Record<SettingSource, string> = {
  default: "default",
  page: "settings page",
  file: "file",
};

interface Annotation {
  path: string;
  start_line: number;
  end_line: number;
  annotation_level: "failure";
  message: string;
}

export interface CheckRunBody {
  name: string;
  head_sha: string;
  status: "completed";
  conclusion: "success" | "failure";
  output: { title: string; summary: string; annotations?: Annotation[] };
}

/** A failing check run with one annotation per issue, at the issue's line (else the first). */
export function configFailureRun(headSha: string, issues: readonly ConfigIssue[]): CheckRunBody {
  const shown = issues.toSorted((a, b) => (a.line ?? 1) - (b.line ?? 1)).slice(0, MAX_ANNOTATIONS);
  const left = issues.length - shown.length;
  const count = `${issues.length} ${issues.length === 1 ? "error" : "errors"}`;
  const summary = [
    `vmpilot refuses to start a job with this \`${REPO_CONFIG_PATH}\` until it is fixed:`,
    "",
    ...shown.map((issue) => `- line ${issue.line ?? 1}: ${issueMarkdown(issue)}`),
    ...(left > 0 ? ["", `${left} more not shown: GitHub takes ${MAX_ANNOTATIONS} at most.`] : []),
  ].join("\n");
  return {
    name: CONFIG_CHECK_NAME,
    head_sha: headSha,
    status: "completed",
    conclusion: "failure",
    output: {
      title: `${count} in ${REPO_CONFIG_PATH}`,
      summary,
      annotations: shown.map((issue) => ({
        path: REPO_CONFIG_PATH,
        start_line: issue.line ?? 1,
        end_line: issue.line ?? 1,
        annotation_level: "failure",
        message: issue.path ? `${issue.path}: ${issue.message}` : issue.message,
      })),
    },
  };
}

/**
 * A passing check run listing every setting a job would run with, and where it comes from. Without
 * the file (`present` false: the head removes it), a job reads the owner's `.github` repository's.
 */
export function configSuccessRun(
  headSha: string,
  resolved: ResolvedSettings,
  present: boolean,
): CheckRunBody {
  const intro = present
    ? `\`${REPO_CONFIG_PATH}\` is valid. A job would run with these settings:`
    : `There is no \`${REPO_CONFIG_PATH}\` at this commit: a job would read the owner's \`.github\` repository's file, if there is one, over these settings:`;
  const lines = settingKeys.map((key) => {
    let text = JSON.stringify(getSetting(resolved.values, key));
    if (text.length > VALUE_CHARS) text = `${text.slice(0, VALUE_CHARS)}…`;
    return `- \`${key}\`: ${codeSpan(text)} (${SOURCE_NAMES[resolved.sources[key]]})`;
  });
  return {
    name: CONFIG_CHECK_NAME,
    head_sha: headSha,
    status: "completed",
    conclusion: "success",
    output: {
      title: present ? `${REPO_CONFIG_PATH} is valid` : `No ${REPO_CONFIG_PATH}`,
      summary: [intro, "", ...lines].join("\n"),
    },
  };
}
