/**
 * LocalDeliveryQueue: the embedded delivery queue, on the embedded write-ahead log (the bus's
 * mechanism, bus/record-log.ts) in <dataDir>/delivery, so it survives a crash or a restart of
 * `npm start` with nothing else installed, and an enqueue is one group-committed fdatasync.
 *
 * The log holds `add`, `progress` and `done` records (local-records.ts); an enqueue is one `add`
 * record, so it is all or nothing. In memory is an index — per job its record's position,
 * attempts, next attempt time, tenant and destination — never the content: an attempt reads its
 * job from the log. Opening the queue replays the log from its checkpoint (the oldest record
 * with a job not done) to rebuild the index.
 *
 * Bounded: past maxBytes of records holding jobs not done, or maxJobs jobs, enqueue refuses with
 * 503 + Retry-After. A segment kept only by a few long-waiting jobs is compacted: those jobs are
 * written again at the end, so the disk holds about what is waiting. An attempt is counted
 * durably before it starts: after a crash mid-attempt the job comes back with that attempt used,
 * so a job that kills the process cannot loop forever. One process owns the data dir, so the
 * in-memory schedule is the only one.
 */
import { LogTimeout, RecordLog } from '../bus/record-log.ts';
import { SluiceError } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import { MinHeap } from '../core/min-heap.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import type { StateStore } from '../state/store.ts';
import { seriesKey, type DeliveryJob } from './job.ts';
import { addRecord, jobsOf, QUEUE_CODEC, recordBytes, type QueueRecord } from './job-records.ts';
import { HANDLER_FAILURE_RETRY_MS, type AttemptHandler, type DeliveryQueue, type Settlement } from './queue.ts';
import { DeliveryShares, destinationShareKey, isFull, tenantShareKey, type ShareLimits, type ShareSlot } from './shares.ts';

export interface LocalDeliveryQueueOptions {
  /** The queue's log directory (<dataDir>/delivery). */
  dir: string;
  /** Bytes of records holding jobs not done; past it enqueue refuses with 503. */
  maxBytes: number;
  /** Jobs not done (each has an entry in memory); past it enqueue refuses with 503. */
  maxJobs: number;
  /** How long an append may wait for the disk before it is withdrawn (a 503 at intake). */
  timeoutMs: number;
  retryAfterSeconds: number;
  shares: ShareLimits;
  /** Segment size of the log: the unit the disk is given back in. Default 8 MiB. */
  segmentBytes?: number;
  /** The state store whose journal held the queue before this log did: its jobs move here once. */
  carryOver?: StateStore;
  log: Logger;
  now?: () => number;
}

/** The longest a timer sleeps: a clock jump or a lost timer cannot stall the queue for long. */
const MAX_SLEEP_MS = 30_000;
const DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024;
/** What replay reads at once. */
const REPLAY_BATCH_BYTES = 16 * 1024 * 1024;
/** Buckets of the state-store journal that held the queue before. */
const OLD_JOBS = 'delivery_jobs';
const OLD_PROGRESS = 'delivery_progress';

/** One job not done, as the index holds it. */
interface Entry {
  key: string;
  /** The `add` record holding the job. */
  lsn: number;
  attempts: number;
  notBefore: number;
  tenantId: string;
  channel: DeliveryJob['channel'];
  destination: string;
  state: 'waiting' | 'parked' | 'running' | 'moving';
  /** Bumped at every push: a heap item with an older ticket is stale. */
  ticket: number;
}

interface HeapItem {
  entry: Entry;
  notBefore: number;
  ticket: number;
}

export class LocalDeliveryQueue implements DeliveryQueue {
  private readonly log: RecordLog<QueueRecord>;
  private readonly entries = new Map<string, Entry>();
  /** Records holding jobs not done: their bytes and how many of their jobs are not done. */
  private readonly records = new Map<number, { bytes: number; live: number }>();
  private readonly recordOrder = new MinHeap<number>((a, b) => a - b);
  private liveBytes = 0;
  private readonly waiting = new MinHeap<HeapItem>((a, b) => a.notBefore - b.notBefore);
  /** Jobs due but waiting for a slot, by the share that is full. */
  private readonly parked = new Map<string, Entry[]>();
  private readonly shares: DeliveryShares;
  /** Enqueues being written, by key: a second enqueue of a key waits for the first. */
  private readonly adding = new Map<string, Promise<unknown>>();
  private addingBytes = 0;
  private readonly running = new Set<Promise<void>>();
  private reading: Promise<unknown> = Promise.resolve();
  private tidying: Promise<void> | undefined;
  private handle: AttemptHandler | undefined;
  private concurrency = 1;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private lastError: string | undefined;
  private readonly now: () => number;
  private readonly segmentBytes: number;

