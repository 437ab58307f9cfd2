#!/usr/bin/env node
// Loads the TypeScript CLI through tsx so `npx vmpilot` works from a checkout without a build step.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
