/** A text file as the editor works on it: LF line endings, no BOM, and how to restore both. */
export interface TextFile {
  text: string;
  crlf: boolean;
  bom?: boolean;
}

const BINARY_SNIFF_BYTES = 8_000;
const BOM = "\uFEFF";

/** Decodes UTF-8 text, or returns undefined for binary content (a NUL byte or invalid UTF-8). */
export function decodeText(bytes: Buffer): TextFile | undefined {
  if (bytes.subarray(0, BINARY_SNIFF_BYTES).includes(0)) return undefined;
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return undefined;
  }
  const bom = text.startsWith(BOM);
  if (bom) text = text.slice(1);
  const lf = text.split("\n").length - 1;
  const crlfCount = text.split("\r\n").length - 1;
  // Only files whose every line ends in CRLF are normalised; mixed files are edited byte-exact.
  const crlf = lf > 0 && crlfCount === lf;
  return { text: crlf ? text.replaceAll("\r\n", "\n") : text, crlf, bom };
}

export function toDisk(file: TextFile): string {
  const body = file.crlf ? file.text.replaceAll("\r\n", "\n").replaceAll("\n", "\r\n") : file.text;
  return file.bom ? BOM + body : body;
}
