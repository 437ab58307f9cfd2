// Cron expressions of `automations[].schedule`: the five classic fields (minute, hour, day of
// month, month, day of week), in UTC. A subset of what the scheduler (pg-boss, cron-parser) reads,
// so that a file that passes here is one the scheduler takes: no seconds field, no nicknames
// (@daily), no L, W, # or ?.

const FIELDS = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12, names: "jan feb mar apr may jun jul aug sep oct nov dec" },
  // 7 is Sunday too, as in most crons.
  { name: "day of week", min: 0, max: 7, names: "sun mon tue wed thu fri sat" },
] as const;

type Field = (typeof FIELDS)[number];

function value(text: string, field: Field): number | undefined {
  if (/^\d{1,2}$/.test(text)) {
    const n = Number(text);
    return n >= field.min && n <= field.max ? n : undefined;
  }
  if (!("names" in field)) return undefined;
  const index = field.names.split(" ").indexOf(text.toLowerCase());
  return index === -1 ? undefined : index + field.min;
}

/** Whether one comma-separated item (`*`, `5`, `1-5`, `*\/15`, `mon-fri`, `10-50/10`) fits. */
function itemFits(item: string, field: Field): boolean {
  const [range = "", step, extra] = item.split("/");
  if (extra !== undefined) return false;
  if (step !== undefined && !(/^\d{1,2}$/.test(step) && Number(step) >= 1)) return false;
  if (range === "*") return true;
  const [from = "", to, more] = range.split("-");
  if (more !== undefined) return false;
  const start = value(from, field);
  if (start === undefined) return false;
  if (to === undefined) return true;
  const end = value(to, field);
  return end !== undefined && end >= start;
}

/** What is wrong with the expression, or undefined when it is a five-field cron expression. */
export function cronProblem(expression: string): string | undefined {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== FIELDS.length) {
    return "must be a cron expression of five fields (minute hour day-of-month month day-of-week), like 0 6 * * 1";
  }
  for (const [index, field] of FIELDS.entries()) {
    const part = parts[index] ?? "";
    if (!part.split(",").every((item) => itemFits(item, field))) {
      const names = "names" in field ? ` (or names like ${field.names.split(" ")[1]})` : "";
      return `the ${field.name} field (${part}) must be *, a number from ${field.min} to ${field.max}${names}, a range or a list of those, with an optional /step`;
    }
  }
  return undefined;
}
