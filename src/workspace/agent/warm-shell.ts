// A bash started ahead of its command, waiting on stdin for the directory and the command.
// Starting a process is most of what a short command costs (measured here: a `bash -c true`
// takes ~10 ms, the same `true` in a shell already started ~1.5 ms), and the model's turn between
// two commands hides the next shell's start. Each shell runs one command, in its own process
// group, with the environment it started with, so a command sees what `bash -c` would give it:
// the same variables, cwd, stdin, open files and exit status (test/workspace/warm-shell.test.ts).
// A shell killed while it waits is noticed when the launcher reports its exit; one that dies in
// the moment before its command arrives fails that one command as killed. A shell starts at / and
// enters the command's directory itself: as the command user (agent/identity.ts) it may enter a
// directory the launcher, root without CAP_DAC_READ_SEARCH, may not.
//
// With a command user (a VM's agent) nothing of a command outlives it, as a PID namespace ensures
// for the `local` engine's: once no command runs, a process of the command user signals every
// process it may (`kill -KILL -1`), which is everything of that user's but itself and never the
// agent, whose real uid is root. So a process that left its command's process group (`setsid -f`)
// can neither watch nor meddle with the next command, nor the git steps of the job.

import {
  type Launched,
  launch,
  launchAndCollect,
  type OutputHandler,
} from "../process/launcher.ts";
import { programPath } from "../process/program.ts";
import { type RunOptions, runProcess, runStarted } from "../process/run.ts";
import type { Owner } from "../sandbox/owner.ts";
import type { ExecResult } from "../types.ts";

// The command's own variables are unset before it runs; `exec </dev/null` gives it what a cold
// start gives, and the shell's stdin (the agent's pipe) is closed. Should the kernel have to kill
// a process for memory, a command's go first: the agent's going would end the whole workspace.
const PRELUDE =
  'echo 1000 2>/dev/null >/proc/self/oom_score_adj; IFS= read -r -d "" d && IFS= read -r -d "" c && cd -- "$d" && exec </dev/null || exit 126; unset d OLDPWD; eval "unset c; $c"';
/** A process talked to over its stdin: the directory and the command come as arguments. */
const SPAWNED =
  'echo 1000 2>/dev/null >/proc/self/oom_score_adj; cd -- "$1" || exit 126; unset OLDPWD; eval "$2"';

interface Spare {
  env: Record<string, string>;
  started: Launched;
  exited: boolean;
  /** Where its output goes once taken; nothing is expected before. */
  setSink(handler: OutputHandler): void;
}

export interface WarmShell {
  /**
   * Starts a shell with `env` to wait for the next command, unless one already waits; after each
   * command, the next one is started with the `env` last given here.
   */
  warm(env: Record<string, string>): void;
  /**
   * Runs `command` like `bash -c` would: in the waiting shell when it has this `env`, else in one
   * started for it.
   */
  run(
    command: string,
    cwd: string,
    env: Record<string, string>,
    options: RunOptions,
  ): Promise<ExecResult>;
  /**
   * Starts `command` like `bash -c` would, in `cwd`, its stdin kept open for `write`: a process
   * talked to while it runs (an MCP server). Until it ends it counts as a running command, so the
   * sweep of the command user's processes waits for it as for any other.
   */
  spawn(
    command: string,
    cwd: string,
    env: Record<string, string>,
    onOutput: OutputHandler,
  ): Promise<Launched>;
  /** Ends the shell waiting for a command. */
  close(): void;
}

/**
 * `user`: who commands run as (agent/identity.ts); default the agent's own uid. `sandbox`: a
 * program and its arguments each shell starts under (bwrap.ts, commandSandbox).
 */
