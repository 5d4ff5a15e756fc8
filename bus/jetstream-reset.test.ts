/**
 * A WorkQueue stream nats-server brings back at sequence 0 after a SIGKILL (nats-io/nats-server#6600:
 * killed between removing its last message block and writing the next, it finds no block on
 * restart), on a nats-server of the test's own. The crash is reproduced on disk: the server is
 * SIGKILLed and the stream's message blocks removed, its consumer's state kept. The new messages
 * then get the sequences of batches stored before, and lie below the durable consumer's position.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SluiceMetrics } from '../core/metrics.ts';
import { transcodeOtlp } from '../pipeline/otlp/index.ts';
import { ChdbStorage } from '../storage/chdb.ts';
import { capturedLog } from '../test/faults.ts';
import { eventually } from '../test/harness.ts';
import { encodeTraces, traceRequest } from '../test/otlp-fixtures.ts';
import { freePort, startNatsServer, type NatsProcess } from '../test/sluice-processes.ts';
import { JetStreamBus } from './jetstream.ts';
import { JetStreamStorageConsumer } from './jetstream-consumer.ts';
import { DURABLE, streamOf } from './jetstream-names.ts';
import { storageSink } from './storage-sink.ts';

const prefix = `Z${randomBytes(3).toString('hex').toUpperCase()}`;
const { stream } = streamOf(prefix, 'otel_traces');
let dir: string;
let port: number;
let server: NatsProcess;
let storage: ChdbStorage;
const connections: NatsConnection[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-reset-'));
  port = await freePort();
  server = await startServer();
  storage = new ChdbStorage(join(dir, 'chdb'), 'otel');
  await storage.start();
}, 60_000);

afterAll(async () => {
  for (const nc of connections) await nc.close().catch(() => {});
  await server?.stop();
  await storage?.shutdown();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function busOn(url: string, busPrefix = prefix) {
  const nc = await connect({ servers: url, timeout: 3000 });
  connections.push(nc);
  const bus = new JetStreamBus(nc, { natsUrl: url, prefix: busPrefix, tables: ['otel_traces'], maxStreamBytes: 64 * 1024 * 1024, retryAfterSeconds: 1 });
  await bus.start();
  return { nc, bus };
}

const publish = (bus: JetStreamBus, name: string) =>
  bus.publish(transcodeOtlp('traces', 'protobuf', encodeTraces(traceRequest({ spans: 20, name })), 'src').tables);

/** SIGKILLs the server and removes a stream's message blocks (its consumers' state stays), then starts it again on its port. */
async function crashLosingBlocks(name: string): Promise<void> {
  await server.stop('SIGKILL');
  const blocks = join(dir, 'nats', 'jetstream', '$G', 'streams', name, 'msgs');
  for (const file of await readdir(blocks)) await rm(join(blocks, file));
  server = await startServer();
}

/** The test's nats-server, on the same port and store each time (clients reconnect to it). */
function startServer(): Promise<NatsProcess> {
  return startNatsServer(join(dir, 'nats'), ['-p', String(port)]);
}

async function countOf(name: string): Promise<number> {
  return Number(JSON.parse(await storage.query(`SELECT count() AS n FROM otel.otel_traces WHERE SpanName = '${name}'`)).n);
}

