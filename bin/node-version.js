// Checked before anything of the app loads, by `npm start` and the CLI (typescript.js): on an older
// Node the app would get far before failing with an unrelated error (the embedded database process
// needs Node's type stripping). Plain JavaScript, so that any Node can run it.
import { readFileSync } from "node:fs";

/** The one line to print when `current` is older than package.json's engines range, else undefined. */
export function nodeVersionProblem(current, engines) {
  const wanted = /^>=\s*(\d+)\.(\d+)/.exec(engines);
  if (!wanted) return undefined;
  const [major = 0, minor = 0] = current.replace(/^v/, "").split(".").map(Number);
  const [needMajor, needMinor] = [Number(wanted[1]), Number(wanted[2])];
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return undefined;
  return `vmpilot: needs Node.js ${needMajor}.${needMinor} or newer (24 LTS recommended); this is Node.js ${current}`;
}

/** Ends the process with that line when this Node is too old. */
export function requireSupportedNode() {
  const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  const problem = nodeVersionProblem(process.versions.node, String(manifest.engines?.node ?? ""));
  if (!problem) return;
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
