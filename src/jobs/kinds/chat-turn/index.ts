// The chat turn: a message to the chat face (`/v1/chat/completions`) or `vmpilot chat`, on a
// repository or on a scratch workspace of its owner's.
import type { Job } from "../../../store/jobs.ts";
import type { JobKind } from "../../run/kind.ts";
import { JobProgress } from "../../run/progress.ts";
import { endTurn } from "./end.ts";
import { runTurn, type TurnAttempt, turnPlace } from "./run.ts";

export const chatTurn: JobKind<Job, TurnAttempt> = {
  name: "chat turn",
  freshGate: true,
  told: "you",
  claims: (job): job is Job => job.trigger === "chat",
  place: turnPlace,
  refused: (job, { deps }, why) =>
    endTurn(deps, job, {
      error:
        "refused" in why
          ? why.refused
          : `${job.requester} may no longer use vmpilot on ${job.repo} (its triggerPolicy or allowedUsers).`,
    }),
  async open(job, { deps }) {
    const progress = new JobProgress({
      db: deps.db.pool,
      jobId: job.id,
      view: { jobId: job.id, jobUrl: "", current: "agent", startedAt: Date.now(), costUsd: 0 },
      baseCostUsd: job.costUsd,
      logger: deps.logger,
    });
    const end: TurnAttempt["end"] = async (ending) => {
      await progress.flush();
      return endTurn(deps, job, ending);
    };
    return {
      progress,
      end,
      limited: (refusal) =>
        end({
          error:
            "limit" in refusal
              ? refusal.limit
              : "disabled" in refusal
                ? "vmpilot is turned off for this repository (`enabled: false`)."
                : `invalid ${refusal.invalid.source}: ${refusal.invalid.message}`,
        }),
      cancelled: async () => "cancelled",
      failed: (reason) => end({ error: reason }),
      retrying: async () => undefined,
    };
  },
  work: runTurn,
};
