/**
 * LocalDeliveryQueue: the embedded delivery queue, kept in the state store's journal (the local
 * driver: one JSON line per change, group-committed with fdatasync, compacted when mostly dead),
 * so it survives a restart of `npm start` with nothing else installed. Two buckets: the jobs
 * (written once, removed when done) and their progress (attempts used, next attempt time) —
 * small lines for the frequent writes, so a retry does not rewrite a job's content.
 *
 * An attempt is counted durably before it starts: after a crash mid-attempt the job comes back
 * with that attempt used, so a job that kills the process cannot loop forever. One process owns
 * the data dir, so the in-memory schedule is the only one.
 */
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import type { StateStore } from '../state/store.ts';
import { seriesKey, type DeliveryJob } from './job.ts';
import { HANDLER_FAILURE_RETRY_MS, type AttemptHandler, type DeliveryQueue, type Settlement } from './queue.ts';

const JOBS = 'delivery_jobs';
const PROGRESS = 'delivery_progress';
/** The longest a timer sleeps: a clock jump or a lost timer cannot stall the queue for long. */
const MAX_SLEEP_MS = 30_000;

interface Progress {
  attempts: number;
  /** Epoch ms before which the job is not handed out. */
  notBefore: number;
}

interface Waiting {
  key: string;
  notBefore: number;
}

export class LocalDeliveryQueue implements DeliveryQueue {
  private readonly waiting = new MinHeap<Waiting>((a, b) => a.notBefore - b.notBefore);
  /** Keys waiting or running: enqueue() of a series already here is a no-op. */
  private readonly known = new Set<string>();
  private readonly running = new Set<Promise<void>>();
  private handle: AttemptHandler | undefined;
  private concurrency = 1;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private lastError: string | undefined;

  constructor(private readonly state: StateStore, private readonly log: Logger, private readonly now: () => number = Date.now) {}

  /** Loads what the journal holds: every job not done, at its recorded next attempt time. */
  async start(): Promise<void> {
    const progress = new Map(await this.state.list<Progress>(PROGRESS));
    for (const [key] of await this.state.list<DeliveryJob>(JOBS)) {
      this.known.add(key);
      this.waiting.push({ key, notBefore: progress.get(key)?.notBefore ?? 0 });
    }
    if (this.known.size > 0) this.log.info({ jobs: this.known.size }, 'delivery queue: jobs carried over from the last run');
  }

  async shutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    while (this.running.size > 0) await Promise.all(this.running);
  }

  async enqueue(jobs: readonly DeliveryJob[]): Promise<void> {
    const added: string[] = [];
    await Promise.all(jobs.map(async (job) => {
      const key = seriesKey(job);
      if (this.known.has(key)) return;
      // create(): a series already in the journal stays as it is (its progress too).
      if ((await this.state.create(JOBS, key, job)) !== undefined) added.push(key);
    }));
    for (const key of added) {
      this.known.add(key);
      this.waiting.push({ key, notBefore: 0 });
    }
    this.pump();
  }

  consume(handle: AttemptHandler, concurrency: number): void {
    this.handle = handle;
    this.concurrency = Math.max(1, concurrency);
    this.pump();
  }

  async depth(): Promise<number> {
    return this.known.size;
  }

  statuses(): Record<string, ComponentStatus> {
    const figures = { jobs: this.known.size, attempting: this.running.size };
    if (this.stopped) return { 'delivery.queue': { ok: false, detail: 'shutting down', figures } };
    return { 'delivery.queue': { ok: true, figures, ...(this.lastError ? { detail: `last failure: ${this.lastError}` } : {}) } };
  }

  /** Starts every due attempt there is room for; sleeps until the next one is due. */
  private pump(): void {
    if (this.stopped || !this.handle) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.running.size < this.concurrency) {
      const next = this.waiting.peek();
      if (!next || next.notBefore > this.now()) break;
      this.waiting.pop();
      const running: Promise<void> = this.attempt(next.key, this.handle).finally(() => {
        this.running.delete(running);
        this.pump();
      });
      this.running.add(running);
    }
    const next = this.waiting.peek();
    if (next && this.running.size < this.concurrency) {
      this.timer = setTimeout(() => this.pump(), Math.min(MAX_SLEEP_MS, Math.max(0, next.notBefore - this.now()))).unref();
    }
  }

  private async attempt(key: string, handle: AttemptHandler): Promise<void> {
    let settlement: Settlement;
    let attempts = 0;
    try {
      const job = await this.state.get<DeliveryJob>(JOBS, key);
      if (!job) {
        this.known.delete(key);
        return;
      }
      attempts = ((await this.state.get<Progress>(PROGRESS, key))?.attempts ?? 0) + 1;
      // Counted before it starts: a crash mid-attempt uses the attempt up.
      await this.state.put<Progress>(PROGRESS, key, { attempts, notBefore: this.now() });
      settlement = await handle({ job, attempt: attempts }).catch((err: unknown) => {
        this.log.error({ err, job: key }, 'delivery attempt failed unexpectedly; the job is tried again later');
        return { retryInMs: HANDLER_FAILURE_RETRY_MS };
      });
    } catch (err) {
      // The journal could not be read or written: nothing was sent; try again later.
      this.lastError = (err as Error).message;
      this.log.error({ err, job: key }, 'delivery queue: the journal failed; the job is tried again later');
      this.waiting.push({ key, notBefore: this.now() + HANDLER_FAILURE_RETRY_MS });
      return;
    }
    await this.settle(key, attempts, settlement);
  }

  private async settle(key: string, attempts: number, settlement: Settlement): Promise<void> {
    try {
      if ('done' in settlement) {
        await this.state.delete(PROGRESS, key);
        await this.state.delete(JOBS, key);
        this.known.delete(key);
        return;
      }
      const notBefore = this.now() + settlement.retryInMs;
      await this.state.put<Progress>(PROGRESS, key, { attempts, notBefore });
      this.waiting.push({ key, notBefore });
    } catch (err) {
      this.lastError = (err as Error).message;
      this.log.error({ err, job: key }, 'delivery queue: could not record the outcome; the job stays queued');
      this.waiting.push({ key, notBefore: this.now() + HANDLER_FAILURE_RETRY_MS });
    }
  }
}

/** A binary min-heap: the next job due in O(log n), however many wait. */
class MinHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly compare: (a: T, b: T) => number) {}

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.compare(items[i]!, items[parent]!) >= 0) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < items.length && this.compare(items[left]!, items[smallest]!) < 0) smallest = left;
        if (right < items.length && this.compare(items[right]!, items[smallest]!) < 0) smallest = right;
        if (smallest === i) break;
        [items[i], items[smallest]] = [items[smallest]!, items[i]!];
        i = smallest;
      }
    }
    return top;
  }
}
