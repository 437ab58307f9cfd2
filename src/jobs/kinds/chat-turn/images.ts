// A chat turn's message with the images it carries: the text, then the images, read
// back from conversation_images, where the web side stored them once by hash.
import type Anthropic from "@anthropic-ai/sdk";
import { imageReference, loadImages } from "../../../store/conversation-images.ts";
import { messageParamSchema } from "../../../store/message-param.ts";
import type { Queryable } from "../../../store/sql.ts";
import { parseStored } from "../../../store/stored-value.ts";
import type { ChatTurnRequest } from "../../queue/chat-turn-request.ts";

export async function withMessageImages(
  db: Queryable,
  conversationId: number,
  text: string,
  images: ChatTurnRequest["images"],
): Promise<string | Anthropic.ContentBlockParam[]> {
  if (images.length === 0) return text;
  const references = images.map((image) => imageReference(image.mediaType, image.sha256));
  const [loaded] = await loadImages(db, conversationId, [references]);
  const blocks = Array.isArray(loaded) ? loaded : [];
  const turn = parseStored(
    messageParamSchema,
    {
      role: "user",
      // The model APIs take no empty text block: a message of images alone says so.
      content: [
        { type: "text", text: text.trim() || "(The message is the images below.)" },
        ...blocks,
      ],
    },
    `the images of a turn of conversation ${conversationId}`,
  );
  return turn.content;
}
