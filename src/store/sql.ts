import { createHash } from "node:crypto";
import pg from "pg";

/** Anything that runs a query: the pool, or a client (say, one checked out for a transaction). */
export type Queryable = pg.Pool | pg.PoolClient | pg.Client;

/**
 * Runs fn inside BEGIN/COMMIT on one client. fn must use only that client: on the embedded
 * database a transaction holds the single backend, so a pool query inside it would wait forever.
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN");
    const result = await fn(client);
    await client.query("COMMIT");
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
