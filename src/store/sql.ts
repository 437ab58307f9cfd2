import type pg from "pg";

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