  constructor(private readonly options: LocalDeliveryQueueOptions) {
    this.segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
    this.log = new RecordLog(options.dir, QUEUE_CODEC, {
      segmentBytes: this.segmentBytes,
      onRepair: (detail) => options.log.warn(detail, 'delivery queue: cut a record a crash left unfinished (it was never acknowledged)'),
    });
    this.shares = new DeliveryShares(options.shares);
    this.now = options.now ?? Date.now;
  }

  /** Opens the log and rebuilds the index from it; moves the jobs of an older release's journal over. */
  async start(): Promise<void> {
    await this.log.open();
    let from = this.log.checkpoint.applied;
    for (;;) {
      const { records, next } = await this.log.read(from, REPLAY_BATCH_BYTES);
      if (records.length === 0) break;
      for (const record of records) this.apply(record.lsn, record.end - record.lsn, record.value);
      from = next;
    }
    if (this.options.carryOver) await this.carryOver(this.options.carryOver);
    for (const entry of this.entries.values()) this.schedule(entry);
    if (this.entries.size > 0) this.options.log.info({ jobs: this.entries.size }, 'delivery queue: jobs carried over from the last run');
  }

  async shutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    while (this.running.size > 0) await Promise.all(this.running);
    await this.tidying;
    await this.log.close();
  }

  async enqueue(jobs: readonly DeliveryJob[]): Promise<void> {
    // A series being written by another enqueue: wait for its outcome, then look again.
    for (let pending = this.beingAdded(jobs); pending.length > 0; pending = this.beingAdded(jobs)) await Promise.allSettled(pending);
    if (this.stopped) throw this.unavailable('the delivery queue is shutting down');
    const fresh = new Map<string, DeliveryJob>();
    for (const job of jobs) if (!this.entries.has(seriesKey(job))) fresh.set(seriesKey(job), job);
    if (fresh.size === 0) return;
    const record = addRecord([...fresh.values()].map((job) => ({ job, attempts: 0, notBefore: 0 })));
    const bytes = recordBytes(record);
    if (this.entries.size + this.adding.size + fresh.size > this.options.maxJobs || this.liveBytes + this.addingBytes + bytes > this.options.maxBytes) {
      throw this.unavailable('the delivery queue is full (SLUICE_DELIVERY_MAX_QUEUE_BYTES or _JOBS): delivery workers are behind');
    }
    const written = this.append(record);
    for (const key of fresh.keys()) this.adding.set(key, written);
    this.addingBytes += bytes;
    let lsn: number;
    try {
      lsn = await written;
    } catch (err) {
      throw err instanceof LogTimeout ? this.unavailable('the disk did not take the jobs in time') : this.unavailable(`the delivery queue could not be written: ${(err as Error).message}`, err);
    } finally {
      for (const key of fresh.keys()) this.adding.delete(key);
      this.addingBytes -= bytes;
    }
    this.apply(lsn, bytes, record);
    for (const key of fresh.keys()) this.schedule(this.entries.get(key)!);
    this.pump();
  }

  consume(handle: AttemptHandler, concurrency: number): void {
    this.handle = handle;
    this.concurrency = Math.max(1, concurrency);
    this.pump();
  }

  async depth(): Promise<number> {
    return this.entries.size;
  }

  statuses(): Record<string, ComponentStatus> {
    const { maxBytes, maxJobs } = this.options;
    const figures = { jobs: this.entries.size, bytes: this.liveBytes, limitBytes: maxBytes, limitJobs: maxJobs, attempting: this.running.size };
    if (this.stopped) return { 'delivery.queue': { ok: false, detail: 'shutting down', figures } };
    if (this.liveBytes >= maxBytes * 0.9 || this.entries.size >= maxJobs * 0.9) {
      return { 'delivery.queue': { ok: false, detail: 'the delivery queue is nearly full: intake is refused with 503 when it is', figures } };
    }
    return { 'delivery.queue': { ok: true, figures, ...(this.lastError ? { detail: `last failure: ${this.lastError}` } : {}) } };
  }

  /** The appends under way of any of these jobs' series. */
  private beingAdded(jobs: readonly DeliveryJob[]): Array<Promise<unknown>> {
    return [...new Set(jobs.flatMap((job) => this.adding.get(seriesKey(job)) ?? []))];
  }

  /** Applies one record of the log to the index (at start, and after each enqueue). */
  private apply(lsn: number, bytes: number, { head }: QueueRecord): void {
    if (head.op === 'add') {
      let live = 0;
      for (const job of head.jobs) {
        const key = seriesKey(job);
        const earlier = this.entries.get(key);
        // Written again by compaction: the later record is the job's.
        if (earlier) this.forget(earlier);
        this.entries.set(key, {
          key, lsn, attempts: job.attempts, notBefore: job.notBefore, tenantId: job.tenantId, channel: job.channel, destination: job.destination, state: 'waiting', ticket: 0,
        });
        live++;
      }
      if (live === 0) return;
      this.records.set(lsn, { bytes, live });
      this.recordOrder.push(lsn);
      this.liveBytes += bytes;
      return;
    }
    const entry = this.entries.get(head.key);
    if (!entry) return; // done before the checkpoint
    if (head.op === 'progress') {
      entry.attempts = head.attempts;
      entry.notBefore = head.notBefore;
    } else {
      this.entries.delete(head.key);
      this.forget(entry);
    }
  }

  /** The job no longer holds its record. */
  private forget(entry: Entry): void {
    const record = this.records.get(entry.lsn);
    if (!record || --record.live > 0) return;
    this.records.delete(entry.lsn);
    this.liveBytes -= record.bytes;
  }

  /** Puts the job on the schedule at its next attempt time. */
  private schedule(entry: Entry): void {
    entry.state = 'waiting';
    this.waiting.push({ entry, notBefore: entry.notBefore, ticket: ++entry.ticket });
  }

  /** Starts every due attempt there is room and a share for; sleeps until the next one is due. */
  private pump(): void {
    if (this.stopped || !this.handle) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = this.now();
    while (this.running.size < this.concurrency) {
      const item = this.waiting.peek();
      if (!item || item.notBefore > now) break;
      this.waiting.pop();
      const { entry } = item;
      if (item.ticket !== entry.ticket || entry.state !== 'waiting' || this.entries.get(entry.key) !== entry) continue;
      const slot = this.shares.take(entry);
      if (isFull(slot)) {
        entry.state = 'parked';
        const parked = this.parked.get(slot.key);
        if (parked) parked.push(entry);
        else this.parked.set(slot.key, [entry]);
        continue;
      }
      this.begin(entry, slot, this.handle);
    }
    const next = this.waiting.peek();
    if (next && this.running.size < this.concurrency) {
      this.timer = setTimeout(() => this.pump(), Math.min(MAX_SLEEP_MS, Math.max(0, next.notBefore - this.now()))).unref();
    }
  }

  private begin(entry: Entry, slot: ShareSlot, handle: AttemptHandler): void {
    entry.state = 'running';
    const running: Promise<void> = this.attempt(entry, handle).finally(() => {
      slot.release();
      this.running.delete(running);
      // A slot of this tenant and of this destination is free: one job parked on each may go.
      this.unpark(tenantShareKey(entry));
      this.unpark(destinationShareKey(entry));
      this.pump();
    });
    this.running.add(running);
  }

  private unpark(shareKey: string): void {
    const parked = this.parked.get(shareKey);
    const entry = parked?.shift();
    if (parked?.length === 0) this.parked.delete(shareKey);
    if (entry && entry.state === 'parked' && this.entries.get(entry.key) === entry) this.schedule(entry);
  }

  private async attempt(entry: Entry, handle: AttemptHandler): Promise<void> {
    const attempts = entry.attempts + 1;
    let settlement: Settlement;
    try {
      // Counted before it starts: a crash mid-attempt uses the attempt up.
      await this.append({ head: { op: 'progress', key: entry.key, attempts, notBefore: this.now() } });
      entry.attempts = attempts;
      const job = await this.readJob(entry);
      settlement = await handle({ job, attempt: attempts }).catch((err: unknown) => {
        this.options.log.error({ err, job: entry.key }, 'delivery attempt failed unexpectedly; the job is tried again later');
        return { retryInMs: HANDLER_FAILURE_RETRY_MS };
      });
    } catch (err) {
      // The log could not be read or written: nothing was sent; try again later.
      this.failed(entry, err, 'delivery queue: the log failed before an attempt; the job is tried again later');
      return;
    }
    await this.settle(entry, settlement);
  }

  private async settle(entry: Entry, settlement: Settlement): Promise<void> {
    try {
      if ('done' in settlement) {
        await this.append({ head: { op: 'done', key: entry.key } });
        this.entries.delete(entry.key);
        this.forget(entry);
        this.tidy();
        return;
      }
      const notBefore = this.now() + settlement.retryInMs;
      await this.append({ head: { op: 'progress', key: entry.key, attempts: entry.attempts, notBefore } });
      entry.notBefore = notBefore;
      this.schedule(entry);
    } catch (err) {
      this.failed(entry, err, 'delivery queue: could not record the outcome; the job stays queued');
    }
  }

  private failed(entry: Entry, err: unknown, message: string): void {
    this.lastError = (err as Error).message;
    this.options.log.error({ err, job: entry.key }, message);
    entry.notBefore = this.now() + HANDLER_FAILURE_RETRY_MS;
    this.schedule(entry);
  }

  private append(record: QueueRecord): Promise<number> {
    return this.log.appendWithin(record, this.options.timeoutMs);
  }

  /** Reads go one at a time: the log reads into one buffer, which the next read reuses. */
  private read<T>(work: () => Promise<T>): Promise<T> {
    const result = this.reading.then(work, work);
    this.reading = result.catch(() => {});
    return result;
  }

  private readJob(entry: Entry): Promise<DeliveryJob> {
    return this.read(async () => {
      const { records } = await this.log.read(entry.lsn, 0);
      const job = records[0]?.lsn === entry.lsn ? jobsOf(records[0].value).get(entry.key) : undefined;
      if (!job) throw new Error(`the log has no job ${entry.key} at ${entry.lsn}`);
      return job;
    });
  }

  /** Gives back whole segments nothing waits in any more, and compacts when few jobs keep many. */
  private tidy(): void {
    if (this.tidying || this.stopped) return;
    this.tidying = this.release()
      .then(async () => {
        if (this.log.end - this.oldestLive() > 2 * this.liveBytes + 2 * this.segmentBytes) {
          await this.compact();
          await this.release();
        }
      })
      .catch((err: unknown) => {
        this.lastError = (err as Error).message;
        this.options.log.warn({ err }, 'delivery queue: could not give disk space back; tried again later');
      })
      .finally(() => (this.tidying = undefined));
  }

  /** The position of the oldest record holding a job not done (the log's end when there is none). */
  private oldestLive(): number {
    while (this.recordOrder.size > 0 && !this.records.has(this.recordOrder.peek()!)) this.recordOrder.pop();
    return this.recordOrder.peek() ?? this.log.end;
  }

  private async release(): Promise<void> {
    const applied = this.oldestLive();
    if (!this.log.releasable(applied)) return;
    await this.log.writeCheckpoint({ applied });
    await this.log.release(applied);
  }

  /**
   * Writes the jobs of the older half of the log again at its end, record by record (a job being
   * attempted stays where it is), so the segments they kept can go.
   */
  private async compact(): Promise<void> {
    const oldest = this.oldestLive();
    const boundary = oldest + (this.log.end - oldest) / 2;
    const byRecord = new Map<number, Entry[]>();
    for (const entry of this.entries.values()) {
      if (entry.lsn >= boundary || entry.state === 'running') continue;
      const group = byRecord.get(entry.lsn);
      if (group) group.push(entry);
      else byRecord.set(entry.lsn, [entry]);
    }
    for (const [lsn, group] of byRecord) {
      if (this.stopped) return;
      const moving = group.filter((entry) => entry.state !== 'running' && this.entries.get(entry.key) === entry);
      for (const entry of moving) entry.state = 'moving';
      try {
        const jobs = await this.read(async () => {
          const { records } = await this.log.read(lsn, 0);
          return jobsOf(records[0]!.value);
        });
        const record = addRecord(moving.map((entry) => ({ job: jobs.get(entry.key)!, attempts: entry.attempts, notBefore: entry.notBefore })));
        // apply() moves each job to the new record (and off the old one).
        this.apply(await this.append(record), recordBytes(record), record);
      } finally {
        for (const entry of moving) this.schedule(this.entries.get(entry.key) ?? entry);
      }
    }
    this.pump();
  }

  /** Jobs of the state-store journal an earlier release kept the queue in: added here, then removed there. */
  private async carryOver(state: StateStore): Promise<void> {
    const progress = new Map(await state.list<{ attempts: number; notBefore: number }>(OLD_PROGRESS));
    const old = await state.list<DeliveryJob>(OLD_JOBS);
    if (old.length === 0) return;
    const jobs = old.filter(([key]) => !this.entries.has(key)).map(([key, job]) => ({ job, attempts: progress.get(key)?.attempts ?? 0, notBefore: progress.get(key)?.notBefore ?? 0 }));
    if (jobs.length > 0) {
      const record = addRecord(jobs);
      this.apply(await this.append(record), recordBytes(record), record);
    }
    await Promise.all(old.map(([key]) => Promise.all([state.delete(OLD_PROGRESS, key), state.delete(OLD_JOBS, key)])));
    this.options.log.info({ jobs: old.length }, 'delivery queue: moved the jobs of the state-store journal to the delivery log');
  }

  private unavailable(message: string, cause?: unknown): SluiceError {
    return new SluiceError('unavailable', message, { cause, retryAfterSeconds: this.options.retryAfterSeconds });
  }
}
