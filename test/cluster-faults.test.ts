/**
 * Cluster faults with exact counts: a nats-server of this test's own (random port, temp store)
 * is killed with SIGKILL and restarted while traffic flows through a gateway to a consumer.
 * Every request acknowledged with 200 must be stored whole and exactly once; nothing, refused
 * or not, may be stored twice.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningSluice } from '../bin/app.ts';
import { freePort } from './free-port.ts';
import { eventually, startTestRole } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

let natsPort = 0;
let nats: ChildProcess | undefined;
let storeDir: string;
let dataDir: string;
const running: RunningSluice[] = [];

async function startNats(): Promise<void> {
  nats = spawn('/usr/sbin/nats-server', ['-a', '127.0.0.1', '-p', String(natsPort), '-js', '-sd', storeDir], { stdio: 'ignore' });
  nats.once('error', (err) => {
    throw new Error(`nats-server could not start (run deploy/services.sh): ${err.message}`);
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = createServer().listen(natsPort, '127.0.0.1', () => socket.close(() => resolve(false))).on('error', () => resolve(true));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error('nats-server did not start');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function killNats(): Promise<void> {
  const running = nats;
  nats = undefined;
  if (!running) return;
  await new Promise((resolve) => {
    running.once('exit', resolve);
    running.kill('SIGKILL');
  });
}

async function start(role: 'gateway' | 'consume', prefix: string): Promise<RunningSluice> {
  const app = await startTestRole(role, dataDir, {
    'pipeline.workers': 1,
    'limits.rateBurst': 100_000,
    'limits.ratePerMinute': 600_000,
    'nats.maxStreamBytes': 64 * 1024 * 1024,
    'nats.url': `nats://127.0.0.1:${natsPort}`,
    'nats.prefix': prefix,
    'storage.retryAfterSeconds': 1,
  });
  running.push(app);
  return app;
}

beforeAll(async () => {
  natsPort = await freePort();
  storeDir = await mkdtemp(join(tmpdir(), 'sluice-nats-'));
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-faults-'));
  await startNats();
});

afterAll(async () => {
  for (const app of running.reverse()) await app.shutdown();
  await killNats();
  await rm(storeDir, { recursive: true, force: true });
  await rm(dataDir, { recursive: true, force: true });
});

describe('cluster faults', () => {
  it('nats-server killed and restarted while traffic flows: acknowledged spans are stored exactly once', async () => {
    const prefix = `F${randomBytes(3).toString('hex').toUpperCase()}`;
    const consumer = await start('consume', prefix);
    const gateway = await start('gateway', prefix);
    const source = await gateway.sources.createSource('faults');
    const acknowledged: string[] = [];
    const send = async (i: number) => {
      const name = `req-${i}`;
      const response = await fetch(`http://127.0.0.1:${gateway.httpPort}/v1/traces`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-protobuf', 'x-api-key': source.apiKey },
        body: encodeTraces(traceRequest({ spans: 10, name })),
      });
      if (response.status === 200) acknowledged.push(name);
      else expect(response.status, name).toBe(503);
    };
    for (let i = 0; i < 15; i++) await send(i);
    await killNats();
    for (let i = 15; i < 20; i++) await send(i);
    await startNats();
    // Publishes that timed out stalled the bus: it refuses at once until NATS answers again.
    await eventually(async () => (await gateway.readiness.report()).components.bus?.ok, 30_000, 100);
    for (let i = 20; i < 40; i++) await send(i);
    expect(acknowledged.length).toBeGreaterThan(20);

    const stored = async () =>
      (await consumer.storage!.query(`SELECT SpanName, count() AS n FROM otel.otel_traces WHERE SourceId = '${source.id}' GROUP BY SpanName`))
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { SpanName: string; n: number });
    const deadline = Date.now() + 30_000;
    let rows = await stored();
    while (acknowledged.some((name) => !rows.some((r) => r.SpanName === name)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      rows = await stored();
    }
    // Every acknowledged request is there, whole and once; nothing is there twice.
    for (const name of acknowledged) expect(rows.find((r) => r.SpanName === name)?.n, name).toBe(10);
    for (const row of rows) expect(row.n, row.SpanName).toBe(10);

    // The gateway's KV watch resumed after the restart: a key revoked through another
    // connection (the consumer's) is refused by the gateway.
    const extra = await consumer.sources.addKey(source.id);
    await eventually(() => gateway.sources.authenticate(extra.apiKey) === source.id, 10_000, 10);
    await consumer.sources.revokeKey(extra.keyId);
    await eventually(() => gateway.sources.authenticate(extra.apiKey) === undefined, 10_000, 10);
  });
});
