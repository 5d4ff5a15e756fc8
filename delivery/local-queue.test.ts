import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../core/log.ts';
import { LocalStateStore } from '../state/local.ts';
import { eventually } from '../test/harness.ts';
import { LocalDeliveryQueue, type LocalDeliveryQueueOptions } from './local-queue.ts';
import type { QueuedAttempt } from './queue.ts';
import { AMPLE_SHARES, describeDeliveryQueue, testJob } from './queue.suite.ts';

describeDeliveryQueue('local log', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-queue-'));
  const log = createLogger('silent');
  return {
    async open(settings = {}) {
      const queue = new LocalDeliveryQueue({
        dir, maxBytes: settings.maxBytes ?? 64 * 1024 * 1024, maxJobs: 100_000, timeoutMs: 5000, retryAfterSeconds: 2, shares: settings.shares ?? AMPLE_SHARES, log,
      });
      await queue.start();
      // A process killed: its log stays as the last fdatasync left it; the hung attempt never settles.
      return { queue, kill: async () => {} };
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

describe('LocalDeliveryQueue', () => {
  const dirs: string[] = [];
  const queues: LocalDeliveryQueue[] = [];
  afterEach(async () => {
    for (const queue of queues.splice(0)) await queue.shutdown();
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  async function open(dir: string, options: Partial<LocalDeliveryQueueOptions> = {}): Promise<LocalDeliveryQueue> {
    const queue = new LocalDeliveryQueue({ dir, maxBytes: 64 * 1024 * 1024, maxJobs: 100_000, timeoutMs: 5000, retryAfterSeconds: 2, shares: AMPLE_SHARES, log: createLogger('silent'), ...options });
    await queue.start();
    queues.push(queue);
    return queue;
  }

  async function freshDir(): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-queue-'));
    dirs.push(dir);
    return dir;
  }

  async function close(queue: LocalDeliveryQueue): Promise<void> {
    queues.splice(queues.indexOf(queue), 1);
    await queue.shutdown();
  }

  it('comes back after a restart with each job where it was: attempts used, next attempt time; done ones gone', async () => {
    const dir = await freshDir();
    const first = await open(dir);
    const [waiting, done] = [testJob(), testJob()];
    await first.enqueue([waiting, done]);
    first.consume(async ({ job }) => (job.id === done.id ? { done: true } : { retryInMs: 60_000 }), 2);
    await eventually(async () => (await first.depth()) === 1);
    await close(first);

    const second = await open(dir);
    expect(await second.depth()).toBe(1);
    const attempts: QueuedAttempt[] = [];
    second.consume(async (queued) => (attempts.push(queued), { done: true }), 2);
    await pause(500);
    expect(attempts, 'not due for a minute').toEqual([]);
    await close(second);
    // Due now: its attempt is the second of the series.
    const third = await open(dir, { now: () => Date.now() + 61_000 });
    third.consume(async (queued) => (attempts.push(queued), { done: true }), 2);
    await eventually(() => attempts.length === 1);
    expect(attempts[0]).toEqual({ job: waiting, attempt: 2 });
  });

  it('gives disk back: a job waiting long does not keep the segments of the many done since', async () => {
    const dir = await freshDir();
    const queue = await open(dir, { segmentBytes: 64 * 1024 });
    const longWait = testJob({ destination: 'later' });
    await queue.enqueue([longWait]);
    queue.consume(async ({ job }) => (job.destination === 'later' ? { retryInMs: 3_600_000 } : { done: true }), 8);
    const content = { data: { text: 'x'.repeat(4000) }, subject: '', body: '' };
    for (let i = 0; i < 200; i++) await queue.enqueue([testJob({ content })]);
    await eventually(async () => (await queue.depth()) === 1);
    const segments = async () => (await readdir(dir)).filter((name) => name.endsWith('.seg'));
    // ~800 KB went through; what stays is the waiting job (moved to the end) and the segment being written.
    await eventually(async () => (await segments()).length <= 3, 10_000);
    await close(queue);
    const reopened = await open(dir, { now: () => Date.now() + 3_700_000 });
    const attempts: QueuedAttempt[] = [];
    reopened.consume(async (queued) => (attempts.push(queued), { done: true }), 2);
    await eventually(() => attempts.length === 1);
    expect(attempts[0]).toEqual({ job: longWait, attempt: 2 });
  });

  it('holds no message in memory: what an enqueue was given can be collected', async () => {
    const queue = await open(await freshDir());
    let content: { data: Record<string, unknown>; subject: string; body: string } | undefined = { data: { text: 'y'.repeat(100_000) }, subject: '', body: '' };
    const collected = new WeakRef(content);
    await queue.enqueue([testJob({ content }), testJob({ content })]);
    content = undefined;
    await eventually(() => {
      collectGarbage();
      return collected.deref() === undefined;
    }, 5000);
    // And reads it back from the log for the attempt.
    const seen: string[] = [];
    queue.consume(async ({ job }) => (seen.push(String(job.content.data.text).slice(0, 3)), { done: true }), 2);
    await eventually(() => seen.length === 2);
    expect(seen).toEqual(['yyy', 'yyy']);
  });

  it('moves the jobs of the state-store journal that held the queue before into the log, once', async () => {
    const dir = await freshDir();
    const state = new LocalStateStore(join(dir, 'state'));
    await state.start();
    const [fresh, tried] = [testJob(), testJob()];
    await state.put('delivery_jobs', `${fresh.id}.1`, fresh);
    await state.put('delivery_jobs', `${tried.id}.1`, tried);
    await state.put('delivery_progress', `${tried.id}.1`, { attempts: 3, notBefore: 0 });
    const queue = await open(join(dir, 'delivery'), { carryOver: state });
    expect(await queue.depth()).toBe(2);
    expect(await state.list('delivery_jobs')).toEqual([]);
    expect(await state.list('delivery_progress')).toEqual([]);
    const attempts: QueuedAttempt[] = [];
    queue.consume(async (queued) => (attempts.push(queued), { done: true }), 2);
    await eventually(() => attempts.length === 2);
    expect(attempts.map((a) => [a.job.id, a.attempt]).sort()).toEqual([[fresh.id, 1], [tried.id, 4]].sort());
    await state.shutdown();
  });
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** V8's collector, reached without --expose-gc on the command line. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}
