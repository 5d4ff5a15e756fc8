/**
 * Partitioned row streams (SLUICE_NATS_PARTITIONS) against the real nats-server (NATS_URL,
 * default nats://127.0.0.1:4222) and chDB: gateways spread a table's messages over its
 * partitions, consumers pull from every partition stream there is, and the partition count
 * changes while traffic flows with every row stored once. The three-node side (leaders spread
 * over the nodes, consumers killed and added) is in test/cluster-partitions.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SluiceMetrics } from '../core/metrics.ts';
import { transcodeOtlp } from '../pipeline/otlp/index.ts';
import { ChdbStorage } from '../storage/chdb.ts';
import { removeNatsPrefixes } from '../test/harness.ts';
import { encodeTraces, traceRequest } from '../test/otlp-fixtures.ts';
import type { ChunkSink } from './bus.ts';
import { JetStreamBus } from './jetstream.ts';
import { JetStreamStorageConsumer } from './jetstream-consumer.ts';
import { MAX_PARTITIONS, parsePartitions, partitionOf, streamOf } from './jetstream-names.ts';
import { storageSink } from './storage-sink.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const log = pino({ level: process.env.SLUICE_TEST_LOG_LEVEL ?? 'silent' });
const prefixes: string[] = [];
let nc: NatsConnection;
let dir: string;
let storage: ChdbStorage;
let sink: ChunkSink;

beforeAll(async () => {
  nc = await connect({ servers: NATS_URL, timeout: 3000 });
  dir = await mkdtemp(join(tmpdir(), 'sluice-partitions-'));
  storage = new ChdbStorage(dir, 'otel');
  await storage.start();
  sink = storageSink(storage, new SluiceMetrics());
});

afterAll(async () => {
  await removeNatsPrefixes(NATS_URL, prefixes.map((prefix) => `${prefix}_`));
  await nc.close();
  await storage.shutdown();
  await rm(dir, { recursive: true, force: true });
});

function newPrefix(): string {
  const prefix = `Q${randomBytes(4).toString('hex').toUpperCase()}`;
  prefixes.push(prefix);
  return prefix;
}

function gateway(prefix: string, partitions: number, maxStreamBytes = 64 * 1024 * 1024): JetStreamBus {
  return new JetStreamBus(nc, { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], partitions: new Map([['otel_traces', partitions]]), maxStreamBytes, retryAfterSeconds: 5, log });
}

function consumer(prefix: string, partitions: number): JetStreamStorageConsumer {
  return new JetStreamStorageConsumer(
    nc,
    { natsUrl: NATS_URL, prefix, tables: ['otel_traces'], partitions: new Map([['otel_traces', partitions]]), batchMaxWaitMs: 200, discoverEveryMs: 200, log },
    sink,
  );
}

const chunksOf = (name: string, spans: number) => transcodeOtlp('traces', 'protobuf', encodeTraces(traceRequest({ spans, name })), 'src', 64 * 1024).tables;

/** Publishes `requests` requests of `spans` spans named `<name>-<i>`, each in a turn of its own (so each is a message of its own). */
async function publishEach(bus: JetStreamBus, name: string, requests: number, spans = 10): Promise<void> {
  for (let i = 0; i < requests; i++) await bus.publish(chunksOf(`${name}-${i}`, spans));
}

/** Spans stored per name starting with `name-`. */
async function storedOf(name: string): Promise<Map<string, number>> {
  const rows = (await storage.query(`SELECT SpanName, count() AS n FROM otel.otel_traces WHERE startsWith(SpanName, '${name}-') GROUP BY SpanName`))
    .split('\n').filter(Boolean).map((line) => JSON.parse(line) as { SpanName: string; n: string });
  return new Map(rows.map((row) => [row.SpanName, Number(row.n)]));
}

