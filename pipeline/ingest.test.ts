/**
 * IngestService against a local log that storage cannot keep up with: once the log is full,
 * requests are refused with its 503 before the pool decodes them, and decoded again once
 * storage frees room.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { ByteBudget } from '../core/byte-budget.ts';
import { SluiceMetrics } from '../core/metrics.ts';
import { LocalLogBus } from '../bus/local-log.ts';
import { IngestService, RefusedAfterDecoding } from './ingest.ts';
import type { PipelinePool } from './pool.ts';
import type { PipelineTask, TaskResult } from './tasks.ts';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** A pool that counts the requests it decodes and makes 100 KB of rows for each. */
function countingPool() {
  const pool = {
    decoded: 0,
    async run(_task: PipelineTask): Promise<TaskResult> {
      pool.decoded++;
      return { ok: true, accepted: 100, rejected: 0, tables: [{ table: 'otel_traces', columns: ['Name'], rows: 100, data: new Uint8Array(100_000) }] };
    },
    recycle() {},
  };
  return pool;
}

it('refuses requests before decoding them while the local log is full, until storage frees room', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-ingest-'));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  const bus = new LocalLogBus({ dir, maxPendingBytes: 1024 * 1024, maxBatchBytes: 64 * 1024 * 1024, flushIntervalMs: 10, flushBytes: 64 * 1024 * 1024, timeoutMs: 5_000, retryAfterSeconds: 7 });
  await bus.start();
  cleanup.push(() => bus.shutdown());
  let release!: () => void;
  const storageDown = new Promise<void>((resolve) => (release = resolve));
  bus.consume(() => storageDown);
  cleanup.push(async () => release()); // before the bus shuts down, should the test fail while storage is down

  const pool = countingPool();
  const ingest = new IngestService(pool as unknown as PipelinePool, bus, new SluiceMetrics(), { maxBodyBytes: 10 * 1024 * 1024, maxChunkBytes: Infinity });
  const budget = new ByteBudget({ limitBytes: 1024 ** 3, retryAfterSeconds: 1 });
  const send = () =>
    ingest
      .ingestOtlp({ signal: 'traces', transport: 'http', format: 'protobuf', encoding: 'identity', body: new Uint8Array(10), sourceId: 's', reservation: budget.reserve(0) })
      .then(() => 'stored', (err: unknown) => err);

  // 1 MiB of room takes 10 requests of 100 KB; the 11th is decoded and then refused: the log is full.
  for (let i = 0; i < 10; i++) expect(await send()).toBe('stored');
  const afterDecoding = await send();
  expect(afterDecoding).toBeInstanceOf(RefusedAfterDecoding);
  expect(pool.decoded).toBe(11);
  // From then on nothing is decoded: each request gets the log's 503 at once.
  for (let i = 0; i < 20; i++) {
    expect(await send()).toMatchObject({ code: 'unavailable', retryAfterSeconds: 7, message: 'storage is behind: the local log is full' });
  }
  expect(pool.decoded).toBe(11);

  release();
  await bus.settled();
  expect(await send()).toBe('stored');
  expect(pool.decoded).toBe(12);
});
