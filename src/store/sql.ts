import { createHash } from "node:crypto";
import pg from "pg";

/** Anything that runs a query: the pool, or a client (say, one checked out for a transaction). */
export type Queryable = pg.Pool | pg.PoolClient | pg.Client;

/** Sends COMMIT now, behind the statements already sent; rejects if the server rolled back. */
export type Commit = () => Promise<void>;

/**
 * Runs fn inside BEGIN/COMMIT on one client. fn must use only that client: on the embedded
 * database a transaction holds the single backend, so a pool query inside it would wait forever.
 *
 * The pool pipelines (database.ts), so BEGIN goes out with fn's first query in one round trip,
 * and fn may call commit() right behind its last statements instead of waiting for them first.
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient, commit: Commit) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  // fn's first query, if fn sends it at once, joins BEGIN in the same write.
  process.nextTick(holdWrites(client));
  const begun = client.query("BEGIN");
  // Awaited below; until then a failure must not count as unhandled.
  begun.catch(() => {});
  let committed: Promise<void> | undefined;
  const commit: Commit = () => {
    if (!committed) {
      committed = client.query("COMMIT").then((result) => {
        // COMMIT after a failed statement ends the transaction as ROLLBACK, without an error.
        if (result.command !== "COMMIT") throw new Error("the transaction was rolled back");
      });
      committed.catch(() => {});
    }
    return committed;
  };
  let broken: Error | undefined;
  try {
    const result = await fn(client, commit);
    await begun;
    await commit();
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch((rollbackError: Error) => {
      broken = rollbackError;
    });
    throw error;
  } finally {
    client.release(broken);
  }
}

/**
 * Holds the client's writes until the returned function is called (it may be called again), so
 * statements given meanwhile go out in one write: one system call, and one wakeup of the server,
 * instead of one each. Nothing may wait for a reply in between: the query is not sent yet.
 */
export function holdWrites(client: pg.PoolClient): () => void {
  const stream = client.connection.stream;
  stream.cork();
  let held = true;
  return () => {
    if (held) stream.uncork();
    held = false;
  };
}

const connections = new WeakMap<object, number>();
let nextConnection = 0;

/**
 * The query as a prepared statement of this connection, so the server plans it once per
 * connection rather than on every call (measured: a quarter off the intake's transaction). A pool
 * gets a plain query, since it picks a connection per call. Names carry the connection and the
 * text's hash: the embedded database has one backend, shared by every connection, where two
 * connections preparing one name would collide.
 */
export function prepared(db: Queryable, text: string, values: unknown[]): pg.QueryConfig {
  if (db instanceof pg.Pool) return { text, values };
  let connection = connections.get(db);
  if (connection === undefined) {
    connection = ++nextConnection;
    connections.set(db, connection);
  }
  const hash = createHash("sha1").update(text).digest("hex").slice(0, 12);
  return { name: `vmpilot-${hash}-${connection}`, text, values };
}
