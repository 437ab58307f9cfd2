import { constants, createWriteStream, type Stats } from "node:fs";
import { open } from "node:fs/promises";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";

/** A file the worker will not read: not a regular file, or larger than the caller's cap. */
export class FileRefusedError extends Error {
  /** The file would be refused again: a job that needs it (its bundle, say) fails at once. */
  readonly permanent = true;
  readonly path: string;
  readonly reason: "directory" | "special" | "too_large";
  // Fields, not parameter properties: the workspace agent runs this file with type stripping.
  constructor(path: string, reason: "directory" | "special" | "too_large", detail: string) {
    super(`${path} ${detail}`);
    this.path = path;
    this.reason = reason;
    this.name = "FileRefusedError";
  }
}

function kind(info: Stats): string {
  if (info.isFIFO()) return "a FIFO";
  if (info.isCharacterDevice()) return "a character device";
  if (info.isBlockDevice()) return "a block device";
  if (info.isSocket()) return "a socket";
  return "a special file";
}

/** Opened without following a last symlink or waiting on a FIFO; fstat then tells what it is. */
const SAFE_OPEN = constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Writes `data` to `target` only if it is (or becomes) a regular file. A FIFO without a reader
 * fails the open (ENXIO) instead of blocking a libuv thread.
 */
export async function writeRegular(target: string, shown: string, data: string | Buffer) {
  const handle = await open(target, constants.O_WRONLY | constants.O_CREAT | SAFE_OPEN, 0o666);
  try {
    const info = await handle.stat();
    if (!info.isFile()) {
      throw new FileRefusedError(shown, "special", `is not a regular file (${kind(info)}).`);
    }
    await handle.truncate(0);
    await handle.writeFile(data);
  } finally {
    await handle.close();
  }
}

/**
 * Opens the regular file at `target` for reading, checking before anything is read. O_NONBLOCK
 * keeps a FIFO from blocking the open (and a libuv thread with it); O_NOFOLLOW and fstat on the
 * open descriptor mean a swapped-in symlink or special file is seen, not raced. `shown` names the
 * file in errors, so the host path never reaches the model.
 */
async function openRegular(target: string, shown: string, maxBytes: number) {
  const handle = await open(target, constants.O_RDONLY | SAFE_OPEN);
  try {
    const info = await handle.stat();
    if (info.isDirectory()) throw new FileRefusedError(shown, "directory", "is a directory.");
    if (!info.isFile()) {
      throw new FileRefusedError(shown, "special", `is not a regular file (${kind(info)}).`);
    }
    if (info.size > maxBytes) {
      throw new FileRefusedError(
        shown,
        "too_large",
        `is ${info.size} bytes, over the ${maxBytes}-byte limit.`,
      );
    }
    return { handle, size: info.size };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

const grew = (shown: string) =>
  new FileRefusedError(shown, "too_large", "grew while it was being read.");

/** Reads at most `maxBytes` of the regular file at `target` (see openRegular). */
export async function readCapped(target: string, shown: string, maxBytes: number): Promise<Buffer> {
  const { handle, size } = await openRegular(target, shown, maxBytes);
  try {
    // The file may grow after fstat; one byte past its size tells that apart.
    const buffer = Buffer.alloc(size + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > size) throw grew(shown);
    return buffer.subarray(0, length);
  } finally {
    await handle.close();
  }
}

/**
 * Copies the regular file at `target` to the new file `dest`, as readCapped would read it but
 * through a stream: a file of hundreds of megabytes (a bundle) never sits in memory.
 */
export async function copyCapped(
  target: string,
  shown: string,
  dest: string,
  maxBytes: number,
): Promise<void> {
  const { handle, size } = await openRegular(target, shown, maxBytes);
  let copied = 0;
  const count = new Transform({
    transform(chunk: Buffer, _encoding, next) {
      copied += chunk.length;
      next(copied > size ? grew(shown) : null, chunk);
    },
  });
  try {
    // `end` is inclusive: one byte past the size tells a growing file apart.
    const source = handle.createReadStream({ start: 0, end: size, autoClose: false });
    await pipeline(source, count, createWriteStream(dest, { flags: "wx", mode: 0o600 }));
  } finally {
    await handle.close();
  }
}
