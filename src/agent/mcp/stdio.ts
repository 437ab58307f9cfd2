// The MCP SDK's transport for a stdio server that runs in the job's workspace (Workspace.spawn):
// JSON-RPC messages, one per line, over the server's stdin and stdout. Nothing of the server is
// trusted: a line is refused once it passes MAX_LINE_BYTES (before it is held whole), what is not
// a JSON-RPC message is counted and dropped, a server that floods either is stopped, and the
// reason it ended (its exit code and the tail of its stderr) is kept for the model.
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import type { ProcessEnd, Workspace, WorkspaceProcess } from "../../workspace/types.ts";

/** One message from the server: a tool's answer, images included (5 MB each, in base64). */
const MAX_LINE_BYTES = 16 * 1024 * 1024;
/** Output that is not JSON-RPC a server may write (logs on stdout) before it is stopped. */
const MAX_GARBAGE_BYTES = 1024 * 1024;
/** What of the server's stderr is kept, for the error when it ends. */
const STDERR_TAIL = 1000;
/** What one message to the server may be: the model's arguments, as JSON. */
const MAX_SEND_BYTES = 1024 * 1024 - 1024;

export class WorkspaceStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  readonly #workspace: Workspace;
  readonly #command: string;
  readonly #signal: AbortSignal | undefined;
  #process: WorkspaceProcess | undefined;
  #line: Buffer[] = [];
  #lineBytes = 0;
  #garbage = 0;
  #garbageBytes = 0;
  #firstGarbage: string | undefined;
  #stderr = "";
  #problem: string | undefined;
  #closed = false;

  /** `command`: a shell command line, run in the checkout. */
  constructor(workspace: Workspace, command: string, signal?: AbortSignal) {
    this.#workspace = workspace;
    this.#command = command;
    this.#signal = signal;
  }

  async start(): Promise<void> {
    this.#process = await this.#workspace.spawn(this.#command, {
      onOutput: (stream, chunk) => {
        if (stream === "stdout") this.#read(chunk);
        else this.#stderr = (this.#stderr + chunk.toString("utf8")).slice(-STDERR_TAIL);
      },
      signal: this.#signal,
    });
    void this.#process.exited.then((end) => this.#ended(end));
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed || !this.#process)
      throw new Error(this.problem ?? "the server is not running");
    const line = `${JSON.stringify(message)}\n`;
    if (Buffer.byteLength(line) > MAX_SEND_BYTES) {
      throw new Error(`the message is over ${MAX_SEND_BYTES} bytes`);
    }
    await this.#process.write(line);
  }

  async close(): Promise<void> {
    if (!this.#process) {
      this.#ended({ code: null });
      return;
    }
    this.#process.kill();
    await this.#process.exited;
  }

  /**
   * Why the server is gone, in one line for the model: what it did wrong, else how it ended, with
   * the tail of its stderr. Undefined while it runs.
   */
  get problem(): string | undefined {
    return this.#problem;
  }

  /** Lines of its stdout that were not JSON-RPC messages, with the first one, shortened. */
  get garbage(): { lines: number; first?: string } {
    return { lines: this.#garbage, first: this.#firstGarbage };
  }

  #read(chunk: Buffer): void {
    let start = 0;
    for (let end = chunk.indexOf(10); end >= 0; end = chunk.indexOf(10, start)) {
      this.#take(chunk.subarray(start, end));
      const line = Buffer.concat(this.#line).toString("utf8");
      this.#line = [];
      this.#lineBytes = 0;
      start = end + 1;
      this.#message(line);
    }
    this.#take(chunk.subarray(start));
  }

  #take(part: Buffer): void {
    if (this.#problem !== undefined || part.length === 0) return;
    this.#lineBytes += part.length;
    if (this.#lineBytes > MAX_LINE_BYTES) {
      this.#stop(`it sent a message over ${MAX_LINE_BYTES / 1024 / 1024} MB`);
      return;
    }
    this.#line.push(part);
  }

  #message(line: string): void {
    if (this.#problem !== undefined || line.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(line));
    } catch {
      this.#garbage += 1;
      this.#firstGarbage ??= line.trim().slice(0, 200);
      this.#garbageBytes += line.length;
      if (this.#garbageBytes > MAX_GARBAGE_BYTES) {
        this.#stop("it wrote over 1 MB to stdout that is not JSON-RPC");
      }
      return;
    }
    this.onmessage?.(message);
  }

  #stop(problem: string): void {
    this.#problem ??= problem;
    this.onerror?.(new Error(problem));
    this.#process?.kill();
  }

  #ended(end: ProcessEnd): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#problem === undefined) {
      const how =
        end.error !== undefined
          ? end.error
          : end.code === null
            ? "it was stopped"
            : `it exited with code ${end.code}`;
      const stderr = this.#stderr.trim();
      this.#problem = stderr ? `${how}; its stderr ended with: ${stderr}` : how;
    }
    this.onclose?.();
  }
}
