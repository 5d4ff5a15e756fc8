/**
 * Cluster faults at process level, with exact counts: two `sluice gateway` and two `sluice
 * consume` OS processes on the real nats-server (NATS_URL, default nats://127.0.0.1:4222),
 * storage behind the ClickHouse HTTP facade (test/clickhouse-facade.ts: one process owns chDB,
 * the consumers use the real server driver), rate limits in a Redis of this test's own. OTLP
 * requests go to both gateways in turn; every span answered 200 must be stored exactly once:
 *   official exporters (http/protobuf, http/json, grpc) through both gateways;
 *   a. baseline;
 *   b. a consumer SIGKILLed while its insert is committed but unanswered (the redelivered
 *      batch is inserted again with the same deduplication token);
 *   c. storage answering 503 for 12 s (consumers back off, then drain; nothing dead-lettered);
 *   d. Redis killed (gateways fall back to local buckets and keep answering 200);
 *   e. a backlog drained by two fresh consumers (timed; figures printed).
 * Streams and buckets carry a prefix of this run's own and are removed at the end; each
 * process logs to <role>-<n>.log in a temp dir sluice-processes-… (SLUICE_TEST_KEEP=1 keeps it,
 * SLUICE_TEST_LOG_LEVEL sets the level, default warn).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadLetterOf, DURABLE, streamOf } from '../bus/jetstream-names.ts';
import { startClickhouseFacade, type ClickhouseFacade } from './clickhouse-facade.ts';
import { connectNats } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';
import { exportOnce, exporterFor, finishedSpans } from './otel-clients.ts';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { runSluice, startRedis, startSluiceProcess, type RedisProcess, type SluiceProcess } from './sluice-processes.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = `P${randomBytes(4).toString('hex').toUpperCase()}`;
const TRACES = streamOf(prefix, 'otel_traces').stream;
const ACK_WAIT_SECONDS = 10;

let dir: string;
let facade: ClickhouseFacade | undefined;
let redis: RedisProcess | undefined;
let nc: NatsConnection | undefined;
let jsm: JetStreamManager;
let apiKey: string;
const processes: SluiceProcess[] = [];
let gateways: SluiceProcess[] = [];
let consumers: SluiceProcess[] = [];
let started = 0;
const figures: string[] = [];

function env(): Record<string, string> {
  return {
    NATS_URL,
    SLUICE_NATS_PREFIX: prefix,
    SLUICE_NATS_MAX_STREAM_BYTES: String(64 * 1024 * 1024),
    CLICKHOUSE_URL: facade!.url,
    REDIS_URL: redis!.url,
    SLUICE_RATE_LIMIT_PER_MINUTE: '6000000',
    SLUICE_RATE_LIMIT_BURST: '100000',
    SLUICE_WORKERS: '1',
    SLUICE_RETRY_AFTER_SECONDS: '1',
    // A dead consumer's batch comes back after the ack wait: 10 s instead of the default 30 s.
    SLUICE_NATS_ACK_WAIT_SECONDS: String(ACK_WAIT_SECONDS),
  };
}

async function start(role: 'gateway' | 'consume'): Promise<SluiceProcess> {
  const running = await startSluiceProcess(role, `${role}-${++started}`, dir, env());
  processes.push(running);
  return running;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-processes-'));
  [facade, redis] = await Promise.all([startClickhouseFacade(), startRedis()]);
  nc = await connectNats(NATS_URL);
  jsm = await jetstreamManager(nc);
  // The real schema, created the way an operator does it; then a source, from the CLI (NATS KV).
  expect(JSON.parse(await runSluice(['migrate'], env())).current).toBeGreaterThan(0);
  apiKey = JSON.parse(await runSluice(['sources', 'create', '--name', 'processes'], env())).apiKey;
  consumers = await Promise.all([start('consume'), start('consume')]);
  gateways = await Promise.all([start('gateway'), start('gateway')]);
}, 180_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  if (nc) {
    for await (const stream of jsm.streams.list()) {
      const name = stream.config.name;
      if (name.startsWith(`${prefix}_`) || name.startsWith(`KV_${prefix.toLowerCase()}_`)) await jsm.streams.delete(name);
    }
    await nc.close();
  }
  await facade?.stop();
  await redis?.stop();
  if (figures.length > 0) console.log(`cluster-processes figures (prefix ${prefix}):\n  ${figures.join('\n  ')}`);
  // SLUICE_TEST_KEEP=1 keeps the processes' logs and data dirs.
  if (process.env.SLUICE_TEST_KEEP) console.log(`kept ${dir}`);
  else await rm(dir, { recursive: true, force: true });
}, 120_000);

/** OTLP/HTTP trace requests to the gateways in turn, each span with a fresh id, until stopped. */
class Traffic {
  acknowledged = 0;
  requests = 0;
  /** Answers other than 200, by status (or the fetch error). */
  readonly refused: Record<string, number> = {};
  private running = true;
  private next = 0;
  private readonly loops: Promise<void>[];

