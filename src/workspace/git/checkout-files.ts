// A checkout of a mirror, written by the worker itself rather than by `git clone --shared`: the
// clone runs upload-pack through a shell and a connectivity check, four processes to copy refs the
// worker has already read. What `clone --shared --branch` leaves that git and the agent use is
// small and plain: HEAD, a config with `origin`, the alternates file that borrows the mirror's
// objects, and the refs, all packed. One `git read-tree` then writes the index and the files.
// Only for a new directory, or a spare no command has run in: nothing else writes them.
import { mkdir, readdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { gitClient } from "./git.ts";

/** A ref and the object it points at; `peeled` is the commit an annotated tag points at. */
export interface Ref {
  name: string;
  sha: string;
  peeled?: string;
}

export interface CheckoutRefs {
  /** The local branch HEAD names. */
  head: string;
  /** Local branches: `refs/heads/<name>`. */
  branches: ReadonlyMap<string, string>;
  /** The mirror's branches, as `refs/remotes/origin/<name>`. */
  remote: ReadonlyMap<string, string>;
  /** The branch the remote's HEAD names, for `refs/remotes/origin/HEAD`. */
  remoteHead: string;
  /** The mirror's tags, full names. */
  tags: readonly Ref[];
}

/** Writes `text` through a file of its own, so a reader never sees half of it. */
async function replace(path: string, text: string): Promise<void> {
  await writeFile(`${path}.vmpilot-new`, text);
  await rename(`${path}.vmpilot-new`, path);
}

/** A config value, quoted: a local path may hold what git would read otherwise. */
const quoted = (value: string) =>
  `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`;

function packedRefs(refs: CheckoutRefs): string {
  const all: Ref[] = [
    ...[...refs.branches].map(([name, sha]) => ({ name: `refs/heads/${name}`, sha })),
    ...[...refs.remote].map(([name, sha]) => ({ name: `refs/remotes/origin/${name}`, sha })),
    ...refs.tags,
  ];
  // No traits: not every tag's peeled commit is known (mirror.ts), so git peels what it needs.
  const lines: string[] = [];
  for (const ref of all) {
    lines.push(`${ref.sha} ${ref.name}`);
    if (ref.peeled) lines.push(`^${ref.peeled}`);
  }
  return `${lines.join("\n")}\n`;
}

/** Points HEAD and every ref where `refs` says, replacing what was there. */
export async function writeRefs(root: string, refs: CheckoutRefs): Promise<void> {
  const git = join(root, ".git");
  await replace(join(git, "packed-refs"), packedRefs(refs));
  const originHead = join(git, "refs", "remotes", "origin", "HEAD");
  if (refs.remote.has(refs.remoteHead)) {
    await replace(originHead, `ref: refs/remotes/origin/${refs.remoteHead}\n`);
  }
  await replace(join(git, "HEAD"), `ref: refs/heads/${refs.head}\n`);
}

/** The local branches of a checkout written here, and the commit HEAD names. */
export async function readBranches(
  root: string,
): Promise<{ branches: Map<string, string>; head: string | undefined }> {
  const git = join(root, ".git");
  const [packed, head] = await Promise.all([
    readFile(join(git, "packed-refs"), "utf8"),
    readFile(join(git, "HEAD"), "utf8"),
  ]);
  const branches = new Map<string, string>();
  for (const line of packed.split("\n")) {
    const match = /^([0-9a-f]{40,64}) refs\/heads\/(.+)$/.exec(line);
    if (match) branches.set(match[2] as string, match[1] as string);
  }
  const name = /^ref: refs\/heads\/(.+)\n$/.exec(head)?.[1];
  return { branches, head: name === undefined ? undefined : branches.get(name) };
}

/**
 * Makes `dest` (new, or an empty directory) a checkout of `mirror` at HEAD's commit, with `origin` at
 * `url`. `splitIndex`: for a spare, whose claimer then writes a few KB of index, not all of it.
 */
export async function writeCheckout(
  dest: string,
  source: { mirror: string; url: string },
  refs: CheckoutRefs,
  options: { splitIndex?: boolean } = {},
): Promise<void> {
  const git = join(dest, ".git");
  // As `git clone`: the directory may exist, empty.
  await mkdir(dirname(dest), { recursive: true });
  await mkdir(dest).catch(async (error: NodeJS.ErrnoException) => {
    if (error.code !== "EEXIST" || (await readdir(dest)).length > 0) throw error;
  });
  for (const dir of [
    "hooks",
    "objects/info",
    "objects/pack",
    "refs/heads",
    "refs/tags",
    "refs/remotes/origin",
  ]) {
    await mkdir(join(git, dir), { recursive: true });
  }
  await writeFile(
    join(git, "objects", "info", "alternates"),
    `${join(source.mirror, "objects")}\n`,
  );
  const tracked = refs.remote.has(refs.remoteHead) ? refs.remoteHead : undefined;
  const config = [
    "[core]",
    "\trepositoryformatversion = 0",
    "\tfilemode = true",
    "\tbare = false",
    "\tlogallrefupdates = true",
    '[remote "origin"]',
    `\turl = ${quoted(source.url)}`,
    "\tfetch = +refs/heads/*:refs/remotes/origin/*",
    // The branch a clone checks out follows its remote one.
    ...(tracked
      ? [
          `[branch ${quoted(tracked)}]`,
          "\tremote = origin",
          `\tmerge = ${quoted(`refs/heads/${tracked}`)}`,
        ]
      : []),
  ];
  await writeFile(join(git, "config"), `${config.join("\n")}\n`);
  await writeRefs(dest, refs);
  const sha = refs.branches.get(refs.head);
  if (sha === undefined) throw new Error(`no commit for the branch ${refs.head}`);
  const split = options.splitIndex ? ["-c", "core.splitIndex=true"] : [];
  await gitClient(dest).raw([...split, "read-tree", "--reset", "-u", sha]);
}
