// `npm start`: the server (src/main.ts), without a build step. What to start is read first, by a
// module that loads little, so that a mistake in it is told at once (src/roles/startup.ts).
import { runTypeScript } from "./typescript.js";

const { readStartup } = await runTypeScript(
  new URL("../src/roles/startup.ts", import.meta.url).href,
);
const startup = readStartup(process.argv.slice(2));
const { main } = await runTypeScript(new URL("../src/main.ts", import.meta.url).href);
await main(startup);
