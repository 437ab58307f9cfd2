/** One line of /proc/self/mountinfo. */
export interface Mount {
  root: string;
  point: string;
  type: string;
  source: string;
  options: string[];
}

/** mountinfo escapes spaces and the like as octal. */
const decodeOctal = (text: string) =>
  text.replace(/\\([0-7]{3})/g, (_, octal: string) =>
    String.fromCharCode(Number.parseInt(octal, 8)),
  );

export function parseMountInfo(text: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of text.split("\n")) {
    const [left, right] = line.split(" - ");
    const fields = left?.split(" ") ?? [];
    const [type, source, options] = right?.split(" ") ?? [];
    if (fields.length < 5 || !type || source === undefined || options === undefined) continue;
    mounts.push({
      root: decodeOctal(fields[3] ?? ""),
      point: decodeOctal(fields[4] ?? ""),
      type,
      source: decodeOctal(source),
      options: options.split(","),
    });
  }
  return mounts;
}