  constructor(readonly service: string, { workers = 2, spans = 20, pauseMs = 40, limit = Infinity } = {}) {
    this.loops = Array.from({ length: workers }, async () => {
      while (this.running && this.requests < limit) {
        this.requests++;
        await this.send(spans);
        if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    });
  }

  private async send(spans: number): Promise<void> {
    const gateway = gateways[this.next++ % gateways.length]!;
    try {
      const response = await fetch(`${gateway.baseUrl}/v1/traces`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-protobuf', 'x-api-key': apiKey },
        body: encodeTraces(traceRequest({ spans, service: this.service })),
      });
      await response.arrayBuffer();
      if (response.status === 200) this.acknowledged += spans;
      else this.refused[response.status] = (this.refused[response.status] ?? 0) + 1;
    } catch (err) {
      const reason = (err as Error).message;
      this.refused[reason] = (this.refused[reason] ?? 0) + 1;
    }
  }

  async stop(): Promise<this> {
    this.running = false;
    await Promise.all(this.loops);
    return this;
  }

  /** Runs until `limit` requests were answered. */
  finished(): Promise<this> {
    return Promise.all(this.loops).then(() => this);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function stored(service: string): Promise<number> {
  const [row] = await facade!.rows<{ n: string }>(`SELECT count() AS n FROM otel.otel_traces WHERE ServiceName = '${service}'`);
  return Number(row!.n);
}

async function duplicates(service: string): Promise<number> {
  const [row] = await facade!.rows<{ n: string }>(
    `SELECT count() AS n FROM (SELECT SpanId FROM otel.otel_traces WHERE ServiceName = '${service}' GROUP BY SpanId HAVING count() > 1)`,
  );
  return Number(row!.n);
}

/** Messages of the traces stream not yet acked by a consumer (waiting, delivered, or held back by a nak). */
async function lag(): Promise<number> {
  const info = await jsm.consumers.info(TRACES, DURABLE);
  return info.num_pending + info.num_ack_pending;
}

/** Waits until every message is acked and `service` has at least `expected` spans; returns when that was. */
// Timeouts allow one ack wait: a message a dead or interrupted pull had taken comes back then.
async function drained(service: string, expected: number, timeoutMs: number): Promise<number> {
  const begin = Date.now();
  while ((await lag()) > 0 || (await stored(service)) < expected) {
    if (Date.now() - begin > timeoutMs) {
      throw new Error(`not drained in ${timeoutMs} ms: ${await stored(service)} of ${expected} stored, lag ${await lag()}`);
    }
    await sleep(100);
  }
  const at = Date.now();
  await sleep(1000); // nothing arrives late (a second insert of a batch would land now)
  return at;
}

/** What a client sent under one service name and what it was told. */
interface Sent {
  service: string;
  acknowledged: number;
  requests: number;
  refused: Record<string, number>;
}

/** stored == acknowledged and no SpanId twice; records the figures; returns when it was all stored. */
async function expectExactlyOnce(label: string, traffic: Sent, timeoutMs: number): Promise<number> {
  expect(traffic.refused, `${label}: every request answered 200`).toEqual({});
  expect(traffic.acknowledged).toBeGreaterThan(0);
  const begin = Date.now();
  const drainedAt = await drained(traffic.service, traffic.acknowledged, timeoutMs);
  const drainMs = drainedAt - begin;
  const [count, twice] = [await stored(traffic.service), await duplicates(traffic.service)];
  figures.push(`${label}: acknowledged ${traffic.acknowledged} spans (${traffic.requests} requests), stored ${count}, duplicate SpanIds ${twice}, drained ${drainMs} ms after the traffic stopped`);
  expect(count, `${label}: stored == acknowledged`).toBe(traffic.acknowledged);
  expect(twice, `${label}: duplicate SpanIds`).toBe(0);
  return drainedAt;
}

async function until(what: string, fn: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** A consumer counter's value (`sluice_consumer_<name>_total`; every process shows it). */
function figure(metrics: string, name: string): number {
  const match = new RegExp(`^sluice_consumer_${name}_total (\\d+)$`, 'm').exec(metrics);
  if (!match) throw new Error(`sluice_consumer_${name}_total is not in /metrics`);
  return Number(match[1]);
}

describe('cluster processes: 2 gateways, 2 consumers, storage behind the ClickHouse facade', () => {
  it('the official OpenTelemetry exporters, through both gateway processes, land exactly once', async () => {
    const traffic: Sent = { service: 'exporters', acknowledged: 0, requests: 0, refused: {} };
    for (const gateway of gateways) {
      for (const protocol of ['http/protobuf', 'http/json', 'grpc'] as const) {
        const target = { baseUrl: gateway.baseUrl, grpcAddress: `127.0.0.1:${gateway.grpcPort}`, apiKey };
        const batch = finishedSpans(traffic.service, 40);
        const result = await exportOnce(exporterFor<ReadableSpan[]>('traces', protocol, target), batch);
        traffic.requests++;
        if (result.code === 0) traffic.acknowledged += batch.length;
        else traffic.refused[`${protocol}: ${result.error?.message}`] = 1;
      }
    }
    expect(traffic.acknowledged).toBe(2 * 3 * 40);
    await expectExactlyOnce('exporters', traffic, 45_000);
  }, 120_000);

  it('a. baseline: every acknowledged span is stored once', async () => {
    const traffic = new Traffic('baseline');
    await sleep(3000);
    await expectExactlyOnce('a. baseline', await traffic.stop(), 45_000);
  }, 120_000);

  it('b. a consumer killed with SIGKILL in the middle of a batch: its batch lands once after redelivery', async () => {
    const traffic = new Traffic('consumer-killed');
    const { inserts } = await facade!.state();
    await until('storage receives inserts', async () => (await facade!.state()).inserts > inserts + 2, 15_000);
    // The victim inside an insert of spans that storage committed but has not answered yet.
    // (Counting held inserts is not enough: each consumer inserts every table's rows, and the
    // redelivery of an ingest_counts batch is not waited for below.)
    const victim = consumers[0]!;
    const victimsSpans = ({ from, statement }: { from: string; statement: string }) => from.includes(`pid ${victim.child.pid})`) && statement.includes('otel_traces');
    await facade!.fault({ hold: true });
    await until('the victim inside an insert of spans', async () => (await facade!.state()).heldInserts.some(victimsSpans), 15_000);
    await victim.stop('SIGKILL');
    await facade!.fault({ hold: false });
    consumers = [consumers[1]!, await start('consume')];
    await sleep(2000);
    // The dead consumer's batch comes back after the ack wait (ACK_WAIT_SECONDS) to a live one.
    await expectExactlyOnce('b. consumer SIGKILL', await traffic.stop(), 60_000);
    // Its committed batch was sent again under the same token (the rows may all be stored before
    // that: the first insert landed), and storage kept one copy.
    await until('the killed consumer\'s batch inserted again under its token', async () => (await facade!.state()).repeatedTokens > 0, 60_000);
    const { repeatedTokens } = await facade!.state();
    expect(await duplicates(traffic.service), 'duplicate SpanIds after the batch came again').toBe(0);
    const redelivered = (await Promise.all(consumers.map(async (c) => figure(await c.metrics(), 'redelivered_messages')))).reduce((a, b) => a + b);
    expect(redelivered, 'messages of the killed consumer redelivered to the others').toBeGreaterThan(0);
    figures.push(`b. consumer SIGKILL: ${redelivered} messages redelivered, ${repeatedTokens} batch(es) inserted again under their token`);
  }, 180_000);

  it('c. storage down for 12 s under traffic: consumers back off, then drain; nothing dead-lettered', async () => {
    const traffic = new Traffic('storage-down');
    await sleep(1000);
    await facade!.fault({ down: true });
    // Long enough for the consumers' backoff to grow past a few seconds (250 ms doubling).
    await sleep(12_000);
    const state = await facade!.fault({ down: false });
    await sleep(1000);
    await traffic.stop();
    expect(state.refused, 'requests refused by the storage outage').toBeGreaterThan(0);
    await expectExactlyOnce('c. storage down 12 s', traffic, 60_000);
    figures.push(`c. storage down: ${state.refused} storage requests answered 503 during the 12 s outage`);
    const failures = (await Promise.all(consumers.map(async (c) => figure(await c.metrics(), 'failed_batches')))).reduce((a, b) => a + b);
    expect(failures, 'batches that failed and were retried').toBeGreaterThan(0);
    const deadLetters = await jsm.streams.info(deadLetterOf(prefix).stream);
    expect(deadLetters.state.messages, 'dead-lettered messages').toBe(0);
    for (const consumer of consumers) expect(figure(await consumer.metrics(), 'dead_lettered')).toBe(0);
  }, 120_000);

  it('d. Redis killed under traffic: gateways fall back to local buckets and keep answering 200', async () => {
    const traffic = new Traffic('redis-down');
    await sleep(1000);
    const client = createClient({ url: redis!.url });
    await client.connect();
    const buckets = await client.keys('sluice:*:rl:*');
    await client.quit();
    expect(buckets.length, 'gateways share buckets in Redis before it goes').toBeGreaterThan(0);
    const before = traffic.acknowledged;
    await redis!.stop('SIGKILL');
    await sleep(3000);
    await traffic.stop();
    expect(traffic.acknowledged, 'spans acknowledged after Redis went').toBeGreaterThan(before);
    for (const gateway of gateways) expect(await gateway.log()).toContain('rate limits: Redis unavailable; falling back to per-gateway buckets');
    await expectExactlyOnce('d. Redis killed', traffic, 45_000);
  }, 120_000);

  it('e. a backlog drains through two fresh consumers (timed)', async () => {
    await Promise.all(consumers.map((c) => c.stop('SIGTERM')));
    const published = Date.now();
    const backlog = await new Traffic('backlog', { workers: 4, spans: 100, pauseMs: 0, limit: 500 }).finished();
    const publishMs = Date.now() - published;
    expect(backlog.refused).toEqual({});
    expect(await lag()).toBeGreaterThan(0);
    const begin = Date.now();
    consumers = await Promise.all([start('consume'), start('consume')]);
    const ready = Date.now();
    const drainMs = (await expectExactlyOnce('e. backlog', backlog, 60_000)) - begin;
    figures.push(
      `e. backlog: ${backlog.acknowledged} spans published in ${publishMs} ms with no consumer; ` +
        `two consumers started in ${ready - begin} ms and stored them all ${drainMs} ms after their spawn ` +
        `(${Math.round(backlog.acknowledged / ((drainMs - (ready - begin)) / 1000))} spans/s once running)`,
    );
  }, 180_000);
});
