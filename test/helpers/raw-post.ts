// Run as a child process by test/intake/body-limit.test.ts: nock, active in the test process,
// buffers a raw socket's writes, so there the server's early answer is seen only once the whole
// body is written. Streams a webhook POST of `total` bytes in 1 MB chunks (chunked unless a
// Content-Length is given) until the server answers or closes, then prints
// {"status": <code, or null when a reset came first>, "sent": <bytes handed to the socket>}.
// With a total of 0 it sends the headers alone and waits for the answer.
// Usage: node raw-post.ts <url> <signature> <marker> <total> [content-length]
import { connect } from "node:net";

const [url = "", signature = "", marker = "", total = "0", contentLength] = process.argv.slice(2);
const MB = 1024 * 1024;
const chunk = Buffer.alloc(MB, `"${marker}"`);
const target = new URL(url);
const socket = connect(Number(target.port), target.hostname);
const length =
  contentLength === undefined ? "transfer-encoding: chunked" : `content-length: ${contentLength}`;
socket.write(
  `POST ${target.pathname} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n` +
    `x-github-event: issue_comment\r\nx-github-delivery: oversize-1\r\n` +
    `x-hub-signature-256: ${signature}\r\n${length}\r\n\r\n`,
);
let sent = 0;
let reply = "";
let done = false;
const finish = () => {
  if (done) return;
  done = true;
  socket.destroy();
  const status = Number(reply.split(" ")[1]);
  process.stdout.write(JSON.stringify({ status: Number.isNaN(status) ? null : status, sent }));
};
socket.on("data", (data) => {
  reply += data.toString();
  if (reply.includes("\r\n")) finish();
});
socket.on("close", finish);
socket.on("error", finish);
// Each chunk waits until it left for the socket, so `sent` is what the server could have read.
const pump = () => {
  if (done || socket.destroyed) return;
  if (sent >= Number(total)) return void socket.end(contentLength === undefined ? "0\r\n\r\n" : "");
  sent += chunk.length;
  const framed =
    contentLength === undefined ? [`${chunk.length.toString(16)}\r\n`, chunk, "\r\n"] : [chunk];
  for (const part of framed.slice(0, -1)) socket.write(part);
  socket.write(framed.at(-1) as Buffer | string, (error) => (error ? finish() : pump()));
};
if (Number(total) > 0) pump();
