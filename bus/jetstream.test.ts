/**
 * The cluster bus against a real nats-server with JetStream (NATS_URL, default
 * nats://127.0.0.1:4222; deploy/services.sh starts one) and real storage (chDB with the
 * schema). Each test uses streams and buckets of its own (a random prefix).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DiscardPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type StoredMsg } from '@nats-io/jetstream';
import { Bucket, Kvm } from '@nats-io/kv';
import { connect, type headers, type NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { SluiceMetrics } from '../core/metrics.ts';
import { transcodeOtlp } from '../pipeline/otlp/index.ts';
import { ChdbStorage } from '../storage/chdb.ts';
import { storageSink } from './storage-sink.ts';
import { capturedLog, watchFeeds } from '../test/faults.ts';
import { encodeTraces, traceRequest } from '../test/otlp-fixtures.ts';
import type { ChunkSink, TableChunk } from './bus.ts';
import { JetStreamBus } from './jetstream.ts';
import { JetStreamStorageConsumer, type ConsumerTuning } from './jetstream-consumer.ts';
import { DURABLE, manifestBucketOf, streamOf } from './jetstream-names.ts';
import type { Manifest, ManifestIndex } from './batch-manifests.ts';
import type { NatsDirect } from './nats-direct.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const log = pino({ level: process.env.SLUICE_TEST_LOG_LEVEL ?? 'silent' });
const prefixes: string[] = [];
let nc: NatsConnection;
let dir: string;
let storage: ChdbStorage;
let sink: ChunkSink;

beforeAll(async () => {
  try {
    nc = await connect({ servers: NATS_URL, timeout: 3000 });
  } catch (err) {
    throw new Error(`NATS is not reachable at ${NATS_URL} (start it with deploy/services.sh): ${(err as Error).message}`);
  }
  dir = await mkdtemp(join(tmpdir(), 'sluice-jetstream-'));
  storage = new ChdbStorage(dir, 'otel');
  await storage.start();
  sink = storageSink(storage, new SluiceMetrics());
});

afterEach(() => vi.restoreAllMocks());

afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  for await (const stream of jsm.streams.list()) {
    if (prefixes.some((p) => stream.config.name.startsWith(p) || stream.config.name.startsWith(`KV_${p.toLowerCase()}`))) {
      await jsm.streams.delete(stream.config.name);
    }
  }
  await nc.close();
  await storage.shutdown();
  await rm(dir, { recursive: true, force: true });
});

function fixture(maxStreamBytes = 64 * 1024 * 1024, tables = ['otel_traces']) {
  const prefix = `T${randomBytes(4).toString('hex').toUpperCase()}`;
  prefixes.push(prefix);
  const bus = new JetStreamBus(nc, {
    natsUrl: NATS_URL,
    prefix,
    tables,
    maxStreamBytes,
    retryAfterSeconds: 5,
    consumer: { batchMaxWaitMs: 300, ackWaitMs: 1000, maxAttempts: 3, maxBackoffMs: 200, log },
  });
  return { prefix, bus };
}

/** RowBinary chunks of `spans` spans named `name`, cut small: a request of several chunks. */
const chunksOf = (name: string, spans: number) =>
  transcodeOtlp('traces', 'protobuf', encodeTraces(traceRequest({ spans, name })), 'src', 16 * 1024).tables;

/** Rows of `table` that no consumer reads: bytes of no format. */
const rowsOf = (table: string, rows = 1): TableChunk => ({ table, columns: ['A'], rows, data: new Uint8Array(100 * rows).fill(1) });

/** A publish's outcome, readable at any moment. */
function outcome(publish: Promise<void>): { settled?: 'ok' | SluiceError } {
  const state: { settled?: 'ok' | SluiceError } = {};
  publish.then(() => (state.settled = 'ok'), (err: SluiceError) => (state.settled = err));
  return state;
}

async function messagesIn(prefix: string, table: string): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(streamOf(prefix, table).stream)).state.messages;
}

async function countOf(name: string): Promise<number> {
  return Number(JSON.parse(await storage.query(`SELECT count() AS n FROM otel.otel_traces WHERE SpanName = '${name}'`)).n);
}

/** Polls `condition`; the deadline leaves room for chDB inserts on a loaded 2-core machine (a poison batch is split into many). */
async function until(condition: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A storage consumer of the traces table that redelivers after 1 s, not the default 30 s (these tests wait less). */
function consumerOf(prefix: string, tuning: ConsumerTuning = {}, sinkFor: ChunkSink = sink): JetStreamStorageConsumer {
  return new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 200, ackWaitMs: 1000, log, ...tuning }, sinkFor);
}

/** Nothing left in the traces stream for the consumer (false while its durable consumer does not exist yet). */
async function drained(consumer: JetStreamStorageConsumer): Promise<boolean> {
  return (await consumer.lag('otel_traces').catch(() => undefined))?.messages === 0;
}

/** Stores what the traces stream holds with a consumer of its own, until `name`'s spans are there; then stops it. */
async function storeAll(prefix: string, name: string): Promise<void> {
  const consumer = consumerOf(prefix);
  consumer.start();
  await until(async () => (await countOf(name)) > 0 && (await drained(consumer)), 30_000);
  await consumer.shutdown();
}

