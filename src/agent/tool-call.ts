// One line that says what a tool call does, for every place a person watches a run: the progress
// comment, the job page, the CLI. The input is the model's, so it is parsed, not trusted.
import { z } from "zod";

const ACTIVITY_CAP = 200;

const Fields = z.looseObject({
  command: z.unknown().optional(),
  path: z.unknown().optional(),
  restart: z.unknown().optional(),
});

const firstLine = (value: unknown) =>
  (typeof value === "string" ? value : "").split("\n")[0]?.slice(0, ACTIVITY_CAP) ?? "";

export function describeToolCall(name: string, input: unknown): string {
  const fields = Fields.safeParse(input ?? {});
  const i = fields.success ? fields.data : {};
  if (name === "bash") return i.restart === true ? "bash: restart" : `$ ${firstLine(i.command)}`;
  if (name === "str_replace_based_edit_tool") {
    return `${firstLine(i.command)} ${firstLine(i.path)}`.trim();
  }
  return name;
}
