// Chat clients ask the selected model for chores besides the chat: Open WebUI sends a title, tags
// and follow-up suggestions request ("### Task: ... <chat_history>") after each reply unless a
// separate task model is set. Those must not become agent turns with a workspace and a bill; they
// are answered here at once, in the JSON shape the client asked for.
import type { CompletionRequest } from "./body.ts";
import { messageText } from "./body.ts";

const TASK = /^\s*###\s*Task:/i;
const TITLE_CAP = 60;

/** The answer to a client's chore, or undefined when the request is a real turn. */
export function answerClientTask(request: CompletionRequest): string | undefined {
  const last = request.messages.at(-1);
  if (last?.role !== "user") return undefined;
  const text = messageText(last);
  if (!TASK.test(text) || !text.includes("<chat_history>")) return undefined;
  const output = text.slice(text.search(/###\s*Output:/i)).slice(0, 2000);
  if (/"title"/.test(output)) return JSON.stringify({ title: titleOf(text) });
  for (const key of ["follow_ups", "tags", "queries"]) {
    if (output.includes(`"${key}"`)) return JSON.stringify({ [key]: [] });
  }
  return "{}";
}

/**
 * The conversation's first user line, shortened: the person's own words make the plainest title.
 */
function titleOf(text: string): string {
  const history = /<chat_history>([\s\S]*?)<\/chat_history>/.exec(text)?.[1] ?? "";
  const first = /^USER:\s*(.+)$/m.exec(history)?.[1]?.trim() ?? "vmpilot chat";
  return first.length > TITLE_CAP ? `${first.slice(0, TITLE_CAP - 1).trimEnd()}…` : first;
}
