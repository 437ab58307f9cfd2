import type { PGlite } from "@electric-sql/pglite";

// Extended-protocol messages that leave a batch open until the client's Sync.
const BATCH_MESSAGES = new Set(["P", "B", "D", "E", "C", "H"].map((c) => c.charCodeAt(0)));
const BATCH_ENDS = new Set(["S", "Q", "X"].map((c) => c.charCodeAt(0)));
const SYNC = new Uint8Array([0x53, 0, 0, 0, 4]);

/**
 * PGlite has one backend session; pglite-socket shares it between connections and keeps one
 * connection's messages together only while a transaction is open. An extended-protocol query is
 * several messages (Parse, Bind, Execute, Sync), and a large one reaches the server in several
 * reads: another connection's Parse landing in between would replace the unnamed statement the
 * first connection's Bind then binds to. Reporting an open batch as an open transaction makes the
 * server keep the batch's connection in charge until its Sync.
 */
export function serializeSessions(pglite: PGlite): PGlite {
  let batchOpen = false;
  const view = {
    waitReady: pglite.waitReady,
    isInTransaction: () => batchOpen || pglite.isInTransaction(),
    runExclusive: <T>(fn: () => Promise<T>) => pglite.runExclusive(fn),
    async execProtocolRawStream(
      message: Uint8Array,
      options: Parameters<PGlite["execProtocolRawStream"]>[1],
    ) {
      const type = message[0] ?? 0;
      if (BATCH_MESSAGES.has(type)) batchOpen = true;
      try {
        return await pglite.execProtocolRawStream(message, options);
      } finally {
        if (BATCH_ENDS.has(type)) batchOpen = false;
      }
    },
    // The server's clean-up when a connection drops in the middle: end its batch before the
    // ROLLBACK, which the backend would otherwise skip while it waits for that batch's Sync.
    async exec(sql: string) {
      if (batchOpen) {
        await pglite.execProtocolRaw(SYNC);
        batchOpen = false;
      }
      return pglite.exec(sql);
    },
  };
  // The socket server uses only the members above.
  return view as unknown as PGlite;
}
