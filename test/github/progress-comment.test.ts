import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  formatDuration,
  quietMentions,
  renderFailure,
  renderFinal,
  renderProgress,
  ThrottledComment,
} from "../../src/github/progress-comment.ts";
import { clearRegisteredSecrets, registerSecret } from "../../src/log/redact.ts";

const job = { jobId: 7, jobUrl: "https://vmpilot.example.com/jobs/7" };
const token = `ghs_${"a1B2".repeat(9)}`;

describe("renderProgress", () => {
  it("checks off done steps, marks the current one and shows activity, time and cost", () => {
    const body = renderProgress(
      {
        ...job,
        current: "agent",
        activity: "bash: npm test -- --grep `login`\nand more",
        startedAt: 0,
        costUsd: 0.01234,
      },
      125_000,
    );
    expect(body).toContain("[job #7](https://vmpilot.example.com/jobs/7)");
    expect(body).toContain(
      "- ✔ Acknowledged\n- ✔ Workspace ready\n- ⏳ **Agent working**\n- ◻ Tests",
    );
    // The backticks stay as written, inside a longer fence.
    expect(body).toContain("Latest: ``bash: npm test -- --grep `login` and more``");
    expect(body).toContain("Elapsed 2m 05s · cost so far $0.0123");
    expect(body).toContain("<!-- vmpilot:job:7 -->");
  });

  it("shows an unknown model price as unknown, with the fallback estimate, never as a plain figure", () => {
    const body = renderProgress(
      { ...job, current: "agent", startedAt: 0, costUsd: 0.5, priceKnown: false },
      0,
    );
    expect(body).toContain(
      "cost so far unknown (the model's price is not known; estimated ~$0.5000)",
    );
  });

  it("shows only the steps a job has", () => {
    const body = renderProgress(
      {
        ...job,
        steps: ["acknowledged", "workspace", "agent"],
        current: "agent",
        startedAt: 0,
        costUsd: 0,
      },
      0,
    );
    expect(body).not.toContain("Pull request");
  });
});

describe("renderFinal", () => {
  const cost = {
    model: "claude-sonnet-4-5",
    steps: 14,
    inputTokens: 1200,
    outputTokens: 3400,
    cacheReadInputTokens: 50_000,
    cacheCreationInputTokens: 800,
    costUsd: 1.5,
  };

  it("shows the outcome, PR link, tests and one line of model, steps, tokens, cost and time", () => {
    const body = renderFinal({
      ...job,
      ok: true,
      headline: "Opened draft pull request #12",
      pullRequest: { number: 12, url: "https://github.com/o/r/pull/12" },
      summary: "Fixed the crash. cc @octocat and @org/team, mail me at a@b.c",
      tests: { outcome: "passed", command: "npm test" },
      cost,
      startedAt: 0,
      finishedAt: 3_725_000,
    });
    expect(body).toMatchInlineSnapshot(`
      "✅ **Opened draft pull request #12** — [job #7](https://vmpilot.example.com/jobs/7)

      Pull request: [#12](https://github.com/o/r/pull/12)

      Fixed the crash. cc @​octocat and @​org/team, mail me at a@b.c

      - Tests: ✔ passed (\`npm test\`)
      - Run: \`claude-sonnet-4-5\` · 14 steps · 52,000 tokens in (96% cached), 3,400 out · $1.50 · 1h 02m

      <!-- vmpilot:job:7 -->"
    `);
  });

  it("states failed tests and limit notes; with showCost off, no cost line", () => {
    const body = renderFinal({
      ...job,
      ok: false,
      headline: "Stopped at the cost limit",
      notes: ["Stopped at $5.0100, over the $5.00 limit."],
      tests: { outcome: "failed", command: "make test", explanation: "flaky network" },
      cost: null,
      startedAt: 0,
      finishedAt: 1000,
    });
    expect(body).toMatchInlineSnapshot(`
      "⚠️ **Stopped at the cost limit** — [job #7](https://vmpilot.example.com/jobs/7)

      > Stopped at $5.0100, over the $5.00 limit.

      - Tests: ✖ failed (\`make test\`): flaky network

      <!-- vmpilot:job:7 -->"
    `);
  });

  it("says when the cost is an estimate, and one turn is a turn", () => {
    const body = renderFinal({
      ...job,
      ok: true,
      headline: "Plan ready",
      cost: { ...cost, steps: 1, cacheReadInputTokens: 0, costUsd: 0.0123, priceKnown: false },
      startedAt: 0,
      finishedAt: 42_000,
    });
    expect(body.split("\n").find((line) => line.startsWith("- Run:"))).toMatchInlineSnapshot(
      `"- Run: \`claude-sonnet-4-5\` · 1 step · 2,000 tokens in (0% cached), 3,400 out · unknown (the model's price is not known; estimated ~$0.0123) · 42s"`,
    );
  });
});

