/**
 * The contract every DeliveryQueue driver passes (a write-ahead log embedded; JetStream in a
 * cluster). Call describeDeliveryQueue from a driver's test file with a harness whose open()
 * gives a queue on one shared backing: a second open() is a second process on the same queue.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { eventually } from '../test/harness.ts';
import type { DeliveryJob } from './job.ts';
import type { DeliveryQueue, QueuedAttempt, Settlement } from './queue.ts';
import type { ShareLimits } from './shares.ts';

/** What a test may ask of a queue it opens. */
export interface QueueSettings {
  /** The queue's byte bound (default: ample). */
  maxBytes?: number;
  /** Default: no share smaller than the concurrency a test asks for. */
  shares?: ShareLimits;
}

export interface QueueHarness {
  open(settings?: QueueSettings): Promise<{ queue: DeliveryQueue; kill(): Promise<void> }>;
  cleanup(): Promise<void>;
}

/** Shares that never bind in a test that is not about them. */
export const AMPLE_SHARES: ShareLimits = { perTenant: 10_000, perDestination: 10_000 };

export function testJob(overrides: Partial<DeliveryJob> = {}): DeliveryJob {
  return {
    id: randomUUID(),
    series: 1,
    tenantId: 't1',
    siteId: 's1',
    formId: 'f1',
    submissionId: randomUUID(),
    kind: 'submission',
    channel: 'webhook',
    destination: 'w1',
    createdAt: new Date().toISOString(),
    content: { data: { name: 'Ada' }, subject: '', body: '' },
    ...overrides,
  };
}

/**
 * A handler that records each attempt and settles it as `decide` says; when it returns undefined
 * the attempt hangs until `finishHung()` (or for ever: a killed process's attempt).
 */
