// Escaping for user-controlled text (config keys, command words, error texts) that goes into the
// app's comments: it must not break out of its code span or ping anyone with an @mention.

// U+2060 WORD JOINER is invisible, and GitHub does not link "@\u2060name" as a mention.
const WORD_JOINER = "\u2060";

/** Text with every @mention made inert and line breaks flattened, for use in running prose. */
export function plainText(text: string): string {
  return text.replace(/[\r\n]+/g, " ").replaceAll("@", `@${WORD_JOINER}`);
}

/**
 * A Markdown code span that shows `text` literally: the fence is one backtick longer than the
 * longest run inside, so no backtick in the text can close it, and nothing inside is a mention.
 */
export function codeSpan(text: string): string {
  const flat = text.replace(/[\r\n]+/g, " ");
  let longest = 0;
  for (const run of flat.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  const fence = "`".repeat(longest + 1);
  // A space keeps a leading or trailing backtick from merging with the fence; Markdown strips it.
  const pad = flat.startsWith("`") || flat.endsWith("`") ? " " : "";
  return `${fence}${pad}${flat}${pad}${fence}`;
}
