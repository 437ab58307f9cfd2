// The whole diff of a run's work against the commit it began from, for the model's second look
// before the pull request (jobs/run/second-look.ts). The work leaves the workspace as the bundle
// saveRunWork makes (turn-bundle.ts), data only; the worker's own git takes it into the mirror and
// diffs there, so the review reads what a push would carry, whatever the checkout's `.git` says
// (a textconv filter or an external diff the agent set up there runs nowhere).
import { mkdtemp, open, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gitClient } from "./git.ts";

const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

export interface RunDiff {
  /** `diff --git …` as git prints it, cut at the cap. */
  text: string;
  /** The whole diff's size in bytes. */
  bytes: number;
  /** The diff was longer than the cap: `text` is its beginning. */
  cut: boolean;
}

/** The first `bytes` of a file and its size. */
async function readHead(file: string, bytes: number): Promise<{ head: Buffer; size: number }> {
  const handle = await open(file, "r");
  try {
    const { size } = await handle.stat();
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(Math.min(bytes, size)), 0);
    return { head: buffer.subarray(0, bytesRead), size };
  } finally {
    await handle.close();
  }
}

/**
 * The unified diff from `baseSha` to the work in `bundle` (saveRunWork's: one commit on the base),
 * read in the mirror the base came from. Objects the bundle brings stay in the mirror unreferenced,
 * as a publish's do until its push, and go with its next repack that drops them.
 */
export async function diffRunWork(input: {
  mirror: string;
  bundle: Buffer;
  baseSha: string;
  maxBytes: number;
}): Promise<RunDiff> {
  if (!SHA.test(input.baseSha)) throw new Error(`bad base sha ${input.baseSha}`);
  const dir = await mkdtemp(join(tmpdir(), "vmpilot-diff-"));
  try {
    const file = join(dir, "work.bundle");
    await writeFile(file, input.bundle);
    const mirror = gitClient(input.mirror);
    // "<sha> <ref>" per ref the bundle holds: the one commit of the run's work.
    const listed = await mirror.raw(["bundle", "unbundle", file]);
    const work = listed.trim().split(/\s+/)[0] ?? "";
    if (!SHA.test(work)) throw new Error(`the run's bundle names no commit: ${work.slice(0, 80)}`);
    // Written to a file, and only its head read: a diff of a huge generated file costs disk, not
    // the worker's memory.
    const output = join(dir, "work.diff");
    await mirror.raw([
      "diff",
      "--no-color",
      "--no-ext-diff",
      "--no-textconv",
      "--find-renames",
      `--output=${output}`,
      input.baseSha,
      work,
    ]);
    const { head, size } = await readHead(output, input.maxBytes);
    // A cut inside a multi-byte character leaves a replacement character at the end, no more.
    return { text: head.toString("utf8"), bytes: size, cut: size > input.maxBytes };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