function recorder(decide: (queued: QueuedAttempt) => Settlement | undefined) {
  const attempts: QueuedAttempt[] = [];
  const hung: Array<() => void> = [];
  const handle = (queued: QueuedAttempt) => {
    attempts.push(queued);
    const settlement = decide(queued);
    return settlement ? Promise.resolve(settlement) : new Promise<Settlement>((resolve) => hung.push(() => resolve({ done: true })));
  };
  return { attempts, handle, finishHung: () => hung.splice(0).forEach((finish) => finish()) };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function describeDeliveryQueue(driver: string, createHarness: () => Promise<QueueHarness>): void {
  describe(`DeliveryQueue contract: ${driver}`, () => {
    const cleanups: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });
    const harness = async () => {
      const made = await createHarness();
      cleanups.push(() => made.cleanup());
      return {
        open: async (settings?: QueueSettings) => {
          const opened = await made.open(settings);
          let killed = false;
          // A killed queue's attempt never settles: its shutdown would wait for ever.
          cleanups.push(async () => void (killed || (await opened.queue.shutdown())));
          return { queue: opened.queue, kill: () => ((killed = true), opened.kill()) };
        },
      };
    };

    it('hands each enqueued job to the handler once and forgets it when done', async () => {
      const { queue } = await (await harness()).open();
      const jobs = [testJob(), testJob(), testJob()];
      await queue.enqueue(jobs);
      const { attempts, handle } = recorder(() => ({ done: true }));
      queue.consume(handle, 2);
      await eventually(() => attempts.length === 3);
      expect(attempts.map((a) => a.job.id).sort()).toEqual(jobs.map((job) => job.id).sort());
      expect(attempts.every((a) => a.attempt === 1)).toBe(true);
      expect(attempts[0]!.job).toEqual(jobs.find((job) => job.id === attempts[0]!.job.id));
      await eventually(async () => (await queue.depth()) === 0);
    });

    it('hands a job out again after retryInMs, as the next attempt', async () => {
      const { queue } = await (await harness()).open();
      await queue.enqueue([testJob()]);
      const { attempts, handle } = recorder((queued) => (queued.attempt < 3 ? { retryInMs: 300 } : { done: true }));
      queue.consume(handle, 1);
      await eventually(() => attempts.length === 3);
      expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3]);
      await eventually(async () => (await queue.depth()) === 0);
    });

    it('queues a series once however often it is enqueued; the next series is a new entry', async () => {
      const { queue } = await (await harness()).open();
      const job = testJob();
      await queue.enqueue([job]);
      await queue.enqueue([job]);
      const { attempts, handle } = recorder(() => ({ done: true }));
      queue.consume(handle, 4);
      await eventually(() => attempts.length === 1);
      await queue.enqueue([{ ...job, series: 2 }]);
      await eventually(() => attempts.length === 2);
      expect(attempts.map((a) => [a.job.series, a.attempt])).toEqual([[1, 1], [2, 1]]);
      // Nothing else arrives.
      await pause(500);
      expect(attempts).toHaveLength(2);
    });

    it('takes the jobs of one enqueue, several sharing one content, and hands each out whole', async () => {
      const { queue } = await (await harness()).open();
      const content = { data: { name: 'Ada', note: 'é€😀' }, subject: '', body: '' };
      const jobs = ['a@example.com', 'b@example.com', 'w1'].map((destination) => testJob({ destination, content }));
      await queue.enqueue(jobs);
      const { attempts, handle } = recorder(() => ({ done: true }));
      queue.consume(handle, 4);
      await eventually(() => attempts.length === 3);
      expect(attempts.map((a) => a.job).sort((a, b) => a.destination.localeCompare(b.destination))).toEqual(jobs);
    });

    it('runs at most `concurrency` attempts at once', async () => {
      const { queue } = await (await harness()).open();
      await queue.enqueue(Array.from({ length: 6 }, () => testJob()));
      let running = 0;
      let most = 0;
      let finished = 0;
      queue.consume(async () => {
        most = Math.max(most, ++running);
        await pause(100);
        running--;
        finished++;
        return { done: true };
      }, 2);
      await eventually(() => finished === 6);
      expect(most).toBe(2);
    });

    it('keeps a job whose worker died mid-attempt: another process gets it as the next attempt', async () => {
      const place = await harness();
      const first = await place.open();
      const job = testJob();
      await first.queue.enqueue([job]);
      const stuck = recorder(() => undefined);
      first.queue.consume(stuck.handle, 1);
      await eventually(() => stuck.attempts.length === 1);
      await first.kill();
      const second = await place.open();
      const { attempts, handle } = recorder(() => ({ done: true }));
      second.queue.consume(handle, 1);
      const [again] = await eventually(() => (attempts.length > 0 ? attempts : undefined), 20_000);
      expect(again!.job.id).toBe(job.id);
      expect(again!.attempt).toBe(2);
    });

    it('refuses an enqueue it has no room for with a retryable 503, whole: none of its jobs is queued', async () => {
      const { queue } = await (await harness()).open({ maxBytes: 8192 });
      const content = { data: { text: 'x'.repeat(2000) }, subject: '', body: '' };
      let refusal: unknown;
      const accepted: DeliveryJob[] = [];
      for (let i = 0; i < 20 && !refusal; i++) {
        // Three jobs with three contents: a batch that fits only in part must not be taken in part.
        const batch = [0, 1, 2].map(() => testJob({ content: { ...content, data: { ...content.data } } }));
        await queue.enqueue(batch).then(() => accepted.push(...batch), (err) => (refusal = err));
      }
      expect(refusal).toBeInstanceOf(SluiceError);
      expect((refusal as SluiceError).code).toBe('unavailable');
      expect((refusal as SluiceError).retryAfterSeconds).toBeGreaterThan(0);
      expect((refusal as SluiceError).message).toMatch(/delivery queue is full/);
      const { attempts, handle } = recorder(() => ({ done: true }));
      queue.consume(handle, 8);
      await eventually(async () => (await queue.depth()) === 0);
      await pause(300);
      expect(attempts.map((a) => a.job.id).sort()).toEqual(accepted.map((job) => job.id).sort());
      // Room again once the workers caught up.
      await queue.enqueue([testJob({ content })]);
    });

    it("caps one destination's and one tenant's attempts at once; the others' jobs go on meanwhile", async () => {
      const { queue } = await (await harness()).open({ shares: { perTenant: 3, perDestination: 2 } });
      const stalled = [
        ...Array.from({ length: 6 }, () => testJob({ tenantId: 'slow', destination: 'hook-a' })),
        ...Array.from({ length: 6 }, () => testJob({ tenantId: 'slow', destination: 'hook-b' })),
      ];
      await queue.enqueue(stalled);
      const healthy = Array.from({ length: 20 }, (_, i) => testJob({ tenantId: 'other', destination: `hook-${i % 10}` }));
      await queue.enqueue(healthy);
      let stalling = true;
      const { attempts, handle, finishHung } = recorder((queued) => (stalling && queued.job.tenantId === 'slow' ? undefined : { done: true }));
      queue.consume(handle, 16);
      await eventually(() => attempts.filter((a) => a.job.tenantId === 'other').length === 20, 20_000);
      await pause(300);
      const slow = attempts.filter((a) => a.job.tenantId === 'slow');
      // The tenant's 3 slots, no more than 2 of them on one destination.
      expect(slow).toHaveLength(3);
      expect(Math.max(...['hook-a', 'hook-b'].map((hook) => slow.filter((a) => a.job.destination === hook).length))).toBe(2);
      // Once they settle, the slots go to the waiting ones.
      stalling = false;
      finishHung();
      await eventually(async () => (await queue.depth()) === 0, 20_000);
      expect(attempts.filter((a) => a.job.tenantId === 'slow')).toHaveLength(12);
    });

    it("delivers other jobs while many wait for their retry: a job waiting holds nothing they need", async () => {
      const { queue } = await (await harness()).open();
      const failing = Array.from({ length: 300 }, () => testJob({ destination: 'dead' }));
      await queue.enqueue(failing);
      const { attempts, handle } = recorder((queued) => (queued.job.destination === 'dead' ? { retryInMs: 3_600_000 } : { done: true }));
      queue.consume(handle, 8);
      await eventually(() => attempts.length >= 300, 30_000);
      const healthy = Array.from({ length: 30 }, () => testJob({ destination: 'alive' }));
      await queue.enqueue(healthy);
      await eventually(() => attempts.filter((a) => a.job.destination === 'alive').length === 30, 20_000);
      expect(attempts.filter((a) => a.job.destination === 'dead')).toHaveLength(300);
    });
  });
}
