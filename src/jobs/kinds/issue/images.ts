// The images a job shows the model: those attached to the triggering comment and to the item's
// description. Each goes into the conversation once: an image the conversation holds already (by
// its SHA-256) was shown in an earlier turn, and is not added again.
import { type FetchedImage, fetchImage, type ImageFetchOptions } from "../../../github/images.ts";
import type { ImageSource } from "../../../github/issue-context.ts";
import { conversationImageHashes, sha256Hex } from "../../../store/conversation-images.ts";
import type { Queryable } from "../../../store/sql.ts";

/** The most images one job fetches; more are left out, saying so. */
const IMAGES_PER_JOB = 10;

export interface JobImages {
  images: (FetchedImage & { from: string })[];
  /** One line per image left out, for the model. */
  leftOut: string[];
}

export const NO_IMAGES: JobImages = { images: [], leftOut: [] };

export async function readJobImages(
  db: Queryable,
  conversationId: number,
  sources: readonly ImageSource[],
  options: ImageFetchOptions,
): Promise<JobImages> {
  if (sources.length === 0) return NO_IMAGES;
  const shown = await conversationImageHashes(db, conversationId);
  const found: JobImages = { images: [], leftOut: [] };
  for (const source of sources.slice(0, IMAGES_PER_JOB)) {
    const outcome = await fetchImage(source.url, options);
    if (!outcome.ok) {
      found.leftOut.push(`An image in ${source.from} was left out: ${outcome.reason}.`);
      continue;
    }
    const sha256 = sha256Hex(outcome.image.data);
    if (shown.has(sha256)) continue;
    shown.add(sha256);
    found.images.push({ ...outcome.image, from: source.from });
  }
  const more = sources.length - IMAGES_PER_JOB;
  if (more > 0) {
    found.leftOut.push(
      `${more} more ${more === 1 ? "image was" : "images were"} left out: vmpilot reads at most ${IMAGES_PER_JOB} per job.`,
    );
  }
  return found;
}
