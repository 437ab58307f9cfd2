// Parts of a served page for inline snapshots: what a test checks of a page is then read as the
// page shows it, and a change to it is reviewed in the diff of the snapshot. What differs from
// run to run (ports, times, form tokens) is masked.

/** The page from the first `start` on, through the first `end` after it. */
export function fragment(page: string, start: string, end: string): string {
  const from = page.indexOf(start);
  if (from < 0) throw new Error(`the page has no ${start}`);
  const to = page.indexOf(end, from + start.length);
  if (to < 0) throw new Error(`the page has no ${end} after ${start}`);
  return mask(page.slice(from, to + end.length));
}

/** The page's main content. */
export function main(page: string): string {
  return fragment(page, "<main", "</main>");
}

/** One field of a settings form, named as in its `id="f-…"`: label, input, source, hint, error. */
export function field(page: string, name: string): string {
  // A fieldset's legend names no element: its hint's id does.
  const at = [`id="f-${name}"`, `id="f-${name}-hint"`]
    .map((id) => page.indexOf(id))
    .reduce((found, index) => (found < 0 ? index : found));
  if (at < 0) throw new Error(`the page has no field ${name}`);
  const open = '<div class="field">';
  const from = page.lastIndexOf(open, at);
  const next = page.indexOf(open, at);
  const to = next < 0 ? page.indexOf("</form>", at) : next;
  return mask(page.slice(from, to));
}

function mask(html: string): string {
  return (
    html
      .replace(/http:\/\/127\.0\.0\.1:\d+/g, "http://127.0.0.1:PORT")
      .replace(/<time datetime="[^"]*">[^<]*<\/time>/g, "<time>TIME</time>")
      .replace(/name="csrf" value="[^"]*"/g, 'name="csrf" value="CSRF"')
      .replace(/\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2}(?::\d{2})?)?/g, "DATE")
      // One list item a line, and no trailing blanks, for a readable snapshot.
      .replace(/<\/li>(?=<li)/g, "</li>\n")
      .replace(/[ \t]+$/gm, "")
  );
}
