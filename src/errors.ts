// Whether a failure is worth another attempt is a property of its type, so the queue and the
// pipeline never keep lists of class names.

/** A failure another attempt would only repeat: the job fails at once instead of retrying. */
export class PermanentError extends Error {}

export function isPermanent(error: unknown): boolean {
  return error instanceof PermanentError;
}
