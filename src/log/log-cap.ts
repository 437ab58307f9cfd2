// No one log field may carry a payload whole: every string in a line (the message included) is
// cut to MAX_LOG_FIELD characters with a note of how much was dropped. Lines no longer than the
// cap cannot hold a longer field and pass untouched, so only the rare long line is parsed.

export const MAX_LOG_FIELD = 4096;

function capString(value: string): string {
  if (value.length <= MAX_LOG_FIELD) return value;
  return `${value.slice(0, MAX_LOG_FIELD)}…[${value.length - MAX_LOG_FIELD} chars cut]`;
}

function capValue(value: unknown): unknown {
  if (typeof value === "string") return capString(value);
  if (Array.isArray(value)) return value.map(capValue);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, field] of Object.entries(value)) out[key] = capValue(field);
    return out;
  }
  return value;
}

/** One serialized JSON log line (ending in a newline) with every string field capped. */
export function capLogLine(line: string): string {
  if (line.length <= MAX_LOG_FIELD) return line;
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    // Not JSON after all: cut the line itself rather than let it through whole.
    return `${capString(line.trimEnd())}\n`;
  }
  return `${JSON.stringify(capValue(parsed))}\n`;
}
