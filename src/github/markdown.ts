// Escaping for user-controlled text (config keys, command words, error texts, model output) in the
// app's comments: it must not break out of its code span or ping anyone with an @mention.

/** Text must not ping people or teams: "@name" outside code gets a zero-width space after the @. */
export function quietMentions(text: string): string {
  return text.replace(/(^|[^\w`/])@(?=[A-Za-z0-9])/g, "$1@\u200B");
}

/** A fenced code block whose fence is longer than any backtick run inside, so nothing closes it early. */
export function codeBlock(text: string, language = ""): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = "`".repeat(longest + 1);
  return `${fence}${language}\n${text.replace(/\n$/, "")}\n${fence}`;
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
