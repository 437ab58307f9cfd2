// A line diff for showing edits in the job log. Edits are small (one str_replace), so a plain
// LCS table is fine; past a size bound it degrades to "all removed, all added".

export type DiffLine = { kind: " " | "-" | "+"; text: string } | { kind: "…"; skipped: number };

const MAX_CELLS = 1_000_000;
const CONTEXT = 3;

export function lineDiff(before: string, after: string): DiffLine[] {
  const a = splitLines(before);
  const b = splitLines(after);
  let lo = 0;
  while (lo < a.length && lo < b.length && a[lo] === b[lo]) lo++;
  let hiA = a.length;
  let hiB = b.length;
  while (hiA > lo && hiB > lo && a[hiA - 1] === b[hiB - 1]) {
    hiA--;
    hiB--;
  }
  const middle = diffMiddle(a.slice(lo, hiA), b.slice(lo, hiB));
  const lines: DiffLine[] = [
    ...a.slice(0, lo).map((text) => ({ kind: " " as const, text })),
    ...middle,
    ...a.slice(hiA).map((text) => ({ kind: " " as const, text })),
  ];
  return collapseContext(lines);
}

function diffMiddle(a: string[], b: string[]): DiffLine[] {
  const removed = a.map((text) => ({ kind: "-" as const, text }));
  const added = b.map((text) => ({ kind: "+" as const, text }));
  if (a.length === 0 || b.length === 0 || a.length * b.length > MAX_CELLS) {
    return [...removed, ...added];
  }
  // lcs[i][j] = length of the longest common subsequence of a[i..] and b[j..].
  const width = b.length + 1;
  const lcs = new Uint32Array((a.length + 1) * width);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i * width + j] =
        a[i] === b[j]
          ? (lcs[(i + 1) * width + j + 1] ?? 0) + 1
          : Math.max(lcs[(i + 1) * width + j] ?? 0, lcs[i * width + j + 1] ?? 0);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ kind: " ", text: a[i] ?? "" });
      i++;
      j++;
    } else if ((lcs[(i + 1) * width + j] ?? 0) >= (lcs[i * width + j + 1] ?? 0)) {
      out.push({ kind: "-", text: a[i++] ?? "" });
    } else {
      out.push({ kind: "+", text: b[j++] ?? "" });
    }
  }
  while (i < a.length) out.push({ kind: "-", text: a[i++] ?? "" });
  while (j < b.length) out.push({ kind: "+", text: b[j++] ?? "" });
  return out;
}

/** Keeps CONTEXT unchanged lines around each change and folds longer unchanged runs. */
function collapseContext(lines: DiffLine[]): DiffLine[] {
  const changed = lines.map((l) => l.kind === "-" || l.kind === "+");
  const keep = lines.map((_, i) => {
    for (let d = -CONTEXT; d <= CONTEXT; d++) if (changed[i + d]) return true;
    return false;
  });
  const out: DiffLine[] = [];
  let skipped = 0;
  lines.forEach((line, i) => {
    if (keep[i]) {
      if (skipped) out.push({ kind: "…", skipped });
      skipped = 0;
      out.push(line);
    } else {
      skipped++;
    }
  });
  if (skipped) out.push({ kind: "…", skipped });
  return out;
}

function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}
