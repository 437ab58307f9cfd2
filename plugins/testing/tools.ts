import type {
  FinishCheck,
  ToolInput,
  WorkspaceCapabilities,
  WorkspaceTool,
} from "../../src/agent/plugin-api.ts";

/** What `report_tests` records under the `tests` key of the run's reports. */
export interface TestsReport {
  outcome: "passed" | "failed" | "not_run";
  command?: string;
  exitCode?: number | null;
  explanation?: string;
}

const TEST_TIMEOUT_MS = 15 * 60_000;
const OUTPUT_TAIL = 3_000;

function text(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
}

async function reportTests(input: ToolInput, can: WorkspaceCapabilities) {
  const outcome = input.outcome;
  const command = text(input.command);
  const explanation = text(input.explanation);
  if (outcome === "passed") {
    if (!command)
      return { content: "outcome passed needs the `command` that runs the tests.", isError: true };
    const run = await can.exec(command, { timeoutMs: TEST_TIMEOUT_MS });
    if (run.exitCode === 0 && !run.timedOut) {
      can.report("tests", { outcome: "passed", command, exitCode: 0 } satisfies TestsReport);
      return `Recorded: the tests pass (\`${command}\` exited 0).`;
    }
    const status = run.timedOut ? "timed out" : `exited ${run.exitCode}`;
    can.report("tests", {
      outcome: "failed",
      command,
      exitCode: run.exitCode,
    } satisfies TestsReport);
    const output = `${run.stdout}\n${run.stderr}`.trim().slice(-OUTPUT_TAIL);
    return {
      content: `The tests do not pass: \`${command}\` ${status}. Fix them and report again, or report outcome "failed" with an explanation.\nEnd of output:\n${output}`,
      isError: true,
    };
  }
  if (outcome === "failed" || outcome === "not_run") {
    if (!explanation)
      return { content: `outcome ${outcome} needs an \`explanation\`.`, isError: true };
    can.report("tests", { outcome, command, explanation } satisfies TestsReport);
    return `Recorded: tests ${outcome === "failed" ? "fail" : "not run"}, with your explanation.`;
  }
  return { content: 'outcome must be "passed", "failed" or "not_run".', isError: true };
}

export const tools: WorkspaceTool[] = [
  {
    name: "report_tests",
    description:
      'Report the state of the project\'s tests before finishing. "passed" re-runs `command` in the workspace and records success only if it exits 0. "failed" and "not_run" need an explanation of why the tests cannot pass or cannot run.',
    input_schema: {
      type: "object",
      properties: {
        outcome: { type: "string", enum: ["passed", "failed", "not_run"] },
        command: {
          type: "string",
          description: "The command that runs the tests, e.g. `npm test`.",
        },
        explanation: {
          type: "string",
          description: "Why the tests fail or cannot run. Required unless passed.",
        },
      },
      required: ["outcome"],
    },
    runsIn: "workspace",
    handler: reportTests,
  },
];

/**
 * A run that changed files is done only when the tests passed, or the model explained why they fail
 * or cannot run. One that changed nothing (a question answered) owes no report.
 */
export const finishCheck: FinishCheck = (reports, run) => {
  const tests = reports.get("tests") as TestsReport | undefined;
  if (!tests) {
    if (!run.changed) return undefined;
    return 'Before you finish: run the project\'s tests and call report_tests with the result. If there are no tests or they cannot run here, call report_tests with outcome "not_run" and explain why.';
  }
  if (tests.outcome === "failed" && !tests.explanation) {
    return `The tests still fail (\`${tests.command}\` exited ${tests.exitCode}). Fix them and call report_tests again, or call report_tests with outcome "failed" and explain why they cannot pass.`;
  }
  return undefined;
};
