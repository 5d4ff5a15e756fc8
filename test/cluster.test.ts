/**
 * Cluster mode end to end, against the real nats-server with JetStream (NATS_URL, default
 * nats://127.0.0.1:4222): two gateways and a storage consumer, state on NATS KV, rows on
 * JetStream. The official OpenTelemetry exporter sends through both gateways; every span it
 * was told was accepted is stored exactly once. (Each test run uses streams and buckets of its
 * own prefix and removes them.)
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningSluice } from '../bin/app.ts';
import { eventually, removeNatsPrefixes, startTestRole } from './harness.ts';
import { exportOnce, exporterFor, finishedSpans } from './otel-clients.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = `T${randomBytes(4).toString('hex').toUpperCase()}`;
let dataDir: string;
const running: RunningSluice[] = [];
let gateways: RunningSluice[];
let consumer: RunningSluice;

async function start(role: 'gateway' | 'consume'): Promise<RunningSluice> {
  const app = await startTestRole(role, dataDir, {
    'pipeline.workers': 1,
    'nats.maxStreamBytes': 64 * 1024 * 1024,
    'nats.url': NATS_URL,
    'nats.prefix': prefix,
  });
  running.push(app);
  return app;
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-cluster-'));
  consumer = await start('consume');
  gateways = [await start('gateway'), await start('gateway')];
});

afterAll(async () => {
  for (const app of running.reverse()) await app.shutdown();
  await removeNatsPrefixes(NATS_URL, [prefix]);
  await rm(dataDir, { recursive: true, force: true });
});

describe('cluster mode', () => {
  it('a source created through one gateway authenticates on the other (state on NATS KV)', async () => {
    const source = await gateways[0]!.sources.createSource('fleet');
    await eventually(() => gateways[1]!.sources.authenticate(source.apiKey) === source.id, 10_000, 10);
  });

  it('spans sent through two gateways land exactly once through the consumer', async () => {
    const source = await gateways[0]!.sources.createSource('exporters');
    await eventually(() => gateways.every((gateway) => gateway.sources.authenticate(source.apiKey) === source.id), 10_000, 10);
    let acknowledged = 0;
    for (const [i, gateway] of gateways.entries()) {
      for (const protocol of ['http/protobuf', 'grpc'] as const) {
        const batch = finishedSpans('cluster-svc', 50);
        const target = { baseUrl: `http://127.0.0.1:${gateway.httpPort}`, grpcAddress: `127.0.0.1:${gateway.grpcPort}`, apiKey: source.apiKey };
        const result = await exportOnce(exporterFor<ReadableSpan[]>('traces', protocol, target), batch);
        expect(result.code, `gateway ${i} ${protocol}: ${result.error}`).toBe(0);
        acknowledged += batch.length;
      }
    }
    const count = async () =>
      Number(JSON.parse(await consumer.storage!.query(`SELECT count() AS n FROM otel.otel_traces WHERE SourceId = '${source.id}'`)).n);
    const deadline = Date.now() + 20_000;
    while ((await count()) < acknowledged && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    await new Promise((r) => setTimeout(r, 1000));
    expect(await count()).toBe(acknowledged);
    const duplicates = await consumer.storage!.query(
      `SELECT count() AS n FROM (SELECT SpanId FROM otel.otel_traces WHERE SourceId = '${source.id}' GROUP BY SpanId HAVING count() > 1)`,
    );
    expect(Number(JSON.parse(duplicates).n)).toBe(0);
  });

  it('every gateway\'s ingest counts reach ingest_counts through JetStream, added up', async () => {
    const source = await gateways[0]!.sources.createSource('counted');
    await eventually(() => gateways.every((gateway) => gateway.sources.authenticate(source.apiKey) === source.id), 10_000, 10);
    // The same request through each gateway: two identical rows of one bucket, both kept.
    for (const gateway of gateways) {
      const response = await fetch(`http://127.0.0.1:${gateway.httpPort}/api/v1/ingest`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': source.apiKey },
        body: JSON.stringify({ entries: [{ message: 'one' }, { message: 'two' }] }),
      });
      expect(response.status).toBe(200);
    }
    const totals = async () => JSON.parse(await consumer.storage!.query(
      `SELECT toUInt32(sum(Requests)) AS requests, toUInt32(sum(Items)) AS items FROM otel.ingest_counts WHERE SourceId = '${source.id}' AND Outcome = 'accepted'`,
    )) as { requests: number; items: number };
    // A flush every 10 s on each gateway, then the consumer.
    await eventually(async () => (await totals()).requests >= 2, 30_000, 250);
    expect(await totals()).toEqual({ requests: 2, items: 4 });
  });

  it('the agent API runs through the cluster: batches land once, configs and install tokens reach every gateway', async () => {
    const source = await gateways[0]!.sources.createSource('agents');
    await new Promise((r) => setTimeout(r, 200));
    const post = (gateway: RunningSluice, path: string, body: unknown) =>
      fetch(`http://127.0.0.1:${gateway.httpPort}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': source.apiKey },
        body: JSON.stringify(body),
      });
    const entries = Array.from({ length: 3000 }, (_, i) => ({ message: `cluster entry ${i}` }));
    expect((await post(gateways[0]!, '/api/v1/ingest', { host: 'h', entries })).status).toBe(200);
    expect((await post(gateways[1]!, '/api/v1/heartbeat', { agentId: 'a', version: '2.0' })).status).toBe(200);
    const count = async (sql: string) => Number(JSON.parse(await consumer.storage!.query(sql)).n);
    const logs = () => count(`SELECT count() AS n FROM otel.agent_logs WHERE SourceId = '${source.id}'`);
    const deadline = Date.now() + 20_000;
    while ((await logs()) < entries.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    await new Promise((r) => setTimeout(r, 500));
    expect(await logs()).toBe(entries.length);
    expect(await count(`SELECT uniqExact(Message) AS n FROM otel.agent_logs WHERE SourceId = '${source.id}'`)).toBe(entries.length);
    // The heartbeat travels on a stream of its own: its consumer may land it later than the logs.
    const heartbeats = () => count(`SELECT count() AS n FROM otel.agent_heartbeats WHERE SourceId = '${source.id}'`);
    await eventually(async () => (await heartbeats()) >= 1, 20_000);
    expect(await heartbeats()).toBe(1);

    await gateways[0]!.configs.set(source.id, { sampling: 0.25 });
    const served = async () =>
      (await (await fetch(`http://127.0.0.1:${gateways[1]!.httpPort}/api/v1/agent/config`, { headers: { 'x-api-key': source.apiKey } })).json()).config;
    await eventually(async () => (await served()).sampling === 0.25, 10_000, 20);
    expect(await served()).toEqual({ sampling: 0.25 });

    const issued = await gateways[0]!.installTokens.create(source.id);
    const manifest = async () => (await fetch(`http://127.0.0.1:${gateways[1]!.httpPort}/install/${issued.token}?format=env`)).status;
    // The other gateway may not have seen the token's key yet: it reads through to the store.
    expect(await manifest()).toBe(200);
  });

  it('the consumer answers health and metrics; a gateway refuses to start without NATS_URL', async () => {
    expect((await fetch(`http://127.0.0.1:${consumer.httpPort}/api/v1/health`)).status).toBe(200);
    const metrics = await (await fetch(`http://127.0.0.1:${consumer.httpPort}/metrics`)).text();
    expect(metrics).toMatch(/^sluice_consumer_lag_messages\{table="otel_traces",partition="0"\} 0$/m);
    // A work-queue stream keeps only what is not yet acknowledged: drained, it holds no bytes.
    expect(metrics).toMatch(/^sluice_consumer_lag_bytes\{table="otel_traces",partition="0"\} 0$/m);
    expect(metrics).toMatch(/^sluice_consumer_stream_limit_bytes\{table="otel_traces",partition="0"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^sluice_consumer_batches_total [1-9]/m);
    expect(metrics).toMatch(/sluice_storage_insert_seconds_count [1-9]/);
    const gatewayMetrics = await (await fetch(`http://127.0.0.1:${gateways[0]!.httpPort}/metrics`)).text();
    expect(gatewayMetrics).toMatch(/sluice_bus_publish_seconds_count [1-9]/);
    // Every role: what it runs, and the process and runtime figures.
    // The consumer runs no worker threads; the gateway's transcode on WebAssembly (the suite runs Node as Sluice starts it).
    for (const [text, transcoder] of [[metrics, 'none'], [gatewayMetrics, 'wasm']] as const) {
      expect(text).toMatch(new RegExp(`^sluice_build_info\\{version="[^"]+",node_version="v[\\d.]+",http_engine="(uws|node)",transcoder="${transcoder}"\\} 1$`, 'm'));
      expect(text).toMatch(/^process_cpu_seconds_total [\d.e+-]+$/m);
      expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds [\d.e+-]+$/m);
    }
    expect((await fetch(`http://127.0.0.1:${consumer.httpPort}/v1/traces`, { method: 'POST' })).status).toBe(404);
    await expect(startTestRole('gateway', dataDir)).rejects.toThrow(/set NATS_URL/);
  });
});
