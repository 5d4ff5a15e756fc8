/**
 * Held uploads against a `sluice serve` of its own: `--clients` raw connections each announce a
 * body (Content-Length, or chunked) with a valid key, send all of it but the last bytes, and
 * hold; beside them an ordinary client POSTs small OTLP/JSON requests one after the other.
 * Prints the server's RSS (quiet, peak under attack, after the attackers left), the ordinary
 * client's statuses and latency quantiles, and how the attackers' connections ended.
 *
 * usage: node --import tsx bench/hostile-http.ts [--engine node|uws] [--clients 250]
 *   [--body-mib 10] [--framing length|chunked] [--endpoint traces|agent|relay]
 *   [--hold 20] [--after 15]
 * Every SLUICE_* in the environment reaches the server (SLUICE_BODY_READ_TIMEOUT_MS...).
 */
import { connect, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { quantile } from './open-loop.ts';
import { rssMiB, startTarget } from './target.ts';

const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'node' },
    clients: { type: 'string', default: '250' },
    'body-mib': { type: 'string', default: '10' },
    framing: { type: 'string', default: 'length' },
    endpoint: { type: 'string', default: 'traces' },
    hold: { type: 'string', default: '20' },
    after: { type: 'string', default: '15' },
  },
});
const clients = Number(values.clients);
// "Just short of" the cap: the body fits, and its last KiB never comes.
const bodyBytes = Number(values['body-mib']) * 1024 * 1024 - 1024;
const heldBytes = bodyBytes - 1024;
const chunked = values.framing === 'chunked';
const endpoint = values.endpoint!;


const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const target = await startTarget(values.engine === 'uws' ? 'sluice-uws' : 'sluice');
try {
  const ingest = new URL(target.url);
  const relay = new URL(target.relayUrl);
  const [port, path, headers] =
    endpoint === 'relay'
      ? [Number(relay.port), '/api/v1/submissions', 'content-type: application/json\r\norigin: https://hostile.example\r\n']
      : endpoint === 'agent'
        ? [Number(ingest.port), '/api/v1/ingest', `content-type: application/json\r\nx-api-key: ${target.headers['x-api-key']}\r\n`]
        : [Number(ingest.port), '/v1/traces', `content-type: application/x-protobuf\r\nx-api-key: ${target.headers['x-api-key']}\r\n`];
  const framing = chunked ? 'transfer-encoding: chunked\r\n' : `content-length: ${bodyBytes}\r\n`;

  await sleep(2000);
  const quietMiB = rssMiB(target.pid);

  // The attackers: each writes its body as fast as the server reads it, then holds.
  const piece = Buffer.alloc(64 * 1024, 0x61);
  const ends: Record<string, number> = {};
  const answers: Record<string, number> = {};
  const sockets: Socket[] = [];
  const attack = async (socket: Socket) => {
    socket.write(`POST ${path} HTTP/1.1\r\nhost: localhost\r\n${headers}${framing}\r\n`);
    for (let sent = 0; sent < heldBytes && !socket.destroyed; ) {
      const size = Math.min(piece.length, heldBytes - sent);
      const data = chunked ? Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), piece.subarray(0, size), Buffer.from('\r\n')]) : piece.subarray(0, size);
      sent += size;
      if (!socket.write(data)) await new Promise((resolve) => { socket.once('drain', resolve); socket.once('close', resolve); });
    }
  };
  for (let i = 0; i < clients; i++) {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    let answer = '';
    socket.on('data', (data) => { answer ||= data.toString('latin1').split('\r\n')[0]!; });
    socket.on('error', (err: NodeJS.ErrnoException) => { ends[err.code ?? 'error'] = (ends[err.code ?? 'error'] ?? 0) + 1; });
    socket.on('close', () => {
      const status = answer.split(' ')[1] ?? 'none';
      answers[status] = (answers[status] ?? 0) + 1;
    });
    void attack(socket);
  }

  // The ordinary client, beside them, and the server's RSS every 250 ms.
  const span = JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: '5b8efff798038103d269b633813fc60c', spanId: 'eee19b7ec3c1b174', name: 'ordinary', kind: 1, startTimeUnixNano: '1700000000000000000', endTimeUnixNano: '1700000000100000000' }] }] }] });
  const statuses: Record<string, number> = {};
  const latencies: number[] = [];
  let peakMiB = 0;
  const sampler = setInterval(() => { peakMiB = Math.max(peakMiB, rssMiB(target.pid)); }, 250);
  const holdUntil = Date.now() + Number(values.hold) * 1000;
  while (Date.now() < holdUntil) {
    const start = performance.now();
    let status: string;
    try {
      const response = await fetch(`${target.url}/v1/traces`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': target.headers['x-api-key']! },
        body: span,
        signal: AbortSignal.timeout(10_000),
      });
      await response.arrayBuffer();
      status = String(response.status);
    } catch (err) {
      status = (err as Error).name;
    }
    latencies.push(performance.now() - start);
    statuses[status] = (statuses[status] ?? 0) + 1;
    await sleep(20);
  }
  const stillOpen = sockets.filter((s) => !s.destroyed).length;
  for (const socket of sockets) socket.destroy();
  clearInterval(sampler);
  await sleep(Number(values.after) * 1000);
  const afterMiB = rssMiB(target.pid);

  latencies.sort((a, b) => a - b);
  const ok = statuses['200'] ?? 0;
  console.log(JSON.stringify({
    engine: values.engine, clients, bodyBytes, framing: values.framing, endpoint,
    rssMiB: { quiet: Math.round(quietMiB), peakUnderAttack: Math.round(peakMiB), afterAttack: Math.round(afterMiB) },
    ordinary: { requests: latencies.length, successRate: +(ok / latencies.length).toFixed(4), statuses, p50Ms: Math.round(quantile(latencies, 0.5)), p95Ms: Math.round(quantile(latencies, 0.95)), p99Ms: Math.round(quantile(latencies, 0.99)) },
    attackers: { stillOpenAtEndOfHold: stillOpen, answers, errors: ends },
  }, null, 2));
} finally {
  await target.stop();
}
