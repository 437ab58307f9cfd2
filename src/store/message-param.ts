// The model API's message shape, checked when a stored conversation is read back. Blocks keep
// every field (loose objects): the API defines fields this schema need not know about.
import type Anthropic from "@anthropic-ai/sdk";
import { z } from "zod";

/** The image formats the model APIs take. */
export const imageMediaType = z.enum(["image/png", "image/jpeg", "image/gif", "image/webp"]);

export type ImageMediaType = z.infer<typeof imageMediaType>;

const text = z.looseObject({ type: z.literal("text"), text: z.string() });

const block = z.discriminatedUnion("type", [
  text,
  z.looseObject({
    type: z.literal("image"),
    source: z.looseObject({
      type: z.literal("base64"),
      media_type: imageMediaType,
      data: z.string(),
    }),
  }),
  z.looseObject({ type: z.literal("thinking"), thinking: z.string(), signature: z.string() }),
  z.looseObject({ type: z.literal("redacted_thinking"), data: z.string() }),
  z.looseObject({
    type: z.literal("tool_use"),
    id: z.string(),
    name: z.string(),
    input: z.unknown(),
  }),
  z.looseObject({
    type: z.literal("tool_result"),
    tool_use_id: z.string(),
    content: z.union([z.string(), z.array(text)]).optional(),
  }),
]);

export const messageParamSchema: z.ZodType<Anthropic.MessageParam> = z.object({
  role: z.enum(["user", "assistant"]),
  content: z.union([z.string(), z.array(block)]),
});