/**
 * Another history of the traces stream wins (replicas that diverged): the stream starts over,
 * `newcomers` (20 spans each) come first, then `held` as the stream had them, msgIDs and all.
 */
async function winningHistory(prefix: string, bus: JetStreamBus, newcomers: string[], held: Array<Pick<StoredMsg, 'data' | 'header'>>): Promise<void> {
  const { stream, subject } = streamOf(prefix, 'otel_traces');
  await (await jetstreamManager(nc)).streams.delete(stream);
  await bus.start();
  for (const name of newcomers) await bus.publish(chunksOf(name, 20));
  for (const one of held) await jetstream(nc).publish(subject, one.data, { headers: one.header });
}

/** The manifest bucket loses every entry, as it can when all its nodes die at once; the consumers' indexes are not told. */
async function loseManifests(prefix: string): Promise<void> {
  await (await jetstreamManager(nc)).streams.purge(`KV_${manifestBucketOf(prefix)}`);
}

describe('JetStreamBus streams', () => {
  it('refuses publishes into a full stream and withdraws a request taken in part: every acknowledged row is stored, nothing refused is', async () => {
    const { bus } = fixture(256 * 1024);
    await bus.start();
    // Requests of two messages (~20 KiB) each, published concurrently until the stream is full.
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, (_, i) => bus.publish(chunksOf(`fill-${i}`, 120)).then(() => 'ok', (err: SluiceError) => err)),
    );
    const accepted = outcomes.flatMap((outcome, i) => (outcome === 'ok' ? [i] : []));
    const refused = outcomes.filter((outcome): outcome is SluiceError => outcome !== 'ok');
    expect(accepted.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    for (const err of refused) {
      expect([err.code, err.retryAfterSeconds]).toEqual(['unavailable', 5]);
      expect(err.message).toContain('the bus is full');
    }
    expect(bus.status()).toMatchObject({ ok: false, detail: expect.stringContaining('stream full') });
    // Just refused as full: requests for that table are refused before they are decoded, for a
    // moment (pipeline/ingest.ts asks); requests for other tables are not.
    await expect(bus.publish(chunksOf('late', 120))).rejects.toMatchObject({ message: expect.stringContaining('the bus is full') });
    expect(bus.refusal(['otel_traces'])).toMatchObject({ code: 'unavailable', retryAfterSeconds: 5, message: expect.stringContaining('the bus is full') });
    expect(bus.refusal(['otel_logs'])).toBeUndefined();

    bus.consume(sink);
    await until(async () => (await bus.figures()).consumer!.lag.find((lag) => lag.table === 'otel_traces')?.messages === 0);
    await until(async () => bus.refusal(['otel_traces']) === undefined);
    for (let i = 0; i < 30; i++) expect(await countOf(`fill-${i}`), `fill-${i}`).toBe(accepted.includes(i) ? 120 : 0);
    await bus.shutdown();
  });

  it('withdraws the messages of a request the stream took only in part', async () => {
    const { prefix, bus } = fixture(64 * 1024);
    await bus.start();
    const chunks = chunksOf('partial', 400); // about 100 KiB in 16 KiB messages: the first ones fit
    const err = await bus.publish(chunks).catch((e) => e);
    expect([err.code, err.retryAfterSeconds]).toEqual(['unavailable', 5]);
    const jsm = await jetstreamManager(nc);
    expect((await jsm.streams.info(streamOf(prefix, 'otel_traces').stream)).state.messages).toBe(0);
  });

  it('corrects an existing stream that would discard acknowledged messages, and refuses one it cannot correct', async () => {
    const { prefix, bus } = fixture(1024 * 1024);
    const { stream, subject } = streamOf(prefix, 'otel_traces');
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [subject], retention: RetentionPolicy.Workqueue, storage: StorageType.File, max_bytes: 4096 });
    expect((await jsm.streams.info(stream)).config.discard).toBe(DiscardPolicy.Old);
    await bus.start();
    const corrected = (await jsm.streams.info(stream)).config;
    expect([corrected.discard, corrected.max_bytes]).toEqual([DiscardPolicy.New, 1024 * 1024]);

    const other = fixture();
    const names = streamOf(other.prefix, 'otel_traces');
    await jsm.streams.add({ name: names.stream, subjects: [names.subject], retention: RetentionPolicy.Limits, storage: StorageType.File });
    await expect(other.bus.start()).rejects.toThrow(`JetStream stream ${names.stream} exists with retention limits and storage file`);
  });
});