export function createWarmShell(user?: Owner, sandbox: readonly string[] = []): WarmShell {
  /** `bash` with `args`, under the sandbox when there is one. */
  const shell = (args: string[]) => {
    const [file = "bash", ...rest] = [...sandbox, "bash", ...args];
    return { file, args: rest, user };
  };
  let spare: Spare | undefined;
  /** The environment most commands run with (the agent's), which the waiting shell is started with. */
  let base: Record<string, string> | undefined;
  let closed = false;
  /** Commands running now; the sweep waits for none to run, and the next command for the sweep. */
  let running = 0;
  let sweeping: Promise<void> | undefined;

  /** A shell given its directory and command now (`input`), or waiting for them. */
  function start(env: Record<string, string>, onOutput: OutputHandler, input?: string): Launched {
    const later = input === undefined ? { inputLater: true } : { input };
    const spec = { ...shell(["-c", PRELUDE]), cwd: "/", env, group: true };
    return launch({ ...spec, ...later }, onOutput);
  }

  function prepare(env: Record<string, string>): void {
    let sink: OutputHandler = () => {};
    const started = start(env, (stream, chunk) => sink(stream, chunk));
    const next: Spare = {
      env,
      started,
      exited: false,
      setSink(handler) {
        sink = handler;
      },
    };
    const gone = () => {
      next.exited = true;
      if (spare === next) spare = undefined;
    };
    started.done.then(gone, gone);
    spare = next;
  }

  function warm(env: Record<string, string>): void {
    base = env;
    if (closed || sweeping || (spare && spare.env === env && !spare.exited)) return;
    spare?.started.kill();
    prepare(env);
  }

  /** The waiting shell when it has `env`; one with another environment waits on for its own. */
  function take(env: Record<string, string>): Spare | undefined {
    if (!spare || spare.env !== env || spare.exited) return undefined;
    const taken = spare;
    spare = undefined;
    return taken;
  }

  /** Kills every process of the command user; the waiting shell is one. */
  async function sweep(owner: Owner): Promise<void> {
    spare?.started.kill();
    spare = undefined;
    // No process left to signal is fine: bash says so, and that is all.
    await launchAndCollect({
      file: programPath("bash"),
      args: ["-c", "kill -KILL -1"],
      cwd: "/",
      env: {},
      group: false,
      user: owner,
    });
  }

  async function runOne(
    command: string,
    cwd: string,
    env: Record<string, string>,
    options: RunOptions,
    onStart: (started: Launched) => void,
  ): Promise<ExecResult> {
    // A NUL byte would cut the shell's input short: the launcher refuses it as an argument.
    if (command.includes("\0") || cwd.includes("\0")) {
      return runProcess({ ...shell(["-c", command]), cwd, env }, options);
    }
    const taken = take(env);
    const input = `${cwd}\0${command}\0`;
    return runStarted((onOutput) => {
      if (taken) {
        taken.setSink(onOutput);
        taken.started.write(input);
      }
      const started = taken?.started ?? start(env, onOutput, input);
      onStart(started);
      return started;
    }, options);
  }

  /** A command starts running; the function it returns says, once, that it ended. */
  async function begin(): Promise<() => void> {
    while (sweeping) await sweeping;
    running += 1;
    let ran = true;
    return () => {
      if (!ran) return;
      ran = false;
      running -= 1;
      if (user && running === 0) {
        sweeping = sweep(user).finally(() => {
          sweeping = undefined;
        });
      }
    };
  }

  return {
    warm,
    async run(command, cwd, env, options) {
      // Once the command's shell exited, not once its output ended: what it left running may
      // hold the output's pipes.
      const end = await begin();
      try {
        return await runOne(command, cwd, env, options, (started) => {
          started.ended.then(end);
        });
      } finally {
        end();
        await sweeping;
        // Only now: the launcher is busy while it starts a process, and would hold back the exit
        // of a command that ends meanwhile. And only once this result is on its way: a process
        // that starts its children itself waits for each to start.
        const next = base;
        if (next) setImmediate(() => warm(next));
      }
    },
    async spawn(command, cwd, env, onOutput) {
      const end = await begin();
      try {
        const args = ["-c", SPAWNED, "vmpilot-process", cwd, command];
        const started = launch(
          { ...shell(args), cwd: "/", env, group: true, stream: true },
          onOutput,
        );
        started.ended.then(end);
        started.done.then(end, end);
        return started;
      } catch (error) {
        end();
        throw error;
      }
    },
    close() {
      closed = true;
      spare?.started.kill();
      spare = undefined;
    },
  };
}
