/**
 * Cluster mode against a NATS that requires credentials, given in NATS_URL as nats-server's own
 * URLs carry them (`user:password@`): a nats-server of this test's own, started with --user and
 * --pass. Both NATS clients of a process use them: nats.js (streams, KV, publishes), which
 * ignores credentials in a URL and gets them as options, and the consumer's pull connection.
 * Spans sent through the gateway are stored by the consumer.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningSluice } from '../bin/app.ts';
import { eventually, startTestRole } from './harness.ts';
import { exportOnce, exporterFor, finishedSpans } from './otel-clients.ts';
import { startNatsServer, type NatsProcess } from './sluice-processes.ts';

let dir: string;
let nats: NatsProcess;
const running: RunningSluice[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-cluster-auth-'));
  nats = await startNatsServer(join(dir, 'nats'), ['--user', 'ingest', '--pass', 'p@ss/w0rd']);
});

afterAll(async () => {
  for (const app of running.reverse()) await app.shutdown();
  await nats?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('cluster mode with NATS credentials in NATS_URL', () => {
  it('a gateway and a consumer connect with user:password@ and the spans they take are stored', async () => {
    const url = nats.url.replace('nats://', `nats://ingest:${encodeURIComponent('p@ss/w0rd')}@`);
    const start = async (role: 'gateway' | 'consume') => {
      const app = await startTestRole(role, join(dir, role), { 'pipeline.workers': 1, 'nats.maxStreamBytes': 64 * 1024 * 1024, 'nats.url': url, 'nats.prefix': 'AUTH' });
      running.push(app);
      return app;
    };
    const consumer = await start('consume');
    const gateway = await start('gateway');
    const source = await gateway.sources.createSource('authenticated');
    const target = { baseUrl: `http://127.0.0.1:${gateway.httpPort}`, grpcAddress: `127.0.0.1:${gateway.grpcPort}`, apiKey: source.apiKey };
    const result = await exportOnce(exporterFor<ReadableSpan[]>('traces', 'http/protobuf', target), finishedSpans('auth-svc', 25));
    expect(result.code, String(result.error)).toBe(0);
    const stored = async () => Number(JSON.parse(await consumer.storage!.query(`SELECT count() AS n FROM otel.otel_traces WHERE SourceId = '${source.id}'`)).n);
    await eventually(async () => (await stored()) >= 25, 20_000, 200);
    expect(await stored()).toBe(25);
  });
});
