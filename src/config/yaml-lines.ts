// Where a key of a YAML document sits, so that an error about it can point at its line (the
// "vmpilot config" check's annotations).
import { type Document, isMap, isNode, isScalar, isSeq, type LineCounter } from "yaml";

/**
 * The 1-based line of the innermost key or list item of `keys` that the document holds: the key
 * itself for a mapping (an unknown key, or one whose value is wrong, is named where it is written),
 * the item for a list. The whole document's first line when not even the first key is there.
 */
export function lineOf(doc: Document, lines: LineCounter, keys: readonly PropertyKey[]): number {
  let node: unknown = doc.contents;
  let at = isNode(node) ? node.range?.[0] : undefined;
  for (const key of keys) {
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === key);
      if (!pair) break;
      at = isNode(pair.key) ? pair.key.range?.[0] : at;
      node = pair.value;
    } else if (isSeq(node) && typeof key === "number") {
      node = node.items[key];
      if (!isNode(node)) break;
      at = node.range?.[0] ?? at;
    } else {
      break;
    }
  }
  return at === undefined ? 1 : lines.linePos(at).line;
}