/** Every request `<name>-0..requests-1` stored with exactly `spans` spans (polled: consumers store in the background). */
async function expectStoredOnce(name: string, requests: number, spans = 10): Promise<void> {
  const wanted = (stored: Map<string, number>) => stored.size === requests && [...stored.values()].every((n) => n === spans);
  const deadline = Date.now() + 60_000;
  let stored = await storedOf(name);
  while (!wanted(stored) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    stored = await storedOf(name);
  }
  await new Promise((resolve) => setTimeout(resolve, 500)); // a second insert would land now
  stored = await storedOf(name);
  expect(stored.size, `${name}: requests stored`).toBe(requests);
  expect([...stored].filter(([, n]) => n !== spans), `${name}: stored twice or in part`).toEqual([]);
}

async function messagesIn(stream: string): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(stream)).state.messages;
}

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`not in ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('partition names and the setting', () => {
  it('keeps the unpartitioned names for partition 0 and reads a partition back from its stream name', () => {
    expect(streamOf('SLUICE', 'otel_traces')).toEqual({ stream: 'SLUICE_ROWS_OTEL_TRACES', subject: 'sluice.rows.otel_traces' });
    expect(streamOf('SLUICE', 'otel_traces', 2)).toEqual({ stream: 'SLUICE_ROWS_OTEL_TRACES_P2', subject: 'sluice.rows.otel_traces.p2' });
    expect(partitionOf('SLUICE', 'otel_traces', 'SLUICE_ROWS_OTEL_TRACES')).toBe(0);
    expect(partitionOf('SLUICE', 'otel_traces', 'SLUICE_ROWS_OTEL_TRACES_P12')).toBe(12);
    for (const other of ['SLUICE_ROWS_OTEL_TRACES_P0', 'SLUICE_ROWS_OTEL_TRACES_P', 'SLUICE_ROWS_OTEL_TRACES_TRACE_ID_TS', 'SLUICE_ROWS_OTEL_LOGS', 'OTHER_ROWS_OTEL_TRACES_P1']) {
      expect(partitionOf('SLUICE', 'otel_traces', other), other).toBeUndefined();
    }
  });

  it('reads a count for every table and overrides per table, and refuses what it cannot read', () => {
    const tables = ['otel_traces', 'otel_logs', 'deploy_markers'];
    expect(Object.fromEntries(parsePartitions('1', tables))).toEqual({ otel_traces: 1, otel_logs: 1, deploy_markers: 1 });
    expect(Object.fromEntries(parsePartitions('otel_traces=3,otel_logs=2', tables))).toEqual({ otel_traces: 3, otel_logs: 2, deploy_markers: 1 });
    expect(Object.fromEntries(parsePartitions('2,otel_traces=6', tables))).toEqual({ otel_traces: 6, otel_logs: 2, deploy_markers: 2 });
    expect(() => parsePartitions('otel_spans=3', tables)).toThrow(/otel_spans: not a table/);
    expect(() => parsePartitions('0', tables)).toThrow(`partitions must be a whole number from 1 to ${MAX_PARTITIONS}`);
    expect(() => parsePartitions(`otel_traces=${MAX_PARTITIONS + 1},many`, tables)).toThrow(/otel_traces: partitions must be.*; every table: partitions must be/);
  });
});

describe('partitioned row streams', { timeout: 120_000 }, () => {
  it('spreads a table\'s messages over its partitions in turn, and one consumer stores every request once from all of them', async () => {
    const prefix = newPrefix();
    const bus = gateway(prefix, 3);
    await bus.start();
    await publishEach(bus, 'spread', 30);
    // One message per request, each to the next partition: ten each.
    for (let partition = 0; partition < 3; partition++) expect(await messagesIn(streamOf(prefix, 'otel_traces', partition).stream)).toBe(10);
    bus.consume(sink);
    await expectStoredOnce('spread', 30);
    await until(async () => {
      const lag = (await bus.figures()).consumer?.lag ?? [];
      return lag.length === 3 && lag.every((partition) => partition.messages === 0);
    }, 'lag 0 reported for each of the 3 partitions');
    expect(Object.keys(bus.statuses()).sort()).toEqual(['bus', 'consumer.otel_traces', 'consumer.otel_traces.p1', 'consumer.otel_traces.p2']);
    await bus.shutdown();
  });

  it('passes over a partition whose stream is full while another has room; refuses the table only when all are full', async () => {
    const prefix = newPrefix();
    const bus = gateway(prefix, 2, 1024 * 1024);
    await bus.start();
    // Partition 1 filled to its max_bytes behind the bus's back.
    const js = jetstream(nc);
    const fill = async (partition: number) => {
      for (const size of [200 * 1024, 10 * 1024, 512, 16]) {
        while (await js.publish(streamOf(prefix, 'otel_traces', partition).subject, new Uint8Array(size)).then(() => true, () => false));
      }
    };
    await fill(1);
    const before = await messagesIn(streamOf(prefix, 'otel_traces', 1).stream);
    // The first request in turn for partition 1 is refused, and marks it full...
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) outcomes.push(await bus.publish(chunksOf(`around-${i}`, 10)).then(() => 'ok', (err: Error) => err.message));
    // ...the rest go to partition 0, and the table is not refused up front.
    expect(outcomes.filter((outcome) => outcome !== 'ok').length).toBeLessThanOrEqual(1);
    expect(outcomes.filter((outcome) => outcome === 'ok').length).toBeGreaterThanOrEqual(9);
    expect(bus.refusal(['otel_traces'])).toBeUndefined();
    expect(await messagesIn(streamOf(prefix, 'otel_traces', 1).stream)).toBe(before);
    expect(bus.statuses().bus).toMatchObject({ ok: false, detail: expect.stringContaining(streamOf(prefix, 'otel_traces', 1).stream) });

    // Both full: refused, and then refused up front.
    await fill(0);
    const refusals = await Promise.all([0, 1].map((i) => bus.publish(chunksOf(`full-${i}`, 10)).then(() => 'ok', (err: Error) => err.message)));
    expect(refusals).toEqual([expect.stringContaining('the bus is full'), expect.stringContaining('the bus is full')]);
    expect(bus.refusal(['otel_traces'])).toMatchObject({ code: 'unavailable', message: expect.stringContaining('the bus is full') });
    await bus.shutdown();
  });

  it('follows a change of the partition count: grown, then shrunk and the surplus stream drained and removed, every request stored once', async () => {
    const prefix = newPrefix();
    // Consumers configured for one partition; gateways change their count in a rolling restart.
    const first = consumer(prefix, 1);
    const one = gateway(prefix, 1);
    await one.start();
    first.start();
    await publishEach(one, 'grow', 6);

    // Grown to 3: the new gateway creates the streams; the running consumer finds and drains them.
    const three = gateway(prefix, 3);
    await three.start();
    await publishEach(three, 'grow3', 12);
    await publishEach(one, 'old', 3); // a gateway not yet restarted goes on with partition 0
    await expectStoredOnce('grow', 6);
    await expectStoredOnce('grow3', 12);
    await expectStoredOnce('old', 3);
    expect(Object.keys(first.statuses()).sort()).toEqual(['consumer.otel_traces', 'consumer.otel_traces.p1', 'consumer.otel_traces.p2']);

    // A consumer added now pulls from the three as well, beside the first (configured for all three).
    const second = consumer(prefix, 3);
    second.start();
    await until(() => Object.keys(second.statuses()).length === 3, 'the added consumer found the three partitions');

    // Shrunk to 2: partition 2 gets nothing new; what it holds is drained; then it is removed.
    await three.shutdown();
    const two = gateway(prefix, 2);
    await two.start();
    await publishEach(two, 'shrink', 10);
    const surplus = streamOf(prefix, 'otel_traces', 2).stream;
    await expectStoredOnce('shrink', 10);
    expect((await first.lag('otel_traces', 2)).messages).toBe(0);
    await (await jetstreamManager(nc)).streams.delete(surplus);
    await until(() => !('consumer.otel_traces.p2' in first.statuses()) && !('consumer.otel_traces.p2' in second.statuses()), 'the loops of the removed partition ended');
    await publishEach(two, 'after', 8);
    await expectStoredOnce('after', 8);
    for (const running of [first, second]) expect(Object.values(running.statuses()).every((status) => status.ok)).toBe(true);
    expect((await first.lags()).map((lag) => lag.partition).sort()).toEqual([0, 1]);
    await Promise.all([first.shutdown(), second.shutdown(), one.shutdown(), two.shutdown()]);
  });
});
