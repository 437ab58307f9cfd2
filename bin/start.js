// `npm start`: the server (src/main.ts), without a build step.
import { runTypeScript } from "./typescript.js";

const { main } = await runTypeScript(new URL("../src/main.ts", import.meta.url).href);
await main();
