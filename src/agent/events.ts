// What the loop tells its listener as a run goes: the job-log events of the store, as they
// are stored (job-event-kinds.ts defines each one), plus what only a live listener gets.
import type Anthropic from "@anthropic-ai/sdk";
import type { z } from "zod";
import type { AGENT_EVENTS } from "../store/job-event-kinds.ts";

type Definitions = typeof AGENT_EVENTS;

/** One event as the loop emits it: its type next to the fields its definition stores. */
type Emitted<K extends keyof Definitions> = { type: K } & z.output<Definitions[K]["data"]>;

type CompactedEvent = Emitted<"compacted"> & {
  /** The whole conversation after compaction, for callers that store it; not logged. */
  messages: Anthropic.MessageParam[];
};

type Stored = { [K in keyof Definitions]: Emitted<K> }[keyof Definitions];

export type AgentEvent = Exclude<Stored, { type: "compacted" }> | CompactedEvent;

export type FinishReason = Emitted<"finished">["reason"];

export type FailureCode = Emitted<"failed">["code"];

export type AgentEventListener = (event: AgentEvent) => void;
