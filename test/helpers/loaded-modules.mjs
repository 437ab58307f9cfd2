// Preloaded with --import: writes the URL of every module the process loaded, one a line, to
// LOADED_MODULES_FILE as it exits.
import { writeFileSync } from "node:fs";
import { registerHooks } from "node:module";

const loaded = [];
registerHooks({
  load(url, context, next) {
    loaded.push(url);
    return next(url, context);
  },
});
process.on("exit", () => writeFileSync(process.env.LOADED_MODULES_FILE, loaded.join("\n")));
