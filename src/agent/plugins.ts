import { access, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { PermanentError } from "../errors.ts";
import type { ContextHook, FinishCheck, PluginTool } from "./plugin-api.ts";

/** The plugins shipped with vmpilot. */
const DEFAULT_PLUGIN_DIR = fileURLToPath(new URL("../../plugins", import.meta.url));

/** Plugins a run enables unless told otherwise; code_review is for review runs. */
export const DEFAULT_ENABLED_PLUGINS: readonly string[] = ["project", "testing", "documentation"];

export interface Plugin {
  name: string;
  description: string;
  /** README body: guidance that goes into the system prompt when the plugin is enabled. */
  guidance: string;
  tools: PluginTool[];
  finishCheck?: FinishCheck;
  context?: ContextHook;
}

const NAME = /^[a-z][a-z0-9_-]{0,63}$/;
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

const frontMatterSchema = z.object({
  name: z.string().regex(NAME, "must be lowercase letters, digits, _ or -"),
  description: z.string().trim().min(1, "must not be empty").max(300),
});

const toolSchema = z.object({
  name: z.string().regex(TOOL_NAME, "must be 1-64 letters, digits, _ or -"),
  description: z.string().min(1),
  input_schema: z.looseObject({ type: z.literal("object") }),
  runsIn: z.enum(["workspace", "worker"]),
  handler: z.custom<PluginTool["handler"]>((h) => typeof h === "function", "must be a function"),
});

export class PluginError extends PermanentError {
  override name = "PluginError";
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

function parseReadme(
  dir: string,
  text: string,
): { meta: z.infer<typeof frontMatterSchema>; body: string } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/.exec(text);
  if (!match)
    throw new PluginError(
      `${dir}/README.md must start with front matter (--- name, description ---)`,
    );
  const parsed = frontMatterSchema.safeParse(parseYaml(match[1] as string));
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ");
    throw new PluginError(`${dir}/README.md front matter: ${issues}`);
  }
  return { meta: parsed.data, body: (match[2] as string).trim() };
}

async function loadModule(path: string): Promise<Record<string, unknown>> {
  return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
}

async function loadPlugin(root: string, dir: string): Promise<Plugin> {
  const folder = join(root, dir);
  const { meta, body } = parseReadme(dir, await readFile(join(folder, "README.md"), "utf8"));
  if (meta.name !== dir) {
    throw new PluginError(
      `plugins/${dir}/README.md names itself ${JSON.stringify(meta.name)}; it must match the folder`,
    );
  }
  const plugin: Plugin = {
    name: meta.name,
    description: meta.description,
    guidance: body,
    tools: [],
  };

  const toolsFile = join(folder, "tools.ts");
  if (await exists(toolsFile)) {
    const mod = await loadModule(toolsFile);
    const tools = z.array(toolSchema).safeParse(mod.tools ?? []);
    if (!tools.success) {
      const issues = tools.error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ");
      throw new PluginError(`plugins/${dir}/tools.ts: ${issues}`);
    }
    plugin.tools = mod.tools as PluginTool[];
    if (mod.finishCheck !== undefined) {
      if (typeof mod.finishCheck !== "function")
        throw new PluginError(`plugins/${dir}/tools.ts: finishCheck must be a function`);
      plugin.finishCheck = mod.finishCheck as FinishCheck;
    }
  }
  const contextFile = join(folder, "context.ts");
  if (await exists(contextFile)) {
    const mod = await loadModule(contextFile);
    if (typeof mod.context !== "function")
      throw new PluginError(`plugins/${dir}/context.ts must export a context function`);
    plugin.context = mod.context as ContextHook;
  }
  return plugin;
}

/** Finds every `plugins/<name>/README.md` (with its optional tools.ts and context.ts), sorted by name. */
export async function discoverPlugins(root = DEFAULT_PLUGIN_DIR): Promise<Plugin[]> {
  const entries = await readdir(root, { withFileTypes: true });
  const dirs = entries.filter((e) => e.isDirectory()).map((e) => e.name);
  const found: Plugin[] = [];
  for (const dir of dirs.sort()) {
    if (await exists(join(root, dir, "README.md"))) found.push(await loadPlugin(root, dir));
  }
  const owners = new Map<string, string>();
  for (const plugin of found) {
    for (const tool of plugin.tools) {
      const other = owners.get(tool.name);
      if (other)
        throw new PluginError(`tool ${tool.name} is defined by both ${other} and ${plugin.name}`);
      owners.set(tool.name, plugin.name);
    }
  }
  return found;
}

/** The plugins a run enables, in the order given; unknown names are an error. */
export function selectPlugins(available: readonly Plugin[], enabled: readonly string[]): Plugin[] {
  return enabled.map((name) => {
    const plugin = available.find((p) => p.name === name);
    if (!plugin) {
      const known = available.map((p) => p.name).join(", ");
      throw new PluginError(`unknown plugin ${JSON.stringify(name)} (available: ${known})`);
    }
    return plugin;
  });
}
