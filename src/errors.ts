// Whether a failure is worth another attempt is a property of its type, so the queue and the
// pipeline never keep lists of class names.

/** A failure another attempt would only repeat: the job fails at once instead of retrying. */
export class PermanentError extends Error {
  readonly permanent = true;
}

/**
 * True for PermanentError and for errors of other hierarchies that carry `permanent = true`
 * (a launch request that can never start is a LaunchError, and permanent).
 */
export function isPermanent(error: unknown): boolean {
  return error instanceof Error && (error as { permanent?: unknown }).permanent === true;
}
