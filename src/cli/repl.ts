// `vmpilot chat`: a conversation typed line by line. It reads lines from a pipe as well as from a
// terminal, which is how it is tested.
import { appendFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { InvocationArgs } from "./args.ts";
import { Invocation, resolveTarget } from "./invocation.ts";
import { formatUsd, type ProgressOutput } from "./progress.ts";
import { conversationStart, invocationOptions } from "./run.ts";
import { terminalText } from "./terminal-text.ts";

export interface ReplIo {
  input: NodeJS.ReadableStream & { isTTY?: boolean };
  output: NodeJS.WritableStream & ProgressOutput;
  env: NodeJS.ProcessEnv;
  /** Registers what Ctrl-C does when it arrives as a signal (no terminal in raw mode). */
  onInterrupt(handler: () => void): void;
}

const HELP = `Each line you type is a turn: the agent works on it in the workspace, then commits.
  /diff   the changes so far
  /cost   what this conversation has cost
  /help   this text
  /exit   leave (Ctrl-D too). Ctrl-C stops the turn that is running, not the chat.
`;

const HISTORY_LINES = 500;

async function loadHistory(file: string): Promise<string[]> {
  const lines = (await readFile(file, "utf8").catch(() => "")).split("\n").filter(Boolean);
  const kept = lines.slice(-HISTORY_LINES);
  // The file only grows while chats append; it is cut back now and then.
  if (lines.length > 2 * HISTORY_LINES) {
    await writeFile(file, `${kept.join("\n")}\n`, { mode: 0o600 });
  }
  // readline wants the newest first.
  return kept.reverse();
}

export async function runRepl(args: InvocationArgs, io: ReplIo): Promise<number> {
  const options = invocationOptions(args, io.env, io.output);
  if (args.repo !== undefined) await resolveTarget(args.repo);
  const resuming = args.conversationId !== undefined || args.continueLatest;
  // A new conversation is made by the first line typed: its branch is named after it.
  let invocation = resuming
    ? await Invocation.open(options, conversationStart(args, ""))
    : undefined;
  // What is said includes the agent's diff.
  const say = (text: string) => io.output.write(terminalText(text));
  await mkdir(options.dataDir, { recursive: true });
  const historyFile = join(options.dataDir, "chat_history");
  const terminal = io.input.isTTY === true && io.output.isTTY === true;
  const rl = createInterface({
    input: io.input,
    output: io.output,
    terminal,
    history: await loadHistory(historyFile),
    historySize: HISTORY_LINES,
    prompt: "vmpilot> ",
  });
  const prompt = () => {
    if (terminal) rl.prompt();
  };
  let running: AbortController | undefined;
  const interrupt = () => {
    if (running) {
      running.abort();
      say("\nvmpilot: stopping this turn\n");
    } else {
      say("\n(/exit or Ctrl-D leaves)\n");
      prompt();
    }
  };
  rl.on("SIGINT", interrupt);
  io.onInterrupt(interrupt);
  if (!invocation) say("vmpilot: type a task to start a conversation; /help lists the commands\n");
  try {
    prompt();
    for await (const raw of rl) {
      const line = raw.trim();
      if (line) await appendFile(historyFile, `${line.replaceAll("\n", " ")}\n`, { mode: 0o600 });
      if (line === "/exit") break;
      if (line === "/help") say(HELP);
      else if (line === "/cost") {
        say(
          invocation
            ? `conversation ${invocation.conversation.id}: ${formatUsd(invocation.conversation.costUsd)} over ${invocation.conversation.turns} turns\n`
            : "nothing spent yet\n",
        );
      } else if (line === "/diff") {
        const diff = invocation ? await invocation.diff() : "";
        say(diff || "no changes yet\n");
      } else if (line.startsWith("/")) {
        say(`unknown command ${line.split(/\s/)[0]}; /help lists them\n`);
      } else if (line) {
        invocation ??= await Invocation.open(options, { firstTask: line });
        running = new AbortController();
        try {
          await invocation.turn(line, running.signal);
        } finally {
          running = undefined;
        }
      }
      prompt();
    }
  } finally {
    rl.close();
    await invocation?.close();
  }
  return 0;
}
