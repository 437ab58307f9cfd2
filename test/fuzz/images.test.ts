// Fuzzing `imageSources` with rendered HTML as GitHub sends it in body_html: the examples' own
// body_html and text escaped as GitHub escapes it, between images in the forms GitHub renders.
// Each attachment's address comes back once, in order, as it was before it was escaped; an emoji,
// a link, an image's canonical source and an empty src never do.
import assert from "node:assert/strict";
import fc from "fast-check";
import { describe, it } from "vitest";
import { imageSources } from "../../src/github/images.ts";
import { examples } from "../helpers/webhooks.ts";
import { runs, withoutHang } from "./params.ts";
import { untrustedText } from "./text.ts";

const ESCAPED: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};
const escaped = (text: string) => text.replace(/[&<>"']/g, (c) => ESCAPED[c] ?? c);

// The only examples with body_html hold no image: its lines stand for the text around images.
const rendered = examples("package").flatMap((payload) =>
  String(payload.package.package_version?.body_html ?? "").split("\n"),
);

const signed = "https://private-user-images.githubusercontent.com/1/2-3.png?jwt=a.b.c&v=1";
/** An attachment's address: a few that recur, and any text (entities in it too, raw). */
const address = fc.oneof(
  fc.constantFrom(signed, "https://camo.githubusercontent.com/ab/cd", "https://x.test/'<\">&amp;"),
  fc
    .array(
      fc.oneof(fc.constantFrom("&", "&amp;", "&lt;", "&#39;", '"', "'", "<", ">", "?a=1&b=2")),
      {
        maxLength: 4,
      },
    )
    .chain((pieces) => untrustedText.map((text) => `https://x.test/${pieces.join(text)}`)),
  untrustedText.filter((text) => text !== ""),
);
const alt = untrustedText.map(escaped);

interface Part {
  html: string;
  /** The attachment this part shows, if it is one. */
  source?: string;
}

const attachment: fc.Arbitrary<Part> = fc
  .record({ url: address, canonical: address, alt, form: fc.nat(5) })
  .map(({ url, canonical, alt, form }) => {
    const [src, other] = [escaped(url), escaped(canonical)];
    const html = [
      `<img src="${src}" alt="${alt}" style="max-width: 100%;">`,
      `<a target="_blank" rel="noopener noreferrer" href="${other}"><img src="${src}" alt="${alt}" style="max-width: 100%;"></a>`,
      `<img src="${src}" alt="${alt}" data-canonical-src="${other}" style="max-width: 100%;">`,
      `<img data-canonical-src="${other}" alt="${alt}"\nsrc="${src}" />`,
      `<IMG SRC="${src}" ALT="${alt}">`,
      `<img width="200" class="rounded" src="${src}">`,
    ][form] as string;
    return { html, source: url };
  });

const notAttachment: fc.Arbitrary<Part> = fc
  .record({ url: address, alt, form: fc.nat(5) })
  .map(({ url, alt, form }) => {
    const src = escaped(url);
    const html = [
      `<img class="emoji" title=":${alt}:" alt=":${alt}:" src="${src}" height="20" width="20" align="absmiddle">`,
      `<img class="custom emoji" src="${src}">`,
      `<g-emoji class="g-emoji" alias="smile" fallback-src="${src}">😄</g-emoji>`,
      `<img src="" alt="${alt}"><img alt="${alt}">`,
      `<a href="${src}">${alt}</a>`,
      `<img data-canonical-src="${src}" data-src="${src}">`,
    ][form] as string;
    return { html };
  });

const part: fc.Arbitrary<Part> = fc.oneof(
  attachment,
  notAttachment,
  untrustedText.map((text) => ({ html: escaped(text) })),
  fc.constantFrom(...rendered).map((html) => ({ html })),
);

describe("body_html", () => {
  it("lists each attachment's address once, in order, unescaped, and nothing else", () => {
    withoutHang<string>(30_000, (track) =>
      fc.assert(
        fc.property(fc.array(part, { maxLength: 10 }), (parts) => {
          const html = parts.map((p) => p.html).join("");
          track(html);
          const sources = parts.flatMap((p) => (p.source === undefined ? [] : [p.source]));
          assert.deepEqual(imageSources(html), [...new Set(sources)]);
        }),
        runs(10_000),
      ),
    );
  });
});
