// The checkout going into a VM: the worker streams a git bundle of the job's branch (made from the
// checkout it just cloned from its mirror), and the agent turns it into a working tree at its root.
// The bundle is written to the agent's disk as it arrives, so a big repository never sits in
// memory; an empty body makes an empty repository (a chat-face conversation on a scratch
// workspace).
import { createWriteStream } from "node:fs";
import { mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { runProcess } from "../process/run.ts";
import type { Owner } from "../sandbox/owner.ts";
import { MAX_SEED_BYTES } from "./protocol.ts";

export class SeedRefused extends Error {
  override name = "SeedRefused";
}

function capped(limit: number): Transform {
  let size = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      size += chunk.length;
      done(size > limit ? new SeedRefused("body too large") : null, chunk);
    },
  });
}

async function git({ root, env, user }: SeedOptions, args: string[]): Promise<void> {
  // `-C`: git enters the checkout as the command user, who may when the launcher may not.
  const result = await runProcess(
    { file: "git", args: ["-C", root, ...args], cwd: "/", env, user },
    { timeoutMs: 30 * 60_000 },
  );
  if (result.exitCode !== 0) {
    throw new Error(`git ${args[0]} failed: ${result.fullStderr.trim().slice(-500)}`);
  }
}

export interface SeedOptions {
  root: string;
  env: Record<string, string>;
  branch: string;
  /** The repository's URL without credentials, as the checkout's `origin`. */
  origin: string;
  /** Where the bundle's history stops, for a shallow checkout; empty for the whole history. */
  shallow: readonly string[];
  /** Who git runs as: the command user, who owns the checkout. */
  user?: Owner;
}

/** Reads the bundle from `req` and checks `branch` out of it at `root`, which must be empty. */
export async function seedCheckout(req: IncomingMessage, options: SeedOptions): Promise<void> {
  if (Number(req.headers["content-length"] ?? 0) > MAX_SEED_BYTES) {
    throw new SeedRefused("body too large");
  }
  if ((await readdir(options.root)).length > 0) throw new SeedRefused("the checkout exists");
  const dir = await mkdtemp(join(tmpdir(), "vmpilot-seed-"));
  const bundle = join(dir, "seed.bundle");
  try {
    await pipeline(req, capped(MAX_SEED_BYTES), createWriteStream(bundle, { mode: 0o600 }));
    const { root, branch } = options;
    await git(options, ["init", "-q", "-b", branch]);
    if (options.origin) await git(options, ["remote", "add", "origin", options.origin]);
    // Before the fetch: git checks that the history is complete up to these commits.
    if (options.shallow.length > 0) {
      await writeFile(join(root, ".git", "shallow"), `${options.shallow.join("\n")}\n`);
    }
    if ((await stat(bundle)).size === 0) return;
    const ref = `refs/heads/${branch}`;
    await git(options, ["fetch", "-q", "--no-tags", "--update-head-ok", bundle, `+${ref}:${ref}`]);
    await git(options, ["reset", "-q", "--hard", ref]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
