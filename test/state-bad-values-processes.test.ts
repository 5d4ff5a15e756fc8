/**
 * A malformed value written into every KV bucket of a running cluster — the gateway's state
 * buckets (keys, agent configs, install tokens, the relay's configuration) and the consumers'
 * batch manifests — while traffic flows through real gateway and consumer processes: no
 * process exits, requests keep being answered 200 and stored, and GET /api/v1/ready shows the
 * skipped values.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestBucketOf, streamOf } from '../bus/jetstream-names.ts';
import { eventually, removeNatsPrefixes } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';
import { runSluice, startSluiceProcess, type SluiceProcess } from './sluice-processes.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = `B${randomBytes(4).toString('hex').toUpperCase()}`;
let dir: string;
let nc: NatsConnection;
let gateway: SluiceProcess;
let consumer: SluiceProcess;
let apiKey: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-bad-values-'));
  nc = await connect({ servers: NATS_URL });
  const env = {
    NATS_URL,
    SLUICE_NATS_PREFIX: prefix,
    SLUICE_NATS_MAX_STREAM_BYTES: String(64 * 1024 * 1024),
    SLUICE_RELAY_MASTER_KEY: randomBytes(32).toString('base64'),
    SLUICE_WORKERS: '1',
    // The relay's port: free, like the others.
    SLUICE_RELAY_PORT: '0',
    SLUICE_CONSOLE_PORT: '0',
  };
  apiKey = JSON.parse(await runSluice(['sources', 'create', '--name', 'bad-values'], env)).apiKey;
  consumer = await startSluiceProcess('consume', 'consumer', dir, env);
  gateway = await startSluiceProcess('gateway', 'gateway', dir, env);
}, 90_000);

afterAll(async () => {
  await gateway?.stop();
  await consumer?.stop();
  await nc?.close();
  await removeNatsPrefixes(NATS_URL, [prefix]);
  await rm(dir, { recursive: true, force: true });
}, 60_000);

const send = (service: string) =>
  fetch(`${gateway.baseUrl}/v1/traces`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-protobuf', 'x-api-key': apiKey },
    body: encodeTraces(traceRequest({ spans: 5, service })),
  }).then((response) => response.status);

const ready = async (process: SluiceProcess) => (await (await fetch(`${process.baseUrl}/api/v1/ready`)).json()) as {
  status: string;
  components: Record<string, { ok: boolean; detail?: string; figures?: Record<string, number> }>;
};

describe('malformed values in every KV bucket, under traffic', () => {
  it('never stops a process; readiness shows the skipped values', async () => {
    for (let i = 0; i < 5; i++) expect(await send(`before-${i}`)).toBe(200);
    // Every KV bucket of this deployment (the consumer made its manifest bucket by now).
    const buckets: string[] = [];
    for await (const stream of (await jetstreamManager(nc)).streams.list()) {
      if (stream.config.name.startsWith(`KV_${prefix.toLowerCase()}_`)) buckets.push(stream.config.name.slice(3));
    }
    expect(buckets.length).toBeGreaterThanOrEqual(9);
    const kvm = new Kvm(nc);
    let sent = 0;
    for (const bucket of buckets) {
      // A manifest is read only by the loop of its stream (its key is `<stream>.<first seq>-<batch>`).
      const key = bucket === manifestBucketOf(prefix) ? `${streamOf(prefix, 'otel_traces').stream}.malformed` : 'malformed';
      await (await kvm.open(bucket)).put(key, new TextEncoder().encode('not json{'));
      expect(await send(`during-${sent++}`)).toBe(200);
    }

    const gatewayReport = await eventually(async () => {
      const report = await ready(gateway);
      return report.components['state.api_keys']?.figures?.badValues ? report : undefined;
    }, 20_000, 200);
    for (const name of ['state.api_keys', 'state.agent_configs', 'state.relay_tenants', 'state.relay_api_keys']) {
      expect(gatewayReport.components[name], name).toMatchObject({ ok: true, figures: expect.objectContaining({ badValues: 1 }) });
      expect(gatewayReport.components[name]!.detail, name).toMatch(/skipped/);
    }
    expect(gatewayReport.status).toBe('ready');
    const consumerReport = await eventually(async () => {
      const report = await ready(consumer);
      return report.components['consumer.otel_traces']?.figures?.manifestBadValues ? report : undefined;
    }, 20_000, 200);
    expect(consumerReport.components['consumer.otel_traces']!.ok).toBe(true);

    for (let i = 0; i < 5; i++) expect(await send(`after-${i}`)).toBe(200);
    expect(gateway.child.exitCode).toBeNull();
    expect(consumer.child.exitCode).toBeNull();
    for (const process of [gateway, consumer]) expect(await process.metrics()).toMatch(/^sluice_unhandled_rejections_total 0$/m);
    // Every span acknowledged is stored (5 a request).
    const inserted = async () => Number(/^sluice_storage_rows_inserted_total\{table="otel_traces"\} (\d+)$/m.exec(await consumer.metrics())?.[1] ?? 0);
    await eventually(async () => (await inserted()) >= (10 + sent) * 5, 30_000, 200);
    expect(await inserted()).toBe((10 + sent) * 5);
  }, 120_000);
});