describe("renderFailure", () => {
  afterEach(() => clearRegisteredSecrets());

  it("gives a short redacted reason and the retry command", () => {
    registerSecret("webhook-secret-value");
    const body = renderFailure({
      ...job,
      reason: `push failed: Authorization: Basic ${token} webhook-secret-value ${"x".repeat(1000)}`,
      command: "vmpilot",
      startedAt: 0,
      finishedAt: 9000,
      costUsd: 0.2,
    });
    expect(body).not.toContain(token);
    expect(body).not.toContain("webhook-secret-value");
    expect(body).toContain("[REDACTED]");
    expect(body).toContain("Comment `/vmpilot retry` to try again.");
    expect(body.length).toBeLessThan(700);
  });
});

describe("helpers", () => {
  it.each([
    [0, "0s"],
    [59_400, "59s"],
    [61_000, "1m 01s"],
    [7_260_000, "2h 01m"],
  ])("formatDuration(%i) = %s", (ms, text) => expect(formatDuration(ms)).toBe(text));

  it("quietMentions leaves code and e-mail alone", () => {
    expect(quietMentions("@a, (@b) `@c` x@d.e")).toBe("@\u200Ba, (@\u200Bb) `@c` x@d.e");
  });
});

describe("ThrottledComment", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
    clearRegisteredSecrets();
  });

  function recorder() {
    const edits: { at: number; body: string }[] = [];
    const edit = vi.fn(async (body: string) => {
      edits.push({ at: Date.now(), body });
    });
    return { edits, edit };
  }

  it("edits at most once per interval, with the latest body", async () => {
    const { edits, edit } = recorder();
    const start = Date.now();
    const comment = new ThrottledComment({ edit, intervalMs: 3000 });
    comment.update("one");
    await vi.advanceTimersByTimeAsync(0);
    comment.update("two");
    comment.update("three");
    await vi.advanceTimersByTimeAsync(2999);
    expect(edits.map((e) => e.body)).toEqual(["one"]);
    await vi.advanceTimersByTimeAsync(1);
    expect(edits.map((e) => e.body)).toEqual(["one", "three"]);
    expect(edits[1]?.at).toBe(start + 3000);
    // Nothing new: no edit.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(edits).toHaveLength(2);
  });

  it("always flushes the final body at once, and ignores updates after it", async () => {
    const { edits, edit } = recorder();
    const comment = new ThrottledComment({ edit, intervalMs: 3000 });
    comment.update("working");
    await vi.advanceTimersByTimeAsync(0);
    comment.update("still working");
    await comment.finish("done");
    comment.update("late");
    await vi.advanceTimersByTimeAsync(10_000);
    expect(edits.map((e) => e.body)).toEqual(["working", "done"]);
  });

  it("waits for an edit in flight before the final one, so the final one lands last", async () => {
    const order: string[] = [];
    let release: () => void = () => {};
    const edit = vi.fn(async (body: string) => {
      order.push(`start ${body}`);
      if (body === "slow") await new Promise<void>((resolve) => (release = resolve));
      order.push(`end ${body}`);
    });
    const comment = new ThrottledComment({ edit, intervalMs: 1000 });
    comment.update("slow");
    const finished = comment.finish("final");
    await vi.advanceTimersByTimeAsync(0);
    expect(order).toEqual(["start slow"]);
    release();
    await finished;
    expect(order).toEqual(["start slow", "end slow", "start final", "end final"]);
  });

  it("keeps going after a failed edit and reports it", async () => {
    const errors: unknown[] = [];
    let fail = true;
    const bodies: string[] = [];
    const comment = new ThrottledComment({
      edit: async (body) => {
        if (fail) {
          fail = false;
          throw new Error("502");
        }
        bodies.push(body);
      },
      intervalMs: 1000,
      onError: (error) => errors.push(error),
    });
    comment.update("a");
    await vi.advanceTimersByTimeAsync(0);
    comment.update("b");
    await vi.advanceTimersByTimeAsync(1000);
    expect(errors).toHaveLength(1);
    expect(bodies).toEqual(["b"]);
  });

  it("redacts every body", async () => {
    registerSecret("super-secret-key-123");
    const { edits, edit } = recorder();
    const comment = new ThrottledComment({ edit, intervalMs: 1000 });
    comment.update(`running with ${token}`);
    await vi.advanceTimersByTimeAsync(0);
    await comment.finish("done super-secret-key-123");
    expect(edits.map((e) => e.body)).toEqual(["running with [REDACTED]", "done [REDACTED]"]);
  });
});
