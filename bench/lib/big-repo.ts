// The benchmarks' large repository: 50,000 small files in one commit, made with fast-import so
// that no working tree is written to make it.
import { execFileSync, spawnSync } from "node:child_process";

export const FILES = 50_000;
const PER_DIR = 100;

/** Makes the bare repository at `path`, branch main. */
export function generateRepo(path: string): void {
  execFileSync("git", ["init", "-q", "--bare", "-b", "main", path]);
  const lines: string[] = [];
  for (let i = 0; i < FILES; i++) {
    const body = `export const value${i} = ${i};\n`;
    lines.push("blob", `mark :${i + 1}`, `data ${Buffer.byteLength(body)}`, body);
  }
  const message = "generated\n";
  lines.push(
    "commit refs/heads/main",
    "committer Bench <bench@example.com> 1700000000 +0000",
    `data ${message.length}`,
    message,
  );
  for (let i = 0; i < FILES; i++) {
    const dir = String(Math.floor(i / PER_DIR)).padStart(3, "0");
    lines.push(`M 100644 :${i + 1} src/d${dir}/file${i}.ts`);
  }
  const input = `${lines.join("\n")}\n`;
  const result = spawnSync("git", ["fast-import", "--quiet"], { cwd: path, input });
  if (result.status !== 0) throw new Error(`fast-import failed: ${result.stderr}`);
  execFileSync("git", ["repack", "-adq"], { cwd: path });
}
