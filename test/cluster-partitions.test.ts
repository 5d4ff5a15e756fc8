/**
 * Partitioned row streams on a three-node JetStream cluster, with exact counts: the traces
 * table in three partition streams of three replicas (SLUICE_NATS_PARTITIONS, _REPLICAS), their
 * leaders spread over the nodes, `sluice gateway` and `sluice consume` as OS processes (storage
 * behind the ClickHouse facade). While traffic flows a consumer is added, one is SIGKILLed,
 * another added, and the gateways go from three partitions to two in a rolling restart (the
 * surplus partition is drained). Every request answered 200 must be stored whole and exactly
 * once. Processes log to <name>.log in a temp dir sluice-partitions-… (SLUICE_TEST_KEEP=1 keeps it).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DURABLE, streamOf } from '../bus/jetstream-names.ts';
import { startClickhouseFacade, type ClickhouseFacade } from './clickhouse-facade.ts';
import { eventually } from './harness.ts';
import { startNatsCluster, type NatsCluster } from './nats-cluster.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';
import { runSluice, startSluiceProcess, type SluiceProcess } from './sluice-processes.ts';

const prefix = `Q${randomBytes(3).toString('hex').toUpperCase()}`;
const SPANS = 5;
const ACK_WAIT_SECONDS = 10;
const partitionStreams = (count: number) => Array.from({ length: count }, (_, partition) => streamOf(prefix, 'otel_traces', partition).stream);

let dir: string;
let cluster: NatsCluster;
let facade: ClickhouseFacade;
let nc: NatsConnection;
let jsm: JetStreamManager;
const processes: SluiceProcess[] = [];
let started = 0;

function env(partitions: number): Record<string, string> {
  return {
    NATS_URL: cluster.url,
    SLUICE_NATS_PREFIX: prefix,
    SLUICE_NATS_REPLICAS: '3',
    SLUICE_NATS_PARTITIONS: `otel_traces=${partitions}`,
    SLUICE_NATS_MAX_STREAM_BYTES: String(64 * 1024 * 1024),
    SLUICE_NATS_ACK_WAIT_SECONDS: String(ACK_WAIT_SECONDS),
    CLICKHOUSE_URL: facade.url,
    SLUICE_RATE_LIMIT_PER_MINUTE: '6000000',
    SLUICE_RATE_LIMIT_BURST: '100000',
    SLUICE_WORKERS: '1',
    SLUICE_RETRY_AFTER_SECONDS: '1',
  };
}

async function start(role: 'gateway' | 'consume', partitions: number): Promise<SluiceProcess> {
  const running = await startSluiceProcess(role, `${role}-${++started}`, dir, env(partitions));
  processes.push(running);
  return running;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-partitions-'));
  [cluster, facade] = await Promise.all([startNatsCluster(join(dir, 'nats')), startClickhouseFacade()]);
  nc = await connect({ servers: cluster.url.split(',') });
  jsm = await jetstreamManager(nc);
}, 90_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop().catch(() => {})));
  await nc?.close().catch(() => {});
  await cluster?.stop();
  await facade?.stop();
  if (process.env.SLUICE_TEST_KEEP) console.log(`kept ${dir}`);
  else if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

/** Requests to the live gateways in turn, each with its own span name, until stopped. */
class Traffic {
  readonly acknowledged: string[] = [];
  readonly refused: Record<string, number> = {};
  private running = true;
  private sent = 0;
  private readonly loop: Promise<void>;

