// Images in a chat request: OpenAI's image_url parts of the new message, as data: URLs or https
// URLs, held to the limits of images attached to issues (github/images.ts): at most 10, 5 MB each,
// a PNG, JPEG, GIF or WebP by its bytes; https only, from public addresses only, without
// credentials. Unlike an issue's, these are the sender's own, so an image that cannot be used
// refuses the request, saying which and why, rather than being left out behind their back.
import {
  decodeDataImage,
  type FetchedImage,
  fetchImage,
  type ImageFetchOptions,
} from "../github/images.ts";
import { badRequest } from "./errors.ts";

const IMAGES_PER_MESSAGE = 10;

/** How an image is named in an error: a URL without its query (signed URLs carry tokens there). */
function named(url: string, index: number): string {
  if (/^data:/i.test(url)) return `image ${index + 1}`;
  const shown = url.split(/[?#]/)[0] ?? "";
  return `image ${index + 1} (${shown.length > 100 ? `${shown.slice(0, 100)}…` : shown})`;
}

/** A 400 for a message with more images than one may have. */
export function checkImageCount(urls: readonly string[]): void {
  if (urls.length > IMAGES_PER_MESSAGE) {
    throw badRequest(
      `A message may have at most ${IMAGES_PER_MESSAGE} images; this one has ${urls.length}.`,
    );
  }
}

/** The message's images, read and checked; a 400 when any cannot be used. */
export async function readRequestImages(
  urls: readonly string[],
  options: ImageFetchOptions = {},
): Promise<FetchedImage[]> {
  checkImageCount(urls);
  const outcomes = await Promise.all(
    urls.map((url) => (/^data:/i.test(url) ? decodeDataImage(url) : fetchImage(url, options))),
  );
  const images: FetchedImage[] = [];
  const refused: string[] = [];
  outcomes.forEach((outcome, i) => {
    if (outcome.ok) images.push(outcome.image);
    else refused.push(`${named(urls[i] ?? "", i)}: ${outcome.reason}`);
  });
  if (refused.length > 0) {
    throw badRequest(`vmpilot cannot use the message's images: ${refused.join("; ")}.`);
  }
  return images;
}