describe('JetStreamBus and storage consumer', { timeout: 180_000 }, () => {
  it('stores exactly what was published, through two consumer processes sharing the work', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    const chunks = chunksOf('shared', 400);
    expect(chunks.length).toBeGreaterThan(2);
    await bus.publish(chunks);
    await bus.publish(chunksOf('shared', 100));
    const a = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 200, log }, sink);
    const b = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 200, log }, sink);
    a.start();
    b.start();
    await until(async () => (await countOf('shared')) >= 500);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await countOf('shared')).toBe(500);
    expect((await a.lag('otel_traces')).messages).toBe(0);
    // Manifests are read from the bucket's leader: a replica behind could answer a direct get
    // with a manifest missing, and its batch would be inserted again under a new token.
    expect((await (await jetstreamManager(nc)).streams.info(`KV_${manifestBucketOf(prefix)}`)).config.allow_direct).toBe(false);
    await Promise.all([a.shutdown(), b.shutdown()]);
  });

  it('a frozen consumer that inserted but never acked: its batch is finished once by another', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    await bus.publish(chunksOf('frozen', 300));
    let inserted!: () => void;
    const insertedOnce = new Promise<void>((resolve) => (inserted = resolve));
    let release!: () => void;
    const frozen = new Promise<void>((resolve) => (release = resolve));
    // Inserts for real, then hangs like a frozen process: no commit, no ack.
    const freezingSink: ChunkSink = async (chunks, token) => {
      await sink(chunks, token);
      inserted();
      await frozen;
      throw new Error('this consumer was frozen');
    };
    const first = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 300, ackWaitMs: 1000, log }, freezingSink);
    first.start();
    await insertedOnce;
    expect(await countOf('frozen')).toBe(300);
    const second = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 300, ackWaitMs: 1000, log }, sink);
    second.start();
    // After ackWait the batch is redelivered; the second consumer re-inserts it with the same token.
    await until(async () => second.stats.redelivered > 0 && (await second.lag('otel_traces')).messages === 0);
    expect(await countOf('frozen')).toBe(300);
    release();
    await Promise.all([first.shutdown(), second.shutdown()]);
    expect(await countOf('frozen')).toBe(300);
  });

  it('keeps a pending batch waiting while one of its messages is past the stream\'s end (a leader behind after every node restarted), then stores it whole', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    const { stream } = streamOf(prefix, 'otel_traces');
    const consumer = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 200, ackWaitMs: 1000, maxBackoffMs: 200, log }, sink);
    consumer.start();
    // A batch a consumer started before the restart: messages 1, 2 and 3. The stream has 1 and 2 so far.
    const indexes = (consumer as unknown as { manifests: Map<string, ManifestIndex> }).manifests;
    await until(async () => indexes.size > 0, 15_000);
    const manifests = await new Kvm(nc).open(manifestBucketOf(prefix));
    await manifests.put(`${stream}.1`, JSON.stringify({ token: `${stream}:1-3:before-the-restart`, seqs: [1, 2, 3], state: 'pending' }));
    await until(async () => [...indexes.values()].some((index) => index.find(stream, 1, '') !== undefined), 15_000);
    for (const name of ['behind-1', 'behind-2']) await bus.publish(chunksOf(name, 50));
    // The batch waits: it is not stored without message 3, nor committed.
    await until(async () => consumer.stats.failures > 0, 15_000);
    expect(JSON.parse((await manifests.get(`${stream}.1`))!.string()).state).toBe('pending');
    expect(await countOf('behind-1')).toBe(0);
    await bus.publish(chunksOf('behind-3', 50));
    await until(async () => (await countOf('behind-3')) === 50 && (await consumer.lag('otel_traces')).messages === 0, 30_000);
    expect([await countOf('behind-1'), await countOf('behind-2'), await countOf('behind-3')]).toEqual([50, 50, 50]);
    await consumer.shutdown();
  });

  it('stores the new messages of a stream that starts again at sequence 1 within the manifests\' hour (deleted and created again, or reset by a crash)', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    const before = consumerOf(prefix);
    before.start();
    for (const name of ['reset-before-1', 'reset-before-2', 'reset-before-3']) await bus.publish(chunksOf(name, 20));
    await until(async () => (await countOf('reset-before-3')) === 20 && (await before.lag('otel_traces')).messages === 0, 30_000);
    await before.shutdown();
    // Sequences 1–3 belong to committed batches in the manifest bucket; the stream starts over.
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(streamOf(prefix, 'otel_traces').stream);
    await bus.start();
    for (const name of ['reset-after-1', 'reset-after-2', 'reset-after-3']) await bus.publish(chunksOf(name, 20));
    expect((await jsm.streams.info(streamOf(prefix, 'otel_traces').stream)).state.last_seq).toBe(3);
    const after = consumerOf(prefix);
    after.start();
    // (lag() throws until the new stream's durable consumer exists)
    await until(() => drained(after), 30_000);
    expect(await Promise.all(['reset-after-1', 'reset-after-2', 'reset-after-3'].map(countOf))).toEqual([20, 20, 20]);
    expect(await countOf('reset-before-1')).toBe(20);
    await after.shutdown();
  });

  it('keeps the manifest of a batch whose first sequence a later batch got too, so its message coming back is known (replicas that diverged)', async () => {
    const { prefix, bus } = fixture();
    const { stream } = streamOf(prefix, 'otel_traces');
    const jsm = await jetstreamManager(nc);
    /** Publishes, stores with a consumer of its own, and starts the stream over. */
    const storeThenReset = async (publish: () => Promise<unknown>, name: string) => {
      await bus.start();
      await publish();
      await storeAll(prefix, name);
      await jsm.streams.delete(stream);
    };
    let original: { data: Uint8Array; headers: ReturnType<typeof headers> } | undefined;
    await storeThenReset(async () => {
      await bus.publish(chunksOf('diverged-old', 20));
      const stored = (await jsm.streams.getMessage(stream, { seq: 1 }))!;
      original = { data: stored.data, headers: stored.header };
    }, 'diverged-old');
    // Another history: a new message at sequence 1, stored as a batch of its own.
    await storeThenReset(() => bus.publish(chunksOf('diverged-new', 20)), 'diverged-new');
    // The first history wins after all: the old message is back at sequence 1, as the replica that had it left it.
    await bus.start();
    await jetstream(nc).publish(streamOf(prefix, 'otel_traces').subject, original!.data, { headers: original!.headers });
    const consumer = consumerOf(prefix);
    consumer.start();
    await until(() => drained(consumer), 30_000);
    expect([await countOf('diverged-old'), await countOf('diverged-new')]).toEqual([20, 20]);
    await consumer.shutdown();
  });

  it('acks a stored message that comes back under another sequence (replicas that diverged), not storing it twice', async () => {
    const { prefix, bus } = fixture();
    const { stream } = streamOf(prefix, 'otel_traces');
    const jsm = await jetstreamManager(nc);
    await bus.start();
    await bus.publish(chunksOf('moved-stored', 20));
    const original = (await jsm.streams.getMessage(stream, { seq: 1 }))!;
    await storeAll(prefix, 'moved-stored');
    // The history that wins has a newcomer at sequence 1 and the stored message at 2.
    await winningHistory(prefix, bus, ['moved-newcomer'], [original]);
    expect((await jsm.streams.info(stream)).state.last_seq).toBe(2);
    const { log: watched, entries } = capturedLog();
    const consumer = consumerOf(prefix, { log: watched });
    consumer.start();
    await until(() => drained(consumer), 30_000);
    expect([await countOf('moved-stored'), await countOf('moved-newcomer')]).toEqual([20, 20]);
    expect(entries().filter((entry) => String(entry.msg).startsWith('messages of batches stored or started before came back')).map((entry) => entry.messages)).toEqual([1]);
    await consumer.shutdown();
  });

  it('stores a message the stream holds twice, under two sequences, once', async () => {
    const { prefix, bus } = fixture();
    const { stream, subject } = streamOf(prefix, 'otel_traces');
    const jsm = await jetstreamManager(nc);
    await bus.start();
    await bus.publish(chunksOf('twice-held', 20));
    const original = (await jsm.streams.getMessage(stream, { seq: 1 }))!;
    // Past the duplicate window JetStream takes the same msgID again, as a replica that diverged may hold it.
    const info = await jsm.streams.info(stream);
    await jsm.streams.update(stream, { ...info.config, duplicate_window: 100_000_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await jetstream(nc).publish(subject, original.data, { headers: original.header })).duplicate).toBe(false);
    expect((await jsm.streams.info(stream)).state.messages).toBe(2);
    const consumer = consumerOf(prefix);
    consumer.start();
    await until(() => drained(consumer), 30_000);
    expect(await countOf('twice-held')).toBe(20);
    await consumer.shutdown();
  });

  it('acks a batch its index knows as committed though the bucket lost the manifest (every node killed at once), not storing it twice', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    const consumer = consumerOf(prefix, { maxBackoffMs: 200 });
    // The batch is stored and committed; then its ack fails, and the bucket comes back without its manifests.
    const internals = consumer as unknown as { ack(messages: unknown[], what: string): Promise<void> };
    const ack = internals.ack.bind(consumer);
    let lost = false;
    vi.spyOn(internals, 'ack').mockImplementation(async (messages, what) => {
      if (lost) return ack(messages, what);
      lost = true;
      await loseManifests(prefix);
      throw new Error('no JetStream answered the ack (503)');
    });
    consumer.start();
    await bus.publish(chunksOf('manifest-lost', 30));
    await until(async () => lost && (await drained(consumer)), 30_000);
    expect(await countOf('manifest-lost')).toBe(30);
    await consumer.shutdown();
  });

  it('finishes a batch its index knows as pending under its own token when the bucket lost the manifest, not storing it twice', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    // The insert lands, then the consumer fails before it commits, and the bucket comes back without the manifest.
    let lost = false;
    const losingSink: ChunkSink = async (chunks, token) => {
      await sink(chunks, token);
      if (lost) return;
      lost = true;
      await loseManifests(prefix);
      throw new SluiceError('unavailable', 'the connection to storage failed after the insert');
    };
    const consumer = consumerOf(prefix, { maxBackoffMs: 200 }, losingSink);
    consumer.start();
    await bus.publish(chunksOf('pending-lost', 30));
    await until(async () => lost && (await drained(consumer)), 30_000);
    expect(await countOf('pending-lost')).toBe(30);
    await consumer.shutdown();
  });

  it('finishes a pending batch whose messages came back under other sequences, under its own token, not storing them twice', async () => {
    const { prefix, bus } = fixture();
    const { stream } = streamOf(prefix, 'otel_traces');
    const jsm = await jetstreamManager(nc);
    await bus.start();
    await bus.publish(chunksOf('moved-earlier', 5));
    await storeAll(prefix, 'moved-earlier'); // a consumer ran before: the manifest bucket is there
    await bus.publish(chunksOf('moved-pending-a', 20));
    await bus.publish(chunksOf('moved-pending-b', 20));
    const [a, b] = [(await jsm.streams.getMessage(stream, { seq: 2 }))!, (await jsm.streams.getMessage(stream, { seq: 3 }))!];
    // Their batch was inserted, and the consumer died before it committed.
    const token = `${stream}:2-3:landed`;
    await sink([a, b].map((one) => ({ table: 'otel_traces', columns: one.header.get('Sluice-Columns').split(','), rows: Number(one.header.get('Sluice-Rows')), data: one.data })), token);
    const manifests = await new Kvm(nc).open(manifestBucketOf(prefix));
    await manifests.put(`${stream}.2-landed`, JSON.stringify({ token, seqs: [2, 3], ids: [a.header.get('Nats-Msg-Id'), b.header.get('Nats-Msg-Id')], state: 'pending' }));
    // The history that wins: a newcomer first, then the two, each one sequence later.
    await winningHistory(prefix, bus, ['moved-newcomer-2', 'moved-newcomer-3'], [a, b]);
    const consumer = consumerOf(prefix);
    consumer.start();
    await until(() => drained(consumer), 30_000);
    expect(await Promise.all(['moved-pending-a', 'moved-pending-b', 'moved-newcomer-2', 'moved-newcomer-3'].map(countOf))).toEqual([20, 20, 20, 20]);
    expect(JSON.parse((await manifests.get(`${stream}.2-landed`))!.string())).toMatchObject({ state: 'committed', seqs: [2, 3] });
    await consumer.shutdown();
  });

  it('finishes a pending batch without the new message that took the sequence of one of its own', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    const { stream } = streamOf(prefix, 'otel_traces');
    const jsm = await jetstreamManager(nc);
    // A consumer that ran before creates the manifest bucket.
    const earlier = consumerOf(prefix);
    earlier.start();
    await until(async () => (earlier as unknown as { manifests: Map<string, ManifestIndex> }).manifests.size > 0, 15_000);
    await earlier.shutdown();
    await bus.publish(chunksOf('pending-own', 20));
    await bus.publish(chunksOf('pending-newcomer', 20));
    const msgIdAt = async (seq: number) => (await jsm.streams.getMessage(stream, { seq }))!.header.get('Nats-Msg-Id');
    // A batch of messages 1 and 2 whose insert landed before the crash; message 2 is gone and a newcomer has its sequence.
    const token = `${stream}:1-2:landed`;
    const own = (await jsm.streams.getMessage(stream, { seq: 1 }))!;
    await sink([{ table: 'otel_traces', columns: own.header.get('Sluice-Columns').split(','), rows: Number(own.header.get('Sluice-Rows')), data: own.data }], token);
    const manifests = await new Kvm(nc).open(manifestBucketOf(prefix));
    const ownId = await msgIdAt(1);
    await manifests.put(`${stream}.1`, JSON.stringify({ token, seqs: [1, 2], ids: [ownId, 'a-message-now-gone'], state: 'pending' }));
    const consumer = consumerOf(prefix);
    consumer.start();
    await until(() => drained(consumer), 30_000);
    // Inserted again under the batch's token, the newcomer would have been dropped as a duplicate.
    expect([await countOf('pending-own'), await countOf('pending-newcomer')]).toEqual([20, 20]);
    // Committed naming only what its insert had: the gone message, were it back, would be stored, not taken as stored.
    expect(JSON.parse((await manifests.get(`${stream}.1`))!.string())).toMatchObject({ state: 'committed', seqs: [1], ids: [ownId] });
    await consumer.shutdown();
  });

  it('a pull that ends in an error keeps the messages it already delivered (no wait for ackWait)', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    // One message per publish (awaited one by one): pulls of two messages need several pulls.
    for (let i = 0; i < 4; i++) await bus.publish(chunksOf('early-end', 100));
    const consumer = new JetStreamStorageConsumer(
      nc,
      { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], fetchMessages: 2, batchRows: 1_000_000, batchMaxWaitMs: 1000, ackWaitMs: 30_000, log },
      sink,
    );
    // The second pull of the first batch fails (its connection broke after delivering).
    const puller = (consumer as unknown as { puller: NatsDirect }).puller;
    const fetch = puller.fetch.bind(puller);
    let pulls = 0;
    puller.fetch = async (...args) => {
      if (++pulls !== 2) return fetch(...args);
      throw new Error('connection closed');
    };
    consumer.start();
    await until(async () => (await countOf('early-end')) === 400, 10_000);
    expect(pulls).toBeGreaterThan(2);
    expect(consumer.stats.redelivered).toBe(0);
    await consumer.shutdown();
  });

  it('retries a batch JetStream cannot take at most 5 s apart, not backed off as far as for storage; then stores it once', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    // The manifest bucket refuses writes, as a bucket without a leader after every node restarted does.
    let refusing = true;
    const put = Bucket.prototype.put;
    vi.spyOn(Bucket.prototype, 'put').mockImplementation(function (this: Bucket, ...args: Parameters<Bucket['put']>) {
      if (refusing && this.bucket === manifestBucketOf(prefix)) return Promise.reject(new Error('jetstream is not enabled'));
      return put.apply(this, args);
    });
    const { log: captured, entries } = capturedLog();
    const consumer = consumerOf(prefix, { maxBackoffMs: 30_000, log: captured });
    consumer.start();
    await bus.publish(chunksOf('nats-outage', 40));
    const backoffs = () => entries().filter((entry) => entry.msg === 'batch not stored; will retry').map((entry) => entry.backoffMs as number);
    await until(async () => backoffs().length >= 6, 60_000);
    expect(backoffs().slice(0, 6)).toEqual([250, 500, 1000, 2000, 4000, 5000]);
    refusing = false;
    await until(async () => (await countOf('nats-outage')) === 40 && (await consumer.lag('otel_traces')).messages === 0);
    await consumer.shutdown();
  });

  it('finishes the batch whose manifest put timed out but landed when its messages come back, not another: one manifest per message', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    // The put lands, its answer is lost, and the watch that would tell of it says nothing (as under an outage).
    let lost = false;
    const put = Bucket.prototype.put;
    vi.spyOn(Bucket.prototype, 'put').mockImplementation(async function (this: Bucket, ...args: Parameters<Bucket['put']>) {
      const revision = await put.apply(this, args);
      if (lost || this.bucket !== manifestBucketOf(prefix)) return revision;
      lost = true;
      throw new Error('timeout');
    });
    watchFeeds(manifestBucketOf(prefix)).muteNextOpen();
    const consumer = consumerOf(prefix, { maxBackoffMs: 200 });
    consumer.start();
    await bus.publish(chunksOf('put-lost', 30));
    await until(async () => lost && (await drained(consumer)), 30_000);
    expect(await countOf('put-lost')).toBe(30);
    // Two manifests naming one message would store it twice under two tokens for whoever finished the other one (after a restart).
    const manifests = await new Kvm(nc).open(manifestBucketOf(prefix));
    const named: string[] = [];
    for await (const key of await manifests.keys()) named.push(...(JSON.parse((await manifests.get(key))!.string()) as Manifest).ids!);
    expect(named.length).toBeGreaterThan(0);
    expect(named.length).toBe(new Set(named).size);
    await consumer.shutdown();
  });

  it('retries while storage is down, without dead-lettering, and stores once', async () => {
    const { bus } = fixture();
    let failures = 3;
    const flakySink: ChunkSink = async (chunks, token) => {
      if (failures-- > 0) throw new SluiceError('unavailable', 'storage down');
      await sink(chunks, token);
    };
    await bus.start();
    bus.consume(flakySink);
    await bus.publish(chunksOf('flaky', 50));
    await until(async () => (await countOf('flaky')) === 50);
    await bus.shutdown();
    expect(await countOf('flaky')).toBe(50);
  });

  it('dead-letters a message that keeps failing for a non-storage reason', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    const consumer = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 200, ackWaitMs: 1000, maxAttempts: 2, maxBackoffMs: 100, log }, async () => {
      throw new SluiceError('bad_request', 'storage refused the rows');
    });
    consumer.start();
    await bus.publish(chunksOf('poison', 5));
    await until(async () => consumer.stats.deadLettered > 0);
    const jsm = await jetstreamManager(nc);
    const parked = await jsm.streams.getMessage(`${prefix}_DEADLETTER`, { last_by_subj: `${prefix.toLowerCase()}.deadletter.otel_traces` });
    expect(parked?.header.get('Sluice-Error')).toContain('storage refused the rows');
    await consumer.shutdown();
  });

  it('dead-letters a poison message at once with its reason; the good rows of its batch are stored once and the stream keeps flowing', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    const day = 86_400_000_000_000n;
    const today = (BigInt(Date.now()) * 1_000_000n) / day * day;
    const oneChunk = (name: string, spans: number, startNanos: (i: number) => bigint) =>
      transcodeOtlp('traces', 'protobuf', encodeTraces(traceRequest({ spans, name, startNanos })), 'src', 1024 * 1024).tables;
    await bus.publish(chunksOf('before', 100));
    // Rows cut short: storage can never read them.
    const [poison] = oneChunk('poison', 20, (i) => today - BigInt(i) * day);
    await bus.publish([{ ...poison!, data: poison!.data.subarray(0, poison!.data.byteLength - 3) }]);
    await bus.publish(oneChunk('early', 60, (i) => today - BigInt(60 + i) * day)); // 60 days each, 120 together: one insert
    await bus.publish(oneChunk('late', 60, (i) => today - BigInt(i) * day));
    await bus.publish(chunksOf('after', 100));
    const consumer = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchRows: 1_000_000, batchMaxWaitMs: 1000, log }, sink);
    consumer.start();
    await until(async () => (await consumer.lag('otel_traces').then((lag) => lag.messages, () => -1)) === 0 && (await countOf('after')) === 100);
    for (const [name, spans] of [['before', 100], ['early', 60], ['late', 60], ['after', 100], ['poison', 0]] as const) {
      expect(await countOf(name), name).toBe(spans);
    }
    expect(consumer.stats.deadLettered).toBe(1);
    const jsm = await jetstreamManager(nc);
    const parked = await jsm.streams.getMessage(`${prefix}_DEADLETTER`, { last_by_subj: `${prefix.toLowerCase()}.deadletter.otel_traces` });
    expect(parked?.header.get('Sluice-Error')).toContain('storage refused the rows for otel_traces: code 32 ATTEMPT_TO_READ_AFTER_EOF');
    expect(parked?.header.get('Sluice-Attempts')).toBe('1');
    expect(consumer.statuses()['consumer.otel_traces']!.ok).toBe(true);

    await bus.publish(chunksOf('later', 10));
    await until(async () => (await countOf('later')) === 10);
    await consumer.shutdown();
  });

  it('restarts a consumer loop that failed, and shows it in its status', async () => {
    const { prefix, bus } = fixture();
    // No stream yet: the loop cannot set up its durable consumer and fails.
    const restarts: string[] = [];
    const consumer = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 200, maxBackoffMs: 500, log, onRestart: (loop) => restarts.push(loop) }, sink);
    consumer.start();
    await until(async () => restarts.length > 0);
    expect(consumer.statuses()['consumer.otel_traces']!.ok).toBe(false);
    await bus.start();
    await bus.publish(chunksOf('restarted', 20));
    await until(async () => (await countOf('restarted')) === 20);
    expect(restarts[0]).toBe('consumer.otel_traces');
    expect(consumer.statuses()['consumer.otel_traces']).toMatchObject({ ok: true, figures: { restarts: restarts.length } });
    await consumer.shutdown();
  });

  it('stops without waiting for its pull: the batch under way is stored, the rest of the wait is not waited for', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    // A batch that waits a minute for more rows than will come.
    const consumer = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 60_000, log }, sink);
    consumer.start();
    await bus.publish(chunksOf('stop-mid-batch', 20));
    const jsm = await jetstreamManager(nc);
    const pulled = () => jsm.consumers.info(streamOf(prefix, 'otel_traces').stream, DURABLE).then((info) => info.num_ack_pending, () => 0);
    await until(async () => (await pulled()) > 0);
    const stopped = await Promise.race([
      consumer.shutdown().then(() => 'stopped'),
      new Promise((resolve) => setTimeout(resolve, 20_000, 'still waiting for the pull')),
    ]);
    expect(stopped).toBe('stopped');
    expect(await countOf('stop-mid-batch')).toBe(20);
    expect(await messagesIn(prefix, 'otel_traces')).toBe(0);
    await bus.shutdown();
  });

  it('refuses a publish with 503 when JetStream cannot acknowledge it', async () => {
    const { bus } = fixture();
    await bus.start();
    const closed = await connect({ servers: NATS_URL });
    const orphan = new JetStreamBus(closed, { natsUrl: NATS_URL, prefix: 'NOSUCHSTREAM', tables: ['otel_traces'], maxStreamBytes: 1024 * 1024, retryAfterSeconds: 7, publishTimeoutMs: 500 });
    const error = await orphan.publish(chunksOf('nowhere', 1)).catch((err) => err);
    await closed.close();
    expect(error).toBeInstanceOf(SluiceError);
    expect(error.code).toBe('unavailable');
    expect(error.retryAfterSeconds).toBe(7);
  });
});

