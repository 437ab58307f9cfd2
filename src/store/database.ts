import pg from "pg";
import { type Logger, silentLogger } from "../log/logger.ts";
import { startEmbeddedPostgres } from "./embedded.ts";
import { migrate } from "./migrate.ts";

export interface Database {
  pool: pg.Pool;
  /** Connection string, also for the embedded server, so pg-boss and other processes can reach it. */
  url: string;
  embedded: boolean;
  /** The embedded database's process, whose memory is PGlite's. */
  embeddedPid?: number;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** A PostgreSQL URL; without it PGlite runs embedded under dataDir. */
  databaseUrl?: string;
  /** Where the embedded database lives; "memory://" keeps it in memory (tests). */
  dataDir: string;
  logger?: Logger;
  /** Pool size for the app's own queries (pg-boss has its own pool). Default 10. */
  poolSize?: number;
  /** Apply pending migrations before returning. Default true. */
  migrate?: boolean;
}

export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  const logger = options.logger ?? silentLogger;
  const embedded = options.databaseUrl
    ? undefined
    : await startEmbeddedPostgres(options.dataDir, logger);
  const url = options.databaseUrl ?? (embedded?.url as string);
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    // Statements given to one client together go out together (withTransaction): a webhook's
    // transaction takes two round trips instead of five (bench/intake.ts).
    pipeline: true,
    // The embedded database's one backend keeps each connection's prepared statements (sql.ts)
    // after it closes: connections that live as long as the pool keep their number bounded.
    ...(embedded ? { idleTimeoutMillis: 0 } : {}),
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on("error", (error) => logger.warn({ err: error }, "idle database connection failed"));
  const close = async () => {
    await pool.end();
    await embedded?.stop();
  };
  try {
    if (options.migrate ?? true) await migrate(pool, { logger });
  } catch (error) {
    await close();
    throw error;
  }
  if (embedded) {
    logger.info(
      { dataDir: options.dataDir, pid: embedded.pid },
      "embedded PGlite database started",
    );
  }
  return { pool, url, embedded: embedded !== undefined, embeddedPid: embedded?.pid, close };
}
