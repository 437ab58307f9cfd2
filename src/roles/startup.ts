// What `npm start` is asked to run, read before the server's modules load (bin/start.js): a
// mistake in the configuration or the arguments is told in a fifth of a second, not after the
// server's some 1,700 modules have loaded (a core-second and more on a small machine).
import { parseArgs } from "node:util";
import { type Config, loadConfig, loadDotEnv } from "../config/env.ts";
import { routeModel } from "../config/model-route.ts";
import { redact } from "../log/redact.ts";

export const ROLES = ["web", "worker", "all"] as const;
export type Role = (typeof ROLES)[number];

export interface Startup {
  config: Config;
  role: Role;
}

/** The configuration (.env read in) and the role; else each problem on stderr, and exit 1. */
export function readStartup(argv: string[]): Startup {
  loadDotEnv();
  const loaded = loadConfig();
  if ("problems" in loaded) refuse(...loaded.problems.map((p) => `invalid configuration: ${p}`));
  const { config } = loaded;
  for (const warning of loaded.warnings) console.warn(`vmpilot: ${warning}`);
  const { values } = parseArgs({ args: argv, options: { role: { type: "string" } } });
  const role = values.role ?? "all";
  if (!(ROLES as readonly string[]).includes(role)) {
    refuse(`failed to start: --role must be one of ${ROLES.join(", ")}, not "${redact(role)}"`);
  }
  // Without an app (Probot's setup page) no job runs yet.
  if (
    config.appId !== undefined &&
    role !== "web" &&
    !config.anthropicApiKey &&
    routeModel(config.model, config.providers).provider === "anthropic"
  ) {
    refuse(
      "invalid configuration: ANTHROPIC_API_KEY: is required to run jobs on Anthropic's models (or set VMPILOT_MODEL to another provider's model, or start with --role web)",
    );
  }
  return { config, role: role as Role };
}

/** Each problem on stderr, one a line, and exit 1. */
function refuse(...problems: string[]): never {
  for (const problem of problems) console.error(`vmpilot: ${problem}`);
  process.exit(1);
}
