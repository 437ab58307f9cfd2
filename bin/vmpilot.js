#!/usr/bin/env node
// The CLI, from a checkout or an install, without a build step.
import { runTypeScript } from "./typescript.js";

await runTypeScript(new URL("../src/cli/main.ts", import.meta.url).href);
