// Images in a conversation's messages, stored once per conversation by their SHA-256
// (conversation_images). What the messages and compactions tables hold in place of an image's bytes
// is a reference block, { type: "image", source: { type: "chat_image", media_type, sha256 } };
// reading them back puts the bytes in again, as the model API takes them (a base64 source). The
// type keeps the name it was stored under: messages are append-only.
import { createHash } from "node:crypto";
import { z } from "zod";
import { type ConversationOwner, ownedBy } from "./api-conversations.ts";
import { type ImageMediaType, imageMediaType } from "./message-param.ts";
import type { Queryable } from "./sql.ts";
import { parseStored, row } from "./stored-value.ts";

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

/**
 * Stores one image for the conversation, unless it has it already; resolves to its SHA-256. A chat
 * turn's images name the turn that brought them (dropTurnImages).
 */
export async function storeImage(
  db: Queryable,
  conversationId: number,
  mediaType: ImageMediaType,
  bytes: Buffer,
  jobId: number | null = null,
): Promise<string> {
  const sha256 = sha256Hex(bytes);
  await db.query(
    `INSERT INTO conversation_images (conversation_id, sha256, media_type, data, job_id)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (conversation_id, sha256) DO NOTHING`,
    [conversationId, sha256, mediaType, bytes, jobId],
  );
  return sha256;
}

/**
 * Deletes the images a turn brought that nothing else needs: for a turn that will never run. An
 * image a later turn of the conversation also names, still to run, stays for it.
 */
export async function dropTurnImages(
  db: Queryable,
  conversationId: number,
  jobId: number,
): Promise<void> {
  await db.query(
    `DELETE FROM conversation_images i
      WHERE i.conversation_id = $1 AND i.job_id = $2
        AND NOT EXISTS (
          SELECT 1 FROM jobs j
           WHERE j.conversation_id = i.conversation_id AND j.id <> $2 AND j.finished_at IS NULL
             AND j.context -> 'images' @> jsonb_build_array(jsonb_build_object('sha256', i.sha256)))`,
    [conversationId, jobId],
  );
}

/** Deletes the images stored more than `days` ago, in every conversation. */
export async function deleteOldImages(db: Queryable, days: number): Promise<void> {
  await db.query(
    "DELETE FROM conversation_images WHERE created_at < now() - make_interval(days => $1)",
    [days],
  );
}

/** The class of the advisory locks on an owner's images (the two-key form, apart from single keys). */
const IMAGES_LOCK = 726_303;

/** Until the transaction ends, the owner's images are counted and stored by this one alone. */
export async function lockOwnerImages(db: Queryable, owner: ConversationOwner): Promise<void> {
  // The two-key form takes integers; ids past them share a lock, which only serializes more.
  const id = owner.kind === "operator" ? -1 : owner.id % 2 ** 31;
  await db.query("SELECT pg_advisory_xact_lock($1, $2::integer)", [IMAGES_LOCK, id]);
}

const Recent = row({
  images: z.number().int(),
  /** Until the oldest of them is a day old, at least 1. */
  retry_after_seconds: z.number().transform((seconds) => Math.max(1, seconds)),
});

/** The different images stored in the owner's conversations in the last day. */
export async function imagesOfLastDay(
  db: Queryable,
  owner: ConversationOwner,
): Promise<z.output<typeof Recent>> {
  const owned = ownedBy(owner, 1);
  const { rows } = await db.query(
    `SELECT count(DISTINCT i.sha256)::integer AS images,
            coalesce(ceil(extract(epoch FROM min(i.created_at) + interval '1 day' - now())), 1)::integer
              AS retry_after_seconds
       FROM conversation_images i JOIN conversations c ON c.id = i.conversation_id
      WHERE ${owned.sql} AND i.created_at > now() - interval '1 day'`,
    [owned.param],
  );
  return parseStored(Recent, rows[0], "the owner's images of the last day");
}

/** A stored image's reference block, as messages hold it; loadImages puts its bytes back. */
export function imageReference(mediaType: ImageMediaType, sha256: string) {
  return { type: "image", source: { type: "chat_image", media_type: mediaType, sha256 } };
}

/** What the model is shown in place of an image that is no longer stored. */
const GONE = {
  type: "text",
  text: "(An image was here; vmpilot keeps images for a limited time and this one was deleted.)",
};

/**
 * Message contents as stored, with the images' bytes put back in place of their references; an
 * image deleted since (old, or its turn never ran) is a line saying so.
 */
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
          if (data === undefined) return GONE;
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
