// The request body of /v1/chat/completions, as far as vmpilot reads it; other fields are ignored.
import { z } from "zod";
import { badRequest } from "./errors.ts";

const part = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
  /** An image_url part's image: a data: URL or an https URL. */
  image_url: z.looseObject({ url: z.string() }).optional(),
});

const message = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: z.union([z.string(), z.array(part), z.null()]).optional(),
});

const body = z.looseObject({
  model: z.string().min(1).max(300),
  messages: z.array(message).min(1).max(2000),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  /** Open WebUI's chat id, when the client sends one. */
  chat_id: z.string().max(200).nullish(),
});

export type CompletionRequest = z.infer<typeof body>;
export type RequestMessage = z.infer<typeof message>;

export function parseCompletionRequest(text: string): CompletionRequest {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw badRequest("The request body is not valid JSON.");
  }
  const parsed = body.safeParse(json);
  if (!parsed.success) {
    throw badRequest(`Invalid request: ${z.prettifyError(parsed.error).replaceAll("\n", "; ")}`);
  }
  return parsed.data;
}

/** A message's text: the string, or its text parts joined (images are read by imageUrls). */
export function messageText(m: RequestMessage): string {
  if (typeof m.content === "string") return m.content;
  return (m.content ?? []).flatMap((p) => (p.type === "text" && p.text ? [p.text] : [])).join("\n");
}

/** The URLs of a message's image_url parts, in order. */
export function imageUrls(m: RequestMessage): string[] {
  if (typeof m.content === "string") return [];
  return (m.content ?? []).flatMap((p) =>
    p.type === "image_url" && p.image_url ? [p.image_url.url] : [],
  );
}
