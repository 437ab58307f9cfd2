import { dirname } from "node:path";

/** Where the running Node lives, so commands use the same Node as the worker. */
export const NODE_BIN_DIR = dirname(process.execPath);

const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Names a caller may pass through `ExecOptions.env`. Anything that looks like a credential is refused. */
const SECRET_NAME = /(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|CREDENTIALS?)($|_)/i;

/**
 * The environment every command starts from. Built from constants, never from the worker's own
 * environment, so tokens and keys cannot leak into a workspace by accident.
 */
export function baseEnv(home: string): Record<string, string> {
  return {
    PATH: `${NODE_BIN_DIR}:${SYSTEM_PATH}`,
    HOME: home,
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
    TERM: "dumb",
    CI: "1",
    TMPDIR: "/tmp",
    // Tools that page or prompt would hang a non-interactive command.
    PAGER: "cat",
    GIT_PAGER: "cat",
    GIT_TERMINAL_PROMPT: "0",
    NO_COLOR: "1",
    npm_config_update_notifier: "false",
  };
}

/** Adds caller-chosen variables, refusing names that look like credentials. */
export function withExtraEnv(
  base: Record<string, string>,
  extra: Record<string, string> | undefined,
): Record<string, string> {
  if (!extra) return base;
  for (const name of Object.keys(extra)) {
    if (SECRET_NAME.test(name)) {
      throw new Error(`Refusing to pass ${name} into a workspace: it looks like a credential`);
    }
  }
  return { ...base, ...extra };
}

/** What points a command's HTTP clients at the allow-list proxy (in the sandbox, or the worker's). */
export function proxyEnv(url: string): Record<string, string> {
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    ALL_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    all_proxy: url,
    NO_PROXY: "localhost,127.0.0.1,::1",
    no_proxy: "localhost,127.0.0.1,::1",
    // Node's own fetch only honours the variables above when asked to.
    NODE_USE_ENV_PROXY: "1",
  };
}
