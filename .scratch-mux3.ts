import { startEmbeddedPostgres } from "./src/store/embedded.ts";
import net from "node:net";
import pg from "pg";

const e = await startEmbeddedPostgres("memory://");
const [host, port] = new URL(e.url).host.split(":");
const pool = new pg.Pool({ host, port: Number(port), user: "postgres", database: "postgres", max: 4 });
await pool.query("select 1");
// raw client: startup, then Parse; pause; Bind/Execute/Sync
const sock = net.connect(Number(port), host);
await new Promise((r) => sock.once("connect", r));
const msg = (type: string, body: Buffer) => { const h = Buffer.alloc(5); h.write(type, 0); h.writeInt32BE(body.length + 4, 1); return Buffer.concat([h, body]); };
const cstr = (s: string) => Buffer.from(s + "\0");
const startupBody = Buffer.concat([Buffer.from([0,3,0,0]), cstr("user"), cstr("postgres"), cstr("database"), cstr("postgres"), Buffer.from([0])]);
const startup = Buffer.alloc(4); startup.writeInt32BE(startupBody.length + 4);
let out = Buffer.alloc(0);
sock.on("data", (d) => { out = Buffer.concat([out, d]); });
sock.write(Buffer.concat([startup, startupBody]));
await new Promise((r) => setTimeout(r, 200));
out = Buffer.alloc(0);
// Parse unnamed: SELECT 'raw'::text || $1
const parse = msg("P", Buffer.concat([cstr(""), cstr("SELECT 'raw-' || $1::text AS v"), Buffer.from([0,0])]));
sock.write(parse);
await new Promise((r) => setTimeout(r, 100));
// meanwhile another client runs a different unnamed parse
const otherP = pool.query("SELECT $1::int + 1 AS w, 2 AS z", [41]);
await new Promise((r) => setTimeout(r, 100));
// Bind with one text param
const bindBody = Buffer.concat([cstr(""), cstr(""), Buffer.from([0,0]), Buffer.from([0,1]), (() => { const b = Buffer.alloc(4); b.writeInt32BE(3); return b; })(), Buffer.from("abc"), Buffer.from([0,0])]);
sock.write(Buffer.concat([msg("B", bindBody), msg("D", Buffer.concat([Buffer.from("P"), cstr("")])), msg("E", Buffer.concat([cstr(""), Buffer.from([0,0,0,0])])), msg("S", Buffer.alloc(0))]));
console.log("other", (await otherP).rows);
console.log(JSON.stringify(out.toString("latin1").replace(/[^\x20-\x7e]/g, ".")));
sock.destroy(); await pool.end(); await e.stop();
