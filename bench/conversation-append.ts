// Conversation append cost: the time of appendMessage when the conversation holds 10 messages
// against when it holds
// 1000. Appending must not touch earlier history, so the ratio should stay near 1 (goal <= 1.5x).
// Runs on embedded PGlite, and on PostgreSQL when TEST_DATABASE_URL is set.
import type { Database } from "../src/store/database.ts";
import { appendMessage } from "../src/store/messages.ts";
import { databases, seedConversation } from "../test/helpers/db.ts";

const CONVERSATIONS = 60;
const SIZES = [10, 1000] as const;
const CONTENT = [
  { type: "text", text: "Ran the tests: 143 passed. ".repeat(20) },
  { type: "tool_use", id: "toolu_01", name: "bash", input: { command: "npm test -- --run" } },
];

async function conversationsOfSize(db: Database, size: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < CONVERSATIONS; i++) {
    const { conversation } = await seedConversation(db);
    // The history before the measured append, written in one statement to keep setup short.
    await db.pool.query(
      `WITH filled AS (
         INSERT INTO messages (conversation_id, seq, role, content)
         SELECT $1, n, CASE WHEN n % 2 = 1 THEN 'user' ELSE 'assistant' END, $3::jsonb
         FROM generate_series(1, $2::int - 1) AS n
       )
       UPDATE conversations SET message_count = $2::int - 1 WHERE id = $1`,
      [conversation.id, size, JSON.stringify(CONTENT)],
    );
    ids.push(conversation.id);
  }
  return ids;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function measure(db: Database) {
  const conversations = new Map<number, number[]>();
  for (const size of SIZES) conversations.set(size, await conversationsOfSize(db, size));
  const timings = new Map<number, number[]>(SIZES.map((s) => [s, []]));
  // Alternate sizes so drift (JIT warm-up, cache) hits both alike.
  for (let i = 0; i < CONVERSATIONS; i++) {
    for (const size of SIZES) {
      const conversationId = conversations.get(size)?.[i] as number;
      const start = performance.now();
      const message = await appendMessage(db.pool, {
        conversationId,
        role: "user",
        content: CONTENT,
      });
      timings.get(size)?.push(performance.now() - start);
      if (message.seq !== size) throw new Error(`expected seq ${size}, got ${message.seq}`);
    }
  }
  return timings;
}

for (const target of databases()) {
  const db = await target.open();
  try {
    const timings = await measure(db);
    const small = timings.get(10) ?? [];
    const large = timings.get(1000) ?? [];
    const ratio = percentile(large, 50) / percentile(small, 50);
    console.log(
      `conversation-append ${target.name}: message 10 p50 ${percentile(small, 50).toFixed(2)} ms ` +
        `p90 ${percentile(small, 90).toFixed(2)} ms; message 1000 p50 ${percentile(large, 50).toFixed(2)} ms ` +
        `p90 ${percentile(large, 90).toFixed(2)} ms; ratio ${ratio.toFixed(2)}x (goal <= 1.5x) ` +
        (ratio <= 1.5 ? "OK" : "OVER"),
    );
  } finally {
    await db.close();
  }
}
