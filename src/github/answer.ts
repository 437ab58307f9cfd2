// GitHub's JSON is parsed before use, keeping only the fields the code reads.
import type { z } from "zod";

/** A GitHub answer that is not what its documentation says: a clear error, not a crash later. */
export class GitHubAnswerError extends Error {
  override name = "GitHubAnswerError";
}

export function parseAnswer<T>(schema: z.ZodType<T>, data: unknown, what: string): T {
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    throw new GitHubAnswerError(`GitHub's answer to ${what} is not as documented`);
  }
  return parsed.data;
}
