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
  return rows.map((row, index) => parseStored(schema, row, `${where} (row ${index})`));
}
