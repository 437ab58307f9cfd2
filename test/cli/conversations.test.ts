// Stored CLI conversations end to end, through the real binary: `run --continue`, `conversations`,
// and the
// `chat` REPL driven through a pipe, each against the Anthropic fake and the embedded database.
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EmbeddedPostgres } from "../../src/store/embedded.ts";
import {
  type AnthropicFake,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import {
  CLI as cli,
  vmpilot as execCli,
  git,
  scratchRepo,
  startSharedStore,
} from "../helpers/cli.ts";

function edit(oldStr: string, newStr: string) {
  return toolUse("str_replace_based_edit_tool", {
    command: "str_replace",
    path: "math.sh",
    old_str: oldStr,
    new_str: newStr,
  });
}

const noTests = toolUse("report_tests", { outcome: "not_run", explanation: "no test suite" });

/** Resolves once everything the stream printed so far contains `needle`. */
function printed(stream: Readable): (needle: string) => Promise<string> {
  let seen = "";
  const waiters = new Set<() => void>();
  stream.on("data", (data: Buffer) => {
    seen += data.toString();
    for (const wake of waiters) wake();
  });
  return (needle) =>
    new Promise((resolve, reject) => {
      const check = () => {
        if (!seen.includes(needle)) return;
        waiters.delete(check);
        resolve(seen);
      };
      stream.once("end", () => {
        if (!seen.includes(needle)) reject(new Error(`never printed "${needle}":\n${seen}`));
      });
      waiters.add(check);
      check();
    });
}

describe("stored CLI conversations", () => {
  let root: string;
  let fake: AnthropicFake;
  let env: Record<string, string>;
  let store: EmbeddedPostgres;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "vmpilot-conversations-"));
    store = await startSharedStore(join(root, "store"));
    fake = await startAnthropicFake();
    env = {
      PATH: process.env.PATH ?? "",
      HOME: root,
      ANTHROPIC_API_KEY: "sk-ant-test",
      ANTHROPIC_BASE_URL: fake.url,
      XDG_DATA_HOME: join(root, "xdg"),
    };
  });
  afterAll(async () => {
    await store.stop();
    await fake.close();
    await rm(root, { recursive: true, force: true });
  });

  const vmpilot = (args: string[]) => execCli(args, env);
  /** The file's shared store: the first test alone runs on the CLI's own, made on first use. */
  const shared = (args: string[]) => execCli(args, { ...env, DATABASE_URL: store.url });

  it("continues a conversation in a second invocation, on the same branch, with its history", async () => {
    const repo = await scratchRepo(await mkdtemp(join(root, "continue-")));
    fake.push(
      { content: [toolUse("bash", { command: "cat math.sh" })] },
      { content: [edit("$(($1 - $2))", "$(($1 + $2))")] },
      { content: [noTests] },
      { content: [text("Summary: Make add add")] },
    );
    const first = await vmpilot(["run", "--repo", repo, "make add add"]);
    expect(first.code).toBe(0);
    const firstRequests = fake.requests.length;

    fake.push(
      { content: [edit("add() {", "sub() { echo $(($1 - $2)); }\nadd() {")] },
      { content: [noTests] },
      { content: [text("Summary: Add sub")] },
    );
    const second = await vmpilot(["run", "--repo", repo, "--continue", "now also add sub"]);
    expect(second.stderr).toBe("");
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(
      /continuing conversation (\d+) \(1 turns, \$\d\.\d+ so far\) on branch vmpilot\/make-add-add/,
    );
    expect(fake.problems).toEqual([]);
    expect(fake.pending()).toBe(0);

    // The second run's first request carries the first conversation, tool calls included.
    const messages = fake.requests[firstRequests]?.body.messages;
    const sent = JSON.stringify(messages);
    expect(JSON.stringify(messages[0])).toContain("make add add");
    expect(sent).toContain('"name":"bash","input":{"command":"cat math.sh"}');
    expect(sent).toContain("add() { echo $(($1 - $2)); }");
    expect(JSON.stringify(messages.at(-1))).toContain("now also add sub");

    const branch = "vmpilot/make-add-add";
    expect(await git(repo, "log", "--format=%s", `main..${branch}`)).toBe("Add sub\nMake add add");
    expect(await git(repo, "show", `${branch}:math.sh`)).toBe(
      "sub() { echo $(($1 - $2)); }\nadd() { echo $(($1 + $2)); }",
    );

    const listed = await vmpilot(["conversations", "--repo", repo]);
    expect(listed.code).toBe(0);
    const [header, row] = listed.stdout.trim().split("\n");
    expect(header).toMatch(/^id\s+branch\s+turns\s+cost\s+last use \(UTC\)\s+first line$/);
    expect(row).toMatch(
      /^\d+\s+vmpilot\/make-add-add\s+2\s+\$\d\.\d+\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+make add add$/,
    );
    // Stored under the user's data dir, not the working directory.
    expect(await readFile(join(root, "xdg", "vmpilot", "pglite", "PG_VERSION"), "utf8")).toMatch(
      /\d/,
    );
  }, 90_000); // Three CLI processes, each with its own checkout: slow disks need more than the default.

  it("refuses, in one line with exit 2, a conversation that does not exist or is not there", async () => {
    const repo = await scratchRepo(await mkdtemp(join(root, "missing-")));
    const unknown = await shared(["run", "--conversation", "424242", "more"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(
      "vmpilot: no conversation 424242: `vmpilot conversations` lists them\n",
    );
    const nothing = await shared(["run", "--repo", repo, "--continue", "more"]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(
      /^vmpilot: no conversation for .*project yet: run without --continue to start one\n$/,
    );
  });

  it("runs a REPL from a pipe: turns, Ctrl-C stops only the running turn, /cost, /diff, /exit", async () => {
    const repo = await scratchRepo(await mkdtemp(join(root, "repl-")));
    const child = spawn(process.execPath, [cli, "chat", "--repo", repo], {
      env: { ...env, DATABASE_URL: store.url },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const out = printed(child.stdout);
    let errors = "";
    child.stderr.on("data", (data: Buffer) => {
      errors += data.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));

    fake.push(
      { content: [edit("$(($1 - $2))", "$(($1 + $2))")] },
      { content: [noTests] },
      { content: [text("Summary: Make add add")] },
    );
    child.stdin.write("make add add\n");
    await out("✔ committed");
    const conversationId = (await out("(conversation ")).match(/\(conversation (\d+):/)?.[1];

    // While the chat lives, it holds the conversation.
    const busy = await shared(["run", "--conversation", String(conversationId), "meanwhile"]);
    expect(busy.code).toBe(2);
    expect(busy.stderr).toMatch(
      new RegExp(
        `^vmpilot: conversation ${conversationId} is in use by [^:]+:${child.pid} since .*; wait for that run to end\\n$`,
      ),
    );

    child.stdin.write("/cost\n/diff\n");
    await out(`conversation ${conversationId}: $`);
    await out("+add() { echo $(($1 + $2)); }");

    fake.push({ content: [toolUse("bash", { command: "echo slow-start; sleep 600" })] });
    child.stdin.write("run the slow check\n");
    await out("→ $ echo slow-start; sleep 600");
    child.kill("SIGINT");
    await out("vmpilot: stopping this turn");
    await out("ended: cancelled");

    // A turn that changes nothing is answered in one reply, with no test report asked for.
    fake.push({ content: [text("Still here.\nSummary: Answer")] });
    child.stdin.write("are you still there?\n");
    await out("Still here.");
    await out("ended: end_turn");
    child.stdin.write("/exit\n");
    expect(await exited).toBe(0);
    child.stdin.end();
    expect(errors).toBe("");

    // The third turn's request carried the stopped turn, whose command was answered.
    const last = JSON.stringify(fake.requests.at(-1)?.body.messages);
    expect(last).toContain("run the slow check");
    expect(last).toContain("are you still there?");
    const history = await readFile(join(root, "xdg", "vmpilot", "chat_history"), "utf8");
    expect(history).toContain(
      "make add add\n/cost\n/diff\nrun the slow check\nare you still there?\n/exit\n",
    );
    expect(await git(repo, "log", "--format=%s", "main..vmpilot/make-add-add")).toContain(
      "Make add add",
    );

    // Ctrl-D (the end of the pipe) leaves too; --continue picks the conversation up again.
    const again = spawn(process.execPath, [cli, "chat", "--repo", repo, "--continue"], {
      env: { ...env, DATABASE_URL: store.url },
    });
    const againOut = printed(again.stdout);
    again.stdin.end("/help\n");
    expect(await new Promise((resolve) => again.once("exit", resolve))).toBe(0);
    expect(await againOut(`continuing conversation ${conversationId} (3 turns`)).toContain(
      "/diff   the changes so far",
    );

    // The chats let the conversation go: it continues from the command line.
    fake.push({ content: [noTests] }, { content: [text("Summary: Done")] });
    const resumed = await shared([
      "run",
      "--repo",
      repo,
      "--conversation",
      String(conversationId),
      "wrap up",
    ]);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toContain(`continuing conversation ${conversationId} (3 turns`);
    expect(fake.pending()).toBe(0);
    expect(fake.problems).toEqual([]);
  });
});
