/**
 * The cluster bus's own cost, without HTTP or the worker pool: requests' RowBinary published
 * through JetStreamBus (what a gateway does after transcoding), then moved by a
 * JetStreamStorageConsumer into a sink that stores nothing (what `sluice consume` does
 * before storage). Reports CPU seconds per million spans of this process for each side, and
 * of the nats-server (one of its own, so nothing else is counted).
 *
 *   node --import tsx bench/cluster-publish.ts [--spans 500000] [--concurrency 64] [--nodes 1|3] [--partitions N] [--profile DIR] [--json]
 *
 * --nodes 3 runs a three-node JetStream cluster on loopback (test/nats-cluster.ts) with streams
 * of three replicas; the nats-server figure is then the three nodes' CPU together. --partitions
 * splits the traces table over N partition streams (SLUICE_NATS_PARTITIONS).
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
import { streamOf } from '../bus/jetstream-names.ts';
import { startNatsCluster } from '../test/nats-cluster.ts';
import { startNatsServer } from '../test/sluice-processes.ts';
import { loadTraceTypes, traceBodies } from './payload.ts';
import { cpuSeconds, machineBusySeconds } from './target.ts';

const { values } = parseArgs({
  options: {
    spans: { type: 'string', default: '500000' },
    concurrency: { type: 'string', default: '64' },
    warmup: { type: 'string', default: '50000' },
    nodes: { type: 'string', default: '1' },
    partitions: { type: 'string', default: '1' },
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

const partitions = new Map([['otel_traces', Number(values.partitions)]]);

/** Runs a consumer until it stored `spans` rows (counted after their acks). */
async function consumeAll(nc: NatsConnection, natsUrl: string, prefix: string, spans: number): Promise<void> {
  const consumer = new JetStreamStorageConsumer(nc, { natsUrl: natsUrl, prefix, tables: ['otel_traces'], partitions, batchMaxWaitMs: 200 }, async () => {});
  consumer.start();
  while (consumer.stats.rows < spans) await new Promise((resolve) => setTimeout(resolve, 20));
  await consumer.shutdown();
}

/** CPU seconds of the nats-server processes so far. */
const serversCpu = (pids: number[]) => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);

async function measure(what: string, natsPids: number[], spans: number, run: () => Promise<void>): Promise<Record<string, string | number>> {
  const profiler = values.profile ? new Session() : undefined;
  if (profiler) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.start');
  }
  const cpu = process.cpuUsage();
  const nats = serversCpu(natsPids);
  const machine = machineBusySeconds();
  const started = performance.now();
  await run();
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const self = (used.user + used.system) / 1e6;
  const server = serversCpu(natsPids) - nats;
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
const nodes = Number(values.nodes);
const servers = nodes === 1 ? await startNatsServer(dir) : await startNatsCluster(dir, nodes);
const natsUrl = servers.url;
try {
  const nc = await connect({ servers: natsUrl.split(',') });
  const prefix = `B${randomBytes(4).toString('hex').toUpperCase()}`;
  const maxStreamBytes = (nodes === 1 ? 8 : 2) * 1024 ** 3; // three nodes on one disk each reserve every stream's
  const bus = new JetStreamBus(nc, { natsUrl, prefix, tables: ['otel_traces'], partitions, replicas: nodes, maxStreamBytes, retryAfterSeconds: 1 });
  await bus.start();
  const requests = requestChunks();
  const bytes = requests.reduce((sum, chunks) => sum + chunks.reduce((s, c) => s + c.data.byteLength, 0), 0) / requests.length;
  const spans = Number(values.spans);
  const concurrency = Number(values.concurrency);
  console.log(`requests of ${SPANS_PER_REQUEST} spans, ${Math.round(bytes / 1024)} KiB of RowBinary each; ${concurrency} in flight; ${nodes} NATS node(s), ${values.partitions} partition(s)`);

  // Warm-up: JIT, the stream, the durable consumer and the manifest bucket.
  await publishAll(bus, requests, Number(values.warmup), concurrency);
  await consumeAll(nc, natsUrl, prefix, Number(values.warmup));

  const pids = 'nodes' in servers ? servers.nodes.map((node) => node.pid!) : [servers.child.pid!];
  const rows = [await measure('publish', pids, spans, () => publishAll(bus, requests, spans, concurrency))];
  const jsm = await jetstreamManager(nc);
  let inStream = 0;
  for (let partition = 0; partition < partitions.get('otel_traces')!; partition++) inStream += (await jsm.streams.info(streamOf(prefix, 'otel_traces', partition).stream)).state.messages;
  rows.push(await measure('consume', pids, spans, () => consumeAll(nc, natsUrl, prefix, spans)));
  if (values.json) console.log(JSON.stringify({ messages: inStream, requests: spans / SPANS_PER_REQUEST, rows }));
  else {
    console.log(`${inStream} messages in the stream for ${spans / SPANS_PER_REQUEST} requests`);
    console.table(rows);
  }
  await bus.shutdown();
  await nc.close();
} finally {
  await servers.stop();
  rmSync(dir, { recursive: true, force: true });
}