  constructor(private readonly gateways: () => SluiceProcess[], private readonly apiKey: string) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (this.running) {
      const live = this.gateways();
      const gateway = live[this.sent % live.length]!;
      const name = `part-${this.sent++}`;
      const response = await fetch(`${gateway.baseUrl}/v1/traces`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-protobuf', 'x-api-key': this.apiKey },
        body: encodeTraces(traceRequest({ spans: SPANS, name })),
      }).catch((err: Error) => err);
      if (response instanceof Error) this.refused[response.message] = (this.refused[response.message] ?? 0) + 1;
      else {
        await response.arrayBuffer();
        if (response.status === 200) this.acknowledged.push(name);
        else this.refused[response.status] = (this.refused[response.status] ?? 0) + 1;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Resolves once `more` requests more were acknowledged. */
  async further(more: number): Promise<void> {
    const target = this.acknowledged.length + more;
    await eventually(() => this.acknowledged.length >= target, 60_000, 100);
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

/** Messages of a partition not yet acked by a consumer. */
async function lag(stream: string): Promise<number> {
  const info = await jsm.consumers.info(stream, DURABLE);
  return info.num_pending + info.num_ack_pending;
}

const batchesOf = async (consumer: SluiceProcess) => Number(/^sluice_consumer_batches_total (\d+)/m.exec(await consumer.metrics())?.[1] ?? 0);

describe('partitioned row streams on a three-node JetStream cluster', () => {
  it('spreads the leaders, and stores every acknowledged request once through consumers added and killed and a change of the partition count', async () => {
    expect(JSON.parse(await runSluice(['migrate'], env(3))).current).toBeGreaterThan(0);
    const apiKey = JSON.parse(await runSluice(['sources', 'create', '--name', 'partitions'], env(3))).apiKey as string;
    const first = await start('consume', 3);
    const three = await start('gateway', 3);
    let gateways = [three];

    // Three partitions, three replicas each, led by three different nodes.
    const leaders = await Promise.all(partitionStreams(3).map(async (stream) => (await jsm.streams.info(stream)).cluster?.leader));
    expect(leaders.every(Boolean), JSON.stringify(leaders)).toBe(true);
    expect(new Set(leaders).size, `leaders ${leaders.join(', ')}`).toBe(3);

    const traffic = new Traffic(() => gateways, apiKey);
    await traffic.further(30);
    // Every partition takes a share.
    for (const stream of partitionStreams(3)) expect((await jsm.streams.info(stream)).state.last_seq, stream).toBeGreaterThan(0);

    // A consumer added shares the partitions with the first.
    const second = await start('consume', 3);
    await eventually(async () => (await batchesOf(second)) > 0, 60_000, 250);
    await traffic.further(30);

    // The first is killed mid-stream: what it held comes back after the ack wait, to the others.
    await first.stop('SIGKILL');
    await traffic.further(30);
    const third = await start('consume', 3);
    await eventually(async () => (await batchesOf(third)) > 0, 60_000, 250);

    // Rolling change to two partitions: a gateway with two joins, the one with three leaves.
    const two = await start('gateway', 2);
    gateways = [three, two];
    await traffic.further(20);
    gateways = [two];
    await three.stop();
    const surplus = partitionStreams(3)[2]!;
    const lastOfSurplus = (await jsm.streams.info(surplus)).state.last_seq;
    await traffic.further(40);
    expect((await jsm.streams.info(surplus)).state.last_seq, 'nothing new in the surplus partition').toBe(lastOfSurplus);
    await traffic.stop();
    expect(traffic.refused, 'every request answered 200').toEqual({});

    // Every partition drained (one ack wait for the killed consumer's messages), the surplus one included.
    await eventually(async () => (await Promise.all(partitionStreams(3).map(lag))).every((n) => n === 0), (ACK_WAIT_SECONDS + 50) * 1000, 250);
    const stored = async () => facade.rows<{ SpanName: string; n: string }>(`SELECT SpanName, count() AS n FROM otel.otel_traces WHERE startsWith(SpanName, 'part-') GROUP BY SpanName`);
    let rows = await stored();
    const deadline = Date.now() + 30_000;
    while (rows.length < traffic.acknowledged.length && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      rows = await stored();
    }
    await new Promise((resolve) => setTimeout(resolve, 1000)); // a second insert would land now
    rows = await stored();
    const counts = new Map(rows.map((row) => [row.SpanName, Number(row.n)]));
    expect(traffic.acknowledged.filter((name) => counts.get(name) !== SPANS), 'acknowledged but not stored whole').toEqual([]);
    expect(rows.filter((row) => Number(row.n) !== SPANS), 'stored twice or in part').toEqual([]);
    console.log(`cluster-partitions: ${traffic.acknowledged.length} requests acknowledged, ${rows.length} stored, leaders ${leaders.join(', ')}`);
  }, 300_000);
});