describe('JetStreamBus batching', { timeout: 120_000 }, () => {
  it('carries the rows of requests published together in shared messages, and stores every request whole and once', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    // 20 requests of two chunks each (about 20 KiB): 40 messages if each chunk were one.
    await Promise.all(Array.from({ length: 20 }, (_, i) => bus.publish(chunksOf(`batched-${i}`, 120))));
    const messages = await messagesIn(prefix, 'otel_traces');
    expect(messages).toBeLessThanOrEqual(2);
    const jsm = await jetstreamManager(nc);
    const { first_seq } = (await jsm.streams.info(streamOf(prefix, 'otel_traces').stream)).state;
    let rows = 0;
    for (let seq = first_seq; seq < first_seq + messages; seq++) {
      rows += Number((await jsm.streams.getMessage(streamOf(prefix, 'otel_traces').stream, { seq }))!.header.get('Sluice-Rows'));
    }
    expect(rows).toBe(2400);

    bus.consume(sink);
    await until(async () => (await bus.figures()).consumer!.lag.find((lag) => lag.table === 'otel_traces')?.messages === 0);
    for (let i = 0; i < 20; i++) expect(await countOf(`batched-${i}`), `batched-${i}`).toBe(120);
    await bus.shutdown();
  });

  it("parks only the refused request's rows of a message shared by several requests; the others are stored once", async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    // One turn of the event loop: all six requests share one message.
    const names = ['a', 'b', 'poison', 'c', 'd', 'e'].map((n) => `shared-${n}`);
    await Promise.all(names.map((name) => bus.publish(chunksOf(name, 30).slice(0, 1))));
    expect(await messagesIn(prefix, 'otel_traces')).toBe(1);
    // Storage refuses any insert holding the poison request's rows, as it would rows it cannot parse.
    const poison = Buffer.from('shared-poison');
    let inserts = 0;
    const refusing: ChunkSink = async (chunks, token) => {
      inserts++;
      if (chunks.some((chunk) => Buffer.from(chunk.data.buffer, chunk.data.byteOffset, chunk.data.byteLength).includes(poison))) {
        throw new SluiceError('bad_request', 'storage refused these rows');
      }
      await sink(chunks, token);
    };
    const consumer = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 300, log }, refusing);
    consumer.start();
    await until(async () => consumer.stats.deadLettered > 0 && (await consumer.lag('otel_traces').then((lag) => lag.messages, () => -1)) === 0);
    for (const name of names) expect(await countOf(name), name).toBe(name === 'shared-poison' ? 0 : 30);
    expect(consumer.stats.deadLettered).toBe(1);
    const jsm = await jetstreamManager(nc);
    const parked = await jsm.streams.getMessage(`${prefix}_DEADLETTER`, { last_by_subj: `${prefix.toLowerCase()}.deadletter.otel_traces` });
    expect(parked?.header.get('Sluice-Origin-Part')).toBe('2');
    expect(parked?.header.get('Sluice-Rows')).toBe('30');
    expect(parked?.header.get('Sluice-Parts')).toBe('');
    expect(Buffer.from(parked!.data).includes(poison)).toBe(true);
    expect(Buffer.from(parked!.data).includes(Buffer.from('shared-a'))).toBe(false);
    expect(inserts).toBeLessThan(12); // the message whole, then halves: O(log n) inserts
    await consumer.shutdown();
  });

  it('stores each request once when storage goes away while a shared message is being stored request by request', async () => {
    const { prefix, bus } = fixture();
    await bus.start();
    const names = ['a', 'poison', 'b', 'c'].map((n) => `outage-${n}`);
    await Promise.all(names.map((name) => bus.publish(chunksOf(name, 30).slice(0, 1))));
    const poison = Buffer.from('outage-poison');
    let partInserts = 0;
    const flaky: ChunkSink = async (chunks, token) => {
      if (chunks.some((chunk) => Buffer.from(chunk.data.buffer, chunk.data.byteOffset, chunk.data.byteLength).includes(poison))) {
        throw new SluiceError('bad_request', 'storage refused these rows');
      }
      await sink(chunks, token);
      // The first part stored, then storage is gone for a moment: the message comes back and is stored apart again.
      if (token?.includes(':parts:') && ++partInserts === 1) throw new SluiceError('unavailable', 'storage went away');
    };
    const consumer = new JetStreamStorageConsumer(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], batchMaxWaitMs: 300, maxBackoffMs: 200, log }, flaky);
    consumer.start();
    await until(async () => consumer.stats.deadLettered > 0 && (await consumer.lag('otel_traces').then((lag) => lag.messages, () => -1)) === 0);
    for (const name of names) expect(await countOf(name), name).toBe(name === 'outage-poison' ? 0 : 30);
    expect(partInserts).toBeGreaterThan(1);
    await consumer.shutdown();
  });

  it('a refused message refuses every request tied to it and withdraws their other messages; requests not tied to it are stored', async () => {
    const { prefix, bus } = fixture(64 * 1024 * 1024, ['otel_traces', 'otel_logs', 'otel_metrics_sum']);
    await bus.start();
    // No stream takes the logs subject any more: its message is refused.
    await (await jetstreamManager(nc)).streams.delete(streamOf(prefix, 'otel_logs').stream);
    // Published together: a, b and c share the traces message; b's logs message ties it to the refusal.
    const a = outcome(bus.publish([rowsOf('otel_traces')]));
    const b = outcome(bus.publish([rowsOf('otel_traces'), rowsOf('otel_logs')]));
    const c = outcome(bus.publish([rowsOf('otel_traces', 3)]));
    const d = outcome(bus.publish([rowsOf('otel_metrics_sum')]));
    await until(async () => [a, b, c, d].every((request) => request.settled !== undefined));
    for (const request of [a, b, c]) expect(request.settled).toMatchObject({ code: 'unavailable', retryAfterSeconds: 5 });
    expect(d.settled).toBe('ok');
    expect(await messagesIn(prefix, 'otel_traces')).toBe(0);
    expect(await messagesIn(prefix, 'otel_metrics_sum')).toBe(1);

    // A later request is not tied to the refused ones.
    await bus.publish([rowsOf('otel_traces')]);
    expect(await messagesIn(prefix, 'otel_traces')).toBe(1);
  });

  it('resolves a request only once JetStream acknowledged every message holding its rows', async () => {
    const { prefix, bus } = fixture(64 * 1024 * 1024, ['otel_traces', 'otel_logs']);
    await bus.start();
    // PubAcks of this bus's messages are held here, by subject, until the test passes them on.
    const held = new Map<string, () => void>();
    const direct = (bus as unknown as { direct: NatsDirect }).direct;
    const request = direct.request.bind(direct);
    direct.request = async (subject, headers, parts, timeoutMs) => {
      const answer = await request(subject, headers, parts, timeoutMs);
      await new Promise<void>((resolve) => held.set(subject, resolve));
      return answer;
    };
    const a = outcome(bus.publish([rowsOf('otel_traces')]));
    const b = outcome(bus.publish([rowsOf('otel_traces'), rowsOf('otel_logs')]));
    const traces = streamOf(prefix, 'otel_traces').subject;
    const logs = streamOf(prefix, 'otel_logs').subject;
    await until(async () => held.has(traces) && held.has(logs));
    expect(await messagesIn(prefix, 'otel_traces')).toBe(1);

    held.get(traces)!();
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    // a's message is acknowledged, but it shares it with b, whose logs message is not yet.
    expect([a.settled, b.settled]).toEqual([undefined, undefined]);

    held.get(logs)!();
    await until(async () => a.settled !== undefined && b.settled !== undefined);
    expect([a.settled, b.settled]).toEqual(['ok', 'ok']);
  });
});
