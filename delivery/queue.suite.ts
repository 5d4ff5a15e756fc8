/**
 * The contract every DeliveryQueue driver passes (local journal embedded; JetStream in a
 * cluster). Call describeDeliveryQueue from a driver's test file with a harness whose open()
 * gives a queue on one shared backing: a second open() is a second process on the same queue.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../test/harness.ts';
import type { DeliveryJob } from './job.ts';
import type { DeliveryQueue, QueuedAttempt, Settlement } from './queue.ts';

export interface QueueHarness {
  open(): Promise<{ queue: DeliveryQueue; kill(): Promise<void> }>;
  cleanup(): Promise<void>;
}

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

/** A handler that records each attempt and settles it as `decide` says (never, when it returns undefined). */
function recorder(decide: (queued: QueuedAttempt) => Settlement | undefined) {
  const attempts: QueuedAttempt[] = [];
  const handle = (queued: QueuedAttempt) => {
    attempts.push(queued);
    const settlement = decide(queued);
    return settlement ? Promise.resolve(settlement) : new Promise<Settlement>(() => {});
  };
  return { attempts, handle };
}

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
        open: async () => {
          const opened = await made.open();
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
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(attempts).toHaveLength(2);
    });

    it('runs at most `concurrency` attempts at once', async () => {
      const { queue } = await (await harness()).open();
      await queue.enqueue(Array.from({ length: 6 }, () => testJob()));
      let running = 0;
      let most = 0;
      let finished = 0;
      queue.consume(async () => {
        most = Math.max(most, ++running);
        await new Promise((resolve) => setTimeout(resolve, 100));
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
  });
}
