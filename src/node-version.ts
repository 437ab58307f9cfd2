// Imported first by `npm start` and the CLI: on an older Node the app would get far before failing
// with an unrelated error (the embedded database process needs Node's type stripping).
import { readFileSync } from "node:fs";

/** The one line to print when `current` is older than package.json's engines range, else undefined. */
export function nodeVersionProblem(current: string, engines: string): string | undefined {
  const wanted = /^>=\s*(\d+)\.(\d+)/.exec(engines);
  if (!wanted) return undefined;
  const [major = 0, minor = 0] = current.replace(/^v/, "").split(".").map(Number);
  const [needMajor, needMinor] = [Number(wanted[1]), Number(wanted[2])];
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return undefined;
  return `vmpilot: needs Node.js ${needMajor}.${needMinor} or newer (24 LTS recommended); this is Node.js ${current}`;
}

const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
const problem = nodeVersionProblem(process.versions.node, String(manifest.engines?.node ?? ""));
if (problem) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