describe('a stream brought back at sequence 0 after a SIGKILL', () => {
  it('stores its new messages: not taken for the batches of their sequences, nor left below the consumer', { timeout: 120_000 }, async () => {
    const sink = storageSink(storage, new SluiceMetrics());
    const { log, entries } = capturedLog();
    const consumerOn = (nc: NatsConnection, url: string) =>
      new JetStreamStorageConsumer(nc, { natsUrl: url, prefix, tables: ['otel_traces'], batchMaxWaitMs: 200, discoverEveryMs: 300, log }, sink);

    const before = await busOn(server.url);
    const first = consumerOn(before.nc, server.url);
    first.start();
    for (const name of ['reset-old-1', 'reset-old-2', 'reset-old-3']) await publish(before.bus, name);
    await eventually(async () => (await countOf('reset-old-3')) === 20 && (await first.lag('otel_traces')).messages === 0, 30_000, 100);
    await first.shutdown();
    await before.bus.shutdown();

    // The crash: killed, and the stream's message blocks are gone; the consumer's state is not.
    await crashLosingBlocks(stream);
    const after = await busOn(server.url);
    const jsm = await jetstreamManager(after.nc);
    expect((await jsm.streams.info(stream)).state.last_seq).toBe(0);
    const consumerState = await jsm.consumers.info(stream, DURABLE);
    expect(consumerState.delivered.stream_seq).toBe(3);

    for (const name of ['reset-new-1', 'reset-new-2', 'reset-new-3']) await publish(after.bus, name);
    // The first delete of the consumer gets no answer: it is tried again at the next check, not taken as done.
    const consumers = Object.getPrototypeOf(jsm.consumers) as { delete(stream: string, name: string): Promise<boolean> };
    const remove = consumers.delete;
    let unanswered = 0;
    vi.spyOn(consumers, 'delete').mockImplementation(function (this: unknown, ...args: [string, string]) {
      if (unanswered++ === 0) return Promise.reject(new Error('timeout'));
      return remove.apply(this, args);
    });
    const second = consumerOn(after.nc, server.url);
    second.start();
    // Within ack wait (30 s) when the consumer's state on disk still held deliveries it had not yet
    // written as acked (it writes at most every 100 ms): those sequences, now the new messages',
    // come again only after it, and the consumer is re-created for the rest (if any).
    const names = ['reset-new-1', 'reset-new-2', 'reset-new-3', 'reset-old-1'];
    await eventually(async () => (await Promise.all(names.map(countOf))).every((n) => n === 20), 90_000, 200);
    expect(await Promise.all(names.map(countOf))).toEqual([20, 20, 20, 20]);
    vi.restoreAllMocks();
    const recreated = entries().filter((entry) => String(entry.msg).startsWith('the stream went back below its consumer')).length;
    const retried = entries().filter((entry) => String(entry.msg).startsWith('could not check or re-create the consumer')).length;
    // Seen, the delete unanswered (warned), seen again, re-created.
    if (consumerState.num_ack_pending === 0) expect([recreated, retried]).toEqual([2, 1]);
    else expect(recreated).toBeLessThanOrEqual(2);
    await second.shutdown();
    await after.bus.shutdown();
  });

  it('does not ack, after the server restarted, a message whose sequence another message has now (an ack removes whichever it is)', { timeout: 120_000 }, async () => {
    const stalePrefix = `${prefix}S`;
    const staleStream = streamOf(stalePrefix, 'otel_traces').stream;
    const stored = storageSink(storage, new SluiceMetrics());
    // The first insert lands, then waits until the server has crashed and come back.
    let inserted!: () => void;
    const landed = new Promise<void>((resolve) => (inserted = resolve));
    let restarted!: () => void;
    const serverBack = new Promise<void>((resolve) => (restarted = resolve));
    let first = true;
    const sink: typeof stored = async (chunks, token) => {
      await stored(chunks, token);
      if (!first) return;
      first = false;
      inserted();
      await serverBack;
    };
    const before = await busOn(server.url, stalePrefix);
    const consumer = new JetStreamStorageConsumer(before.nc, { natsUrl: server.url, prefix: stalePrefix, tables: ['otel_traces'], batchMaxWaitMs: 200, ackWaitMs: 2000, discoverEveryMs: 300, log: capturedLog().log }, sink);
    consumer.start();
    await publish(before.bus, 'stale-old');
    await landed;
    await before.bus.shutdown();

    // Meanwhile the server restarts without the stream's message, and a new one gets its sequence.
    await crashLosingBlocks(staleStream);
    const after = await busOn(server.url, stalePrefix);
    await publish(after.bus, 'stale-new');
    expect((await (await jetstreamManager(after.nc)).streams.info(staleStream)).state.last_seq).toBe(1);
    // The consumer's own connection is back too: its manifest commit and ack reach the new server.
    await eventually(() => jetstreamManager(before.nc).then((jsm) => jsm.getAccountInfo()).then(() => true, () => false), 30_000, 200);
    restarted();

    await eventually(async () => (await countOf('stale-new')) === 20, 60_000, 200);
    expect([await countOf('stale-old'), await countOf('stale-new')]).toEqual([20, 20]);
    await consumer.shutdown();
    await after.bus.shutdown();
  });
});
