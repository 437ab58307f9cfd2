import { describe, expect, it } from "vitest";
import { capStreams, capText, OutputCapture } from "../../src/workspace/process/output.ts";

describe("capText", () => {
  it("leaves short text alone", () => {
    expect(capText("hello", 10)).toEqual({ text: "hello", truncated: false });
  });

  it("keeps head and tail within the cap and says how much was cut", () => {
    const text = `HEAD${"x".repeat(100_000)}TAIL`;
    const { text: capped, truncated } = capText(text, 30_000);
    expect(truncated).toBe(true);
    expect(capped.length).toBeLessThanOrEqual(30_000);
    expect(capped.startsWith("HEAD")).toBe(true);
    expect(capped.endsWith("TAIL")).toBe(true);
    const cut = Number(/\[\.\.\. (\d+) characters cut \.\.\.\]/.exec(capped)?.[1]);
    const marker = capped.match(/\n\n\[\.\.\. \d+ characters cut \.\.\.\]\n\n/)?.[0] ?? "";
    expect(cut).toBe(text.length - (capped.length - marker.length));
  });
});

describe("capStreams", () => {
  it("keeps a short stderr whole when stdout is huge", () => {
    const out = capStreams("o".repeat(50_000), "error: boom", 30_000);
    expect(out.stderr).toBe("error: boom");
    expect(out.stdout.length + out.stderr.length).toBeLessThanOrEqual(30_000);
    expect(out.truncated).toBe(true);
  });

  it("splits the budget when both streams are huge", () => {
    const out = capStreams("o".repeat(50_000), "e".repeat(50_000), 30_000);
    expect(out.stdout.length).toBeLessThanOrEqual(15_000);
    expect(out.stderr.length).toBeLessThanOrEqual(15_000);
  });
});

describe("OutputCapture", () => {
  it("bounds memory, keeping head and tail", () => {
    const capture = new OutputCapture(1000);
    capture.write(Buffer.from("START"));
    for (let i = 0; i < 1000; i++) capture.write(Buffer.from("y".repeat(100)));
    capture.write(Buffer.from("END"));
    const text = capture.text();
    expect(text.startsWith("START")).toBe(true);
    expect(text.endsWith("END")).toBe(true);
    expect(text).toMatch(/\[\.\.\. \d+ characters cut \.\.\.\]/);
    expect(text.length).toBeLessThan(1100);
  });

  it("decodes multi-byte characters split across chunks", () => {
    const capture = new OutputCapture();
    const bytes = Buffer.from("héllo");
    capture.write(bytes.subarray(0, 2));
    capture.write(bytes.subarray(2));
    expect(capture.text()).toBe("héllo");
  });
});
