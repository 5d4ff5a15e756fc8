/**
 * The cluster bus's own cost, without HTTP or the worker pool: requests' RowBinary published
 * through JetStreamBus (what a gateway does after transcoding), then moved by a
 * JetStreamStorageConsumer into a sink that stores nothing (what `sluice consume` does
 * before storage). Reports CPU seconds per million spans of this process for each side, and
 * of the nats-server (one of its own, so nothing else is counted).
 *
 *   node --import tsx bench/cluster-publish.ts [--spans 500000] [--concurrency 64] [--profile DIR] [--json]
 *
 * --profile writes DIR/publish.cpuprofile and DIR/consume.cpuprofile: each phase alone (open
 * them in Chrome DevTools or speedscope).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { TableChunk } from '../bus/bus.ts';
import { JetStreamBus } from '../bus/jetstream.ts';
import { JetStreamStorageConsumer } from '../bus/jetstream-consumer.ts';
import { transcodeOtlp } from '../pipeline/otlp/index.ts';
import { startNatsServer } from '../test/sluice-processes.ts';
import { loadTraceTypes, traceBodies } from './payload.ts';
import { cpuSeconds, machineBusySeconds } from './target.ts';

const { values } = parseArgs({
  options: {
    spans: { type: 'string', default: '500000' },
    concurrency: { type: 'string', default: '64' },
    warmup: { type: 'string', default: '50000' },
    profile: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const SPANS_PER_REQUEST = 100;

/** What the workers hand the bus: one table's RowBinary per request, as the cluster cuts it (512 KiB chunks). */
function requestChunks(): TableChunk[][] {
  const { bodies } = traceBodies(loadTraceTypes(), 64, SPANS_PER_REQUEST);
  return bodies.map((body) => transcodeOtlp('traces', 'protobuf', gunzipSync(body), 'bench', 512 * 1024).tables);
}

/** Publishes `spans` spans, `concurrency` requests in flight, as a busy gateway does. */
async function publishAll(bus: JetStreamBus, requests: TableChunk[][], spans: number, concurrency: number): Promise<void> {
  let next = 0;
  const total = Math.ceil(spans / SPANS_PER_REQUEST);
  const lane = async () => {
    while (next < total) await bus.publish(requests[next++ % requests.length]!);
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
}

/** Runs a consumer until it stored `spans` rows (counted after their acks). */
async function consumeAll(nc: NatsConnection, natsUrl: string, prefix: string, spans: number): Promise<void> {
  const consumer = new JetStreamStorageConsumer(nc, { natsUrl: natsUrl, prefix, tables: ['otel_traces'], batchMaxWaitMs: 200 }, async () => {});
  consumer.start();
  while (consumer.stats.rows < spans) await new Promise((resolve) => setTimeout(resolve, 20));
  await consumer.shutdown();
}

async function measure(what: string, natsPid: number, spans: number, run: () => Promise<void>): Promise<Record<string, string | number>> {
  const profiler = values.profile ? new Session() : undefined;
  if (profiler) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.start');
  }
  const cpu = process.cpuUsage();
  const nats = cpuSeconds(natsPid);
  const machine = machineBusySeconds();
  const started = performance.now();
  await run();
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const self = (used.user + used.system) / 1e6;
  const server = cpuSeconds(natsPid) - nats;
  const others = machineBusySeconds() - machine - self - server;
  if (profiler) {
    const { profile } = await profiler.post('Profiler.stop');
    mkdirSync(values.profile!, { recursive: true });
    writeFileSync(join(values.profile!, `${what}.cpuprofile`), JSON.stringify(profile));
    profiler.disconnect();
  }
  const perMillion = 1e6 / spans;
  return {
    side: what,
    'spans/s': Math.round(spans / seconds),
    'process CPU-s per M spans': +(self * perMillion).toFixed(2),
    'of which system': `${Math.round((100 * used.system) / 1e6 / self)} %`,
    'process spans per CPU-s': Math.round(spans / self),
    'nats-server CPU-s per M spans': +(server * perMillion).toFixed(2),
    // Other processes' cores: above ~0.1 they disturbed the run.
    'other cores': +(others / seconds).toFixed(2),
  };
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-bus-'));
const server = await startNatsServer(dir);
try {
  const nc = await connect({ servers: server.url });
  const prefix = `B${randomBytes(4).toString('hex').toUpperCase()}`;
  const bus = new JetStreamBus(nc, { natsUrl: server.url, prefix, tables: ['otel_traces'], maxStreamBytes: 8 * 1024 ** 3, retryAfterSeconds: 1 });
  await bus.start();
  const requests = requestChunks();
  const bytes = requests.reduce((sum, chunks) => sum + chunks.reduce((s, c) => s + c.data.byteLength, 0), 0) / requests.length;
  const spans = Number(values.spans);
  const concurrency = Number(values.concurrency);
  console.log(`requests of ${SPANS_PER_REQUEST} spans, ${Math.round(bytes / 1024)} KiB of RowBinary each; ${concurrency} in flight`);

  // Warm-up: JIT, the stream, the durable consumer and the manifest bucket.
  await publishAll(bus, requests, Number(values.warmup), concurrency);
  await consumeAll(nc, server.url, prefix, Number(values.warmup));

  const pid = server.child.pid!;
  const rows = [await measure('publish', pid, spans, () => publishAll(bus, requests, spans, concurrency))];
  const inStream = (await (await jetstreamManager(nc)).streams.info(`${prefix}_ROWS_OTEL_TRACES`)).state.messages;
  rows.push(await measure('consume', pid, spans, () => consumeAll(nc, server.url, prefix, spans)));
  if (values.json) console.log(JSON.stringify({ messages: inStream, requests: spans / SPANS_PER_REQUEST, rows }));
  else {
    console.log(`${inStream} messages in the stream for ${spans / SPANS_PER_REQUEST} requests`);
    console.table(rows);
  }
  await bus.shutdown();
  await nc.close();
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
