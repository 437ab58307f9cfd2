// The workspace agent's wire format, shared by the agent (inside the VM) and the worker's client.
// Plain JSON over HTTP; file contents travel as raw bytes.
import { z } from "zod";
import { LOG_OUTPUT_CAP, MODEL_OUTPUT_CAP } from "../process/output.ts";

export const execRequest = z.strictObject({
  /** Names the command for /v1/cancel. */
  id: z.string().min(1).max(100),
  command: z.string().min(1),
  cwd: z.string().optional(),
  env: z.record(z.string(), z.string()).optional(),
  timeoutMs: z
    .number()
    .int()
    .positive()
    .max(24 * 3_600_000)
    .optional(),
});

export const execResult = z.strictObject({
  stdout: z.string(),
  stderr: z.string(),
  exitCode: z.number().int().nullable(),
  timedOut: z.boolean(),
  truncated: z.boolean(),
  fullStdout: z.string(),
  fullStderr: z.string(),
  durationMs: z.number(),
});

/**
 * Starts a command that keeps running with its stdin open (Workspace.spawn). The answer streams
 * as it runs: one spawnFrame per line, the last one its end. /v1/input writes to its stdin;
 * /v1/cancel kills it, and so does the worker closing the answer.
 */
export const spawnRequest = z.strictObject({
  id: z.string().min(1).max(100),
  command: z.string().min(1),
});

/** Output (base64, as it came) or the end of a spawned command: one JSON line of the answer. */
export const spawnFrame = z.union([
  z.strictObject({ stdout: z.base64() }),
  z.strictObject({ stderr: z.base64() }),
  z.strictObject({ exit: z.number().int().nullable(), error: z.string().max(2000).optional() }),
]);

/** Bytes of output one frame carries at most, before base64; the worker refuses a longer line. */
export const FRAME_OUTPUT_BYTES = 256 * 1024;
export const MAX_FRAME_BYTES = 2 * FRAME_OUTPUT_BYTES;

export const inputRequest = z.strictObject({ id: z.string().min(1).max(100), data: z.string() });

/** Kills a running command's process group; its /v1/exec answers as after a timeout. */
export const cancelRequest = z.strictObject({ id: z.string().min(1).max(100) });

export const readRequest = z.strictObject({
  path: z.string(),
  maxBytes: z.number().int().nonnegative(),
});

export const listRequest = z.strictObject({ path: z.string() });
export const listResult = z.strictObject({ entries: z.array(z.string()) });

/** An error the agent answers with; `kind` says which error to raise on the worker's side. */
export const agentError = z.object({
  error: z.object({
    kind: z.enum(["refused", "escape", "bad_request", "unauthorized", "failed"]),
    message: z.string(),
    /** For "refused": FileRefusedError's reason. */
    reason: z.enum(["directory", "special", "too_large"]).optional(),
  }),
});

/** What /v1/checkout answers: where the checkout is, as the agent sees it. */
export const checkoutResult = z.strictObject({ root: z.string() });

/** A branch name as git and the push guard accept it (git.ts's validateBranchName decides the rest). */
export const checkoutBranch = z
  .string()
  .regex(/^[A-Za-z0-9._/-]{1,200}$/)
  .refine((name) => !name.startsWith("-") && !name.includes(".."));

/** The checkout's `origin`: a URL without credentials, printable ASCII only. */
export const checkoutOrigin = z.string().regex(/^[!-~]{0,2000}$/);

/** The worker's egress proxy for this job's commands: http://user:password@host:port. */
export const checkoutProxy = z
  .url({ protocol: /^http$/ })
  .max(500)
  .regex(/^[!-~]+$/)
  .optional();

/**
 * The commits where a shallow checkout's history stops (git's `.git/shallow`), comma-separated:
 * the bundle carries only the branch's recent history.
 */
export const checkoutShallow = z
  .string()
  .regex(/^[0-9a-f]{40}(?:[0-9a-f]{24})?(?:,[0-9a-f]{40}(?:[0-9a-f]{24})?){0,999}$/)
  .transform((ids) => ids.split(","))
  .optional();

/** JSON requests; a command line and its environment fit well within this. */
export const MAX_JSON_BYTES = 1024 * 1024;
/** One file written by the editor tool or a bundle; bigger ones are refused unread. */
export const MAX_FILE_BYTES = 100 * 1024 * 1024;
/** The checkout's git bundle; streamed to the agent's disk, never held in memory. */
export const MAX_SEED_BYTES = 4 * 1024 * 1024 * 1024;

/** What an answer may carry besides its payload: an error's JSON, the exec result's fields. */
export const ANSWER_ENVELOPE_BYTES = 64 * 1024;
/** A directory listing's answer; the worker refuses a longer one as it arrives. */
export const MAX_LIST_ANSWER_BYTES = 16 * 1024 * 1024;
/**
 * An exec answer: the model's capped output and the two streams kept for the log, each character
 * at most 6 bytes in JSON (a control character's \u escape). The worker refuses more as it arrives.
 */
export const MAX_EXEC_ANSWER_BYTES =
  6 * (MODEL_OUTPUT_CAP + 2 * LOG_OUTPUT_CAP) + ANSWER_ENVELOPE_BYTES;
