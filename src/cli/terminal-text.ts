// Text the CLI did not write itself (model text, tool output, file names, a diff, error messages)
// can carry terminal control sequences: OSC 52 writes the clipboard, OSC 8 plants links, ESC[2J
// clears the screen, a lone CR or a backspace rewrites what was printed before. Human output keeps
// the text, newlines and tabs only; the JSON output keeps the data exactly.

// Whole sequences go first, so that their parameters (a clipboard payload, a URL) go with them:
// CSI, string sequences (OSC, DCS, SOS, PM, APC) ended by BEL or ST, the other escapes, and the
// 8-bit forms. The character classes are disjoint, so each alternative runs in linear time.
const SEQUENCES =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching terminal controls is the point.
  /\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)|\x1b[ -/]*[0-~]|\x9b[0-?]*[ -/]*[@-~]|[\x90\x98\x9d-\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)/g;

// Then every control character left (an unterminated sequence's introducer included) but tab and
// newline; CR LF becomes LF.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

export function terminalText(text: string): string {
  return text.replace(SEQUENCES, "").replace(CONTROLS, "");
}
