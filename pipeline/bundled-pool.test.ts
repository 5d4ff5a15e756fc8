/**
 * A thread of a BundledPool that reaches its heap limit fails its task with a retryable
 * `unavailable`, is replaced, and the next task runs; the owner hears of it once.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPTIONS } from '../core/config.ts';
import { UNBUDGETED } from '../core/memory-budget.ts';
import { SluiceError } from '../core/errors.ts';
import { BundledPool, DEFAULT_WORKER_HEAP_MB } from './bundled-pool.ts';

/** A worker entry whose task keeps what it allocates when asked to. */
const ENTRY = `
export default function (task: { fill: boolean }): string {
  const kept: unknown[] = [];
  while (task.fill) kept.push(Array.from({ length: 10_000 }, (_, i) => ({ i })));
  return 'done';
}
export function warm(): boolean {
  return true;
}
`;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-bundled-pool-'));
  await writeFile(join(dir, 'entry.ts'), ENTRY);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('BundledPool', () => {
  it('replaces a thread that reached its heap limit, refuses its task with 503, and runs the next', { timeout: 60_000 }, async () => {
    let outOfMemory = 0;
    const pool = new BundledPool({ entry: join(dir, 'entry.ts'), name: 'the test pool', minThreads: 1, maxThreads: 1, concurrentTasksPerWorker: 2, maxHeapMb: 32, onOutOfMemory: () => outOfMemory++ });
    await pool.start();
    try {
      // The second task is most likely held by the same thread and fails with it (or it runs on
      // the new one): either way one thread ran out of memory, counted once.
      const [failed, held] = await Promise.all([pool.run({ fill: true }).catch((err: unknown) => err), pool.run({ fill: false }).catch((err: unknown) => err)]);
      expect(held === 'done' || (held instanceof SluiceError && held.code === 'unavailable')).toBe(true);
      expect(failed).toBeInstanceOf(SluiceError);
      expect(failed).toMatchObject({ code: 'unavailable', httpStatus: 503, retryAfterSeconds: 1, message: expect.stringMatching(/ran out of memory \(its heap limit is 32 MiB\)/) });
      expect(outOfMemory).toBe(1);
      expect(await pool.run({ fill: false })).toBe('done');
      expect(pool.status()).toMatchObject({ ok: true, figures: { threads: 1, outOfMemory: 1 } });
    } finally {
      await pool.shutdown();
    }
  });

  it('has the default the configuration documents without a memory budget', () => {
    expect(OPTIONS.find((option) => option.path === 'pipeline.workerHeapMb')?.default).toBe(0); // a share of the budget
    expect(UNBUDGETED.workerHeapMb).toBe(DEFAULT_WORKER_HEAP_MB);
  });
});
