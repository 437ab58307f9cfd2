import { z } from "zod";
import { PermanentError } from "../errors.ts";
import type { Queryable } from "./sql.ts";

/**
 * A value read back from the database that does not have the shape its writer gave it. Another
 * attempt would read the same value, so the job fails at once, saying where the value sits.
 */
export class InvalidStoredValue extends PermanentError {
  constructor(where: string, error: z.ZodError) {
    super(`${where} is not valid: ${z.prettifyError(error).replaceAll("\n", "; ")}`);
    this.name = "InvalidStoredValue";
  }
}

/** Parses a stored value; `where` names the table, column and row, e.g. "jobs.context of job 3". */
export function parseStored<T extends z.ZodType>(
  schema: T,
  value: unknown,
  where: string,
): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) throw new InvalidStoredValue(where, result.error);
  return result.data;
}

/** A bigint column: pg hands it over as a string. */
export const bigint = z.union([z.string(), z.number()]).transform(Number).pipe(z.number().int());

/**
 * Runs a query and parses each row with `schema`: a row of another shape is an InvalidStoredValue
 * naming `where` and the row's index, never a value cast to a type it does not have.
 */
export async function queryRows<T extends z.ZodType>(
  db: Queryable,
  text: string,
  values: unknown[],
  schema: T,
  where: string,
): Promise<z.output<T>[]> {
  const { rows } = await db.query(text, values);
  return rows.map((value, index) => parseStored(schema, value, `${where} (row ${index})`));
}

/** A timestamptz column: pg hands it over as a Date, and JSON (json_agg) as a string. */
export const timestamp = z
  .union([z.date(), z.string().transform((text) => new Date(text))])
  .pipe(z.date());

/** A numeric column, or a sum of one: pg hands it over as a string. */
export const numeric = z.union([z.string(), z.number()]).transform(Number).pipe(z.number());

/** A column name as the code names the field: pr_number → prNumber. */
type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : S;
type Fields<T> = { [K in keyof T as K extends string ? CamelCase<K> : K]: T[K] };

/**
 * A table row: its columns as the table names them (snake_case), parsed into fields as the code
 * names them (camelCase), so that each column is written once and the row's type is its output.
 */
export function row<Columns extends z.ZodRawShape>(columns: Columns) {
  // As CamelCase spells it: every part after an underscore capitalized.
  const fieldOf = new Map(
    Object.keys(columns).map((column) => {
      const [first = "", ...rest] = column.split("_");
      return [
        column,
        first + rest.map((part) => part.charAt(0).toUpperCase() + part.slice(1)).join(""),
      ];
    }),
  );
  return z.object(columns).transform((parsed) => {
    const fields: Record<string, unknown> = {};
    for (const [column, value] of Object.entries(parsed))
      fields[fieldOf.get(column) ?? column] = value;
    // Object.entries knows no keys: the per-field types are the columns', under CamelCase names.
    return fields as Fields<typeof parsed>;
  });
}
