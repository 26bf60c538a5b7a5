import { Buffer } from 'node:buffer';
import { createServer } from 'node:http';

/*
 * The ceiling of the heartbeat benchmark: a bare node:http server that reads each POST body
 * and answers with the bytes a steady-state heartbeat gets from the coordinator
 * (BENCH_REPLY). A child process of bench/throughput.ts; prints `LISTENING <port>`.
 */

const reply = Buffer.from(process.env.BENCH_REPLY ?? '{}');
const headers = {
  'Content-Type': 'application/json; charset=utf-8',
  'Content-Length': String(reply.length),
};

const server = createServer((req, res) => {
  if (req.method !== 'POST') {
    res.statusCode = 404;
    res.end();
    return;
  }
  req.on('data', () => undefined);
  req.on('end', () => {
    res.writeHead(200, headers);
    res.end(reply);
  });
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('no port');
  process.stdout.write(`LISTENING ${address.port}\n`);
});

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
// The parent holds our stdin open: when it goes away, so do we.
process.stdin.on('end', stop);
process.stdin.resume();
