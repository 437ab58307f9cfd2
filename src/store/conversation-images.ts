// Images in a conversation's messages, stored once per conversation by their SHA-256
// (conversation_images). What the messages and compactions tables hold in place of an image's bytes
// is a reference block, { type: "image", source: { type: "chat_image", media_type, sha256 } };
// reading them back puts the bytes in again, as the model API takes them (a base64 source). The
// type keeps the name it was stored under: messages are append-only.
import { createHash } from "node:crypto";
import { z } from "zod";
import { PermanentError } from "../errors.ts";
import { type ImageMediaType, imageMediaType } from "./message-param.ts";
import type { Queryable } from "./sql.ts";
import { parseStored } from "./stored-value.ts";

const inline = z.object({
  type: z.literal("image"),
  source: z.object({ type: z.literal("base64"), media_type: imageMediaType, data: z.string() }),
});

const reference = z.object({
  type: z.literal("image"),
  source: z.object({
    type: z.literal("chat_image"),
    media_type: imageMediaType,
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
  }),
});

const imageRow = z.object({ sha256: z.string(), data: z.instanceof(Buffer) });

export function sha256Hex(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * Stores the images of a message's content (its top-level image blocks) and returns the content
 * with references in their place. An image the conversation has already is not stored again.
 */
export async function storeImages(
  db: Queryable,
  conversationId: number,
  content: unknown,
): Promise<unknown> {
  if (!Array.isArray(content)) return content;
  const out: unknown[] = [];
  for (const block of content) {
    const image = inline.safeParse(block);
    if (!image.success) {
      out.push(block);
      continue;
    }
    const { media_type, data } = image.data.source;
    const sha256 = await storeImage(db, conversationId, media_type, Buffer.from(data, "base64"));
    out.push(imageReference(media_type, sha256));
  }
  return out;
}

/** Stores one image for the conversation, unless it has it already; resolves to its SHA-256. */
export async function storeImage(
  db: Queryable,
  conversationId: number,
  mediaType: ImageMediaType,
  bytes: Buffer,
): Promise<string> {
  const sha256 = sha256Hex(bytes);
  await db.query(
    `INSERT INTO conversation_images (conversation_id, sha256, media_type, data) VALUES ($1, $2, $3, $4)
     ON CONFLICT (conversation_id, sha256) DO NOTHING`,
    [conversationId, sha256, mediaType, bytes],
  );
  return sha256;
}

/** A stored image's reference block, as messages hold it; loadImages puts its bytes back. */
export function imageReference(mediaType: ImageMediaType, sha256: string) {
  return { type: "image", source: { type: "chat_image", media_type: mediaType, sha256 } };
}

/** Message contents as stored, with the images' bytes put back in place of their references. */
export async function loadImages(
  db: Queryable,
  conversationId: number,
  contents: readonly unknown[],
): Promise<unknown[]> {
  const wanted = new Set<string>();
  for (const content of contents) {
    if (!Array.isArray(content)) continue;
    for (const block of content) {
      const ref = reference.safeParse(block);
      if (ref.success) wanted.add(ref.data.source.sha256);
    }
  }
  if (wanted.size === 0) return [...contents];
  const { rows } = await db.query(
    "SELECT sha256, data FROM conversation_images WHERE conversation_id = $1 AND sha256 = ANY($2)",
    [conversationId, [...wanted]],
  );
  const bytes = new Map(
    rows.map((row) => {
      const image = parseStored(
        imageRow,
        row,
        `a conversation_images row of conversation ${conversationId}`,
      );
      return [image.sha256, image.data.toString("base64")];
    }),
  );
  return contents.map((content) =>
    Array.isArray(content)
      ? content.map((block) => {
          const ref = reference.safeParse(block);
          if (!ref.success) return block;
          const { media_type, sha256 } = ref.data.source;
          const data = bytes.get(sha256);
          if (data === undefined) {
            throw new PermanentError(
              `conversation ${conversationId} shows image ${sha256}, which is not stored`,
            );
          }
          return { type: "image", source: { type: "base64", media_type, data } };
        })
      : content,
  );
}

/** The SHA-256 of every image the conversation holds: images it has shown already. */
export async function conversationImageHashes(
  db: Queryable,
  conversationId: number,
): Promise<Set<string>> {
  const { rows } = await db.query(
    "SELECT sha256 FROM conversation_images WHERE conversation_id = $1",
    [conversationId],
  );
  return new Set(
    rows.map(
      (row) =>
        parseStored(z.object({ sha256: z.string() }), row, "a conversation_images row").sha256,
    ),
  );
}
