// Entry of the workspace agent process (`node src/workspace/agent/main.ts`), configured by its
// environment: the secret in VMPILOT_AGENT_SECRET or in the file VMPILOT_AGENT_KEY_FILE names
// (read, then removed; at least 32 characters), VMPILOT_AGENT_ROOT (the checkout),
// VMPILOT_AGENT_HOME, and VMPILOT_AGENT_LISTEN: `host:port` (a VM's private address) or an
// absolute unix socket path; optionally VMPILOT_AGENT_DEADLINE_SECONDS, and
// VMPILOT_AGENT_COMMAND_USER (`uid:gid`, see identity.ts), without which commands run as the
// agent's own uid, and VMPILOT_AGENT_COMMAND_SANDBOX=1: each command in a bubblewrap sandbox of
// its own, where it cannot reach the agent even as the same uid (the `local` engine,
// agent/local.ts). Prints "ready" once it listens.
import { readFileSync, rmSync } from "node:fs";
import { baseEnv } from "../process/env.ts";
import { launchHere } from "../process/launcher.ts";
import { programPath } from "../process/program.ts";
import { commandSandbox } from "../sandbox/bwrap.ts";
import { becomeCommandUser, commandUserProblem, parseCommandUser } from "./identity.ts";
import { createAgentServer } from "./server.ts";

const env = process.env;
const keyFile = env.VMPILOT_AGENT_SECRET ? undefined : env.VMPILOT_AGENT_KEY_FILE;
const secret = keyFile ? readFileSync(keyFile, "utf8").trim() : (env.VMPILOT_AGENT_SECRET ?? "");
const root = env.VMPILOT_AGENT_ROOT ?? "";
const listen = env.VMPILOT_AGENT_LISTEN ?? "";
const deadline = Number(env.VMPILOT_AGENT_DEADLINE_SECONDS ?? 0);
const commandUser = env.VMPILOT_AGENT_COMMAND_USER
  ? parseCommandUser(env.VMPILOT_AGENT_COMMAND_USER)
  : undefined;
const nested = env.VMPILOT_AGENT_COMMAND_SANDBOX === "1";
// Never changing its user, the agent is as small a process to fork from as a launcher would be.
if (!commandUser) launchHere();
// Commands never see the agent's own environment; it is dropped here all the same.
delete env.VMPILOT_AGENT_SECRET;
if (
  secret.length < 32 ||
  !root.startsWith("/") ||
  !listen ||
  !Number.isInteger(deadline) ||
  deadline < 0 ||
  (env.VMPILOT_AGENT_COMMAND_USER && !commandUser)
) {
  console.error(
    "vmpilot-agent: set VMPILOT_AGENT_SECRET (32+ characters), VMPILOT_AGENT_ROOT (absolute) and VMPILOT_AGENT_LISTEN; VMPILOT_AGENT_DEADLINE_SECONDS is a whole number; VMPILOT_AGENT_COMMAND_USER is uid:gid, not root",
  );
  process.exit(2);
}
const problem = commandUser
  ? commandUserProblem(process.getuid?.() ?? -1, readFileSync("/proc/self/status", "utf8"))
  : undefined;
if (problem) {
  console.error(
    `vmpilot-agent: commands cannot run as VMPILOT_AGENT_COMMAND_USER: ${problem}. Run the agent as root with CAP_SETUID, CAP_SETGID and CAP_KILL and no_new_privs (the workspace image's entry and the Kubernetes pod spec ask for that), or unset VMPILOT_AGENT_COMMAND_USER to let commands run as the agent's own uid, where they can stop it and read its secret.`,
  );
  process.exit(2);
}
// Commands start from the allow-listed environment, plus the egress proxy the agent was given.
const proxy = Object.fromEntries(
  Object.entries(env).filter(
    (entry): entry is [string, string] =>
      /^(https?|all|no)_proxy$/i.test(entry[0]) || entry[0] === "NODE_USE_ENV_PROXY",
  ),
);
const log = (line: Record<string, unknown>) =>
  console.error(JSON.stringify({ time: new Date().toISOString(), ...line }));
const server = createAgentServer({
  root,
  secret,
  env: { ...baseEnv(env.VMPILOT_AGENT_HOME ?? "/tmp"), ...proxy },
  log,
  // The backstop for a worker or CLI that never comes back to destroy the VM: the agent exits,
  // and a Fly Machine (auto_destroy, no restart) is destroyed with it. It counts from the
  // checkout, so a VM that waited in a warm pool still gives its job the whole time.
  onCheckout: () => setDeadline(),
  commandUser,
  commandSandbox: nested ? commandSandbox(programPath("bwrap")) : undefined,
});
// After the server: its first waiting shell started the process launcher, which stays root to
// start and stop commands as the command user.
if (commandUser) becomeCommandUser(commandUser);
else if (!nested) {
  log({
    msg: "commands run as the agent's own uid: they can stop the agent and read its secret; set VMPILOT_AGENT_COMMAND_USER",
  });
}
if (keyFile) rmSync(keyFile, { force: true });
let timer: NodeJS.Timeout | undefined;
function setDeadline(): void {
  if (deadline === 0) return;
  clearTimeout(timer);
  timer = setTimeout(() => {
    log({ msg: "the workspace's deadline passed; the agent stops", seconds: deadline });
    server.close(() => process.exit(0));
    server.closeAllConnections();
  }, deadline * 1000);
}
setDeadline();
if (listen.startsWith("/")) {
  server.listen(listen);
} else {
  const colon = listen.lastIndexOf(":");
  server.listen(Number(listen.slice(colon + 1)), listen.slice(0, colon).replace(/^\[|\]$/g, ""));
}
server.once("listening", () => console.log("ready"));
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => server.close(() => process.exit(0)));
}
