import { mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

// A Unix socket's path must fit in 108 bytes, its terminating NUL included.
const MAX_SOCKET_PATH = 107;

export interface SocketPath {
  path: string;
  /** Takes away the link it went through, if any. */
  remove(): Promise<void>;
}

/**
 * A path to the socket `name` in `dir` that a Unix socket address can hold: through a link in a
 * private temporary directory when `dir` lies deeper, as under a long DATA_DIR.
 */
export async function socketPathIn(dir: string, name: string): Promise<SocketPath> {
  const path = join(dir, name);
  if (Buffer.byteLength(path) <= MAX_SOCKET_PATH) return { path, remove: async () => {} };
  // mkdtemp makes it 0700: nobody else can swap the link.
  const links = await mkdtemp(join(tmpdir(), "vmpilot-socket-"));
  await symlink(dir, join(links, "dir"));
  const short = join(links, "dir", name);
  if (Buffer.byteLength(short) > MAX_SOCKET_PATH) {
    await rm(links, { recursive: true, force: true });
    throw new Error(`no path to ${path} fits a Unix socket: TMPDIR is too deep`);
  }
  return { path: short, remove: () => rm(links, { recursive: true, force: true }) };
}
