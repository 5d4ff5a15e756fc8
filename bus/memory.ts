/**
 * MemoryBus: the embedded bus. Publishers wait in a queue; one consumer loop takes everything
 * queued (up to maxBatchBytes) and hands it to the sink as one batch, so many requests share
 * one insert (group commit) while the previous insert runs. A publisher's promise settles with
 * its batch: a 2xx is sent only after the insert that holds its rows committed.
 *
 * Memory is bounded: past maxPendingBytes new publishes are refused with 503. A publish still
 * queued after timeoutMs is withdrawn and refused (nothing of it is stored); one already handed
 * to the sink waits for the sink's verdict, so a 503 always means "not stored".
 *
 * A batch is inserted table by table. When storage refuses the rows themselves (a data error,
 * storage/errors.ts), the requests of that table's insert are split until the offender is
 * alone: it gets the error (400), the others of the group commit are stored and get their 2xx.
 * A request with rows in several tables (OTLP metrics) whose rows in a later table are refused
 * keeps the rows of the tables inserted before it: ClickHouse has no transaction across tables.
 */
import { SluiceError } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import { isDataError } from '../storage/errors.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { chunkBytes, type Bus, type BusFigures, type ChunkSink, type TableChunk } from './bus.ts';
import { storeIsolating } from './isolate.ts';

export interface MemoryBusOptions {
  maxPendingBytes: number;
  /** Upper bound of one batch handed to the sink. */
  maxBatchBytes: number;
  timeoutMs: number;
  retryAfterSeconds: number;
  /** Says why requests were refused after they reached storage. */
  log?: Logger;
}

interface Pending {
  chunks: readonly TableChunk[];
  bytes: number;
  resolve: () => void;
  reject: (err: unknown) => void;
  timer: NodeJS.Timeout;
}

export class MemoryBus implements Bus {
  private readonly queue: Pending[] = [];
  private pendingBytes = 0;
  private sink: ChunkSink | undefined;
  private draining: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly options: MemoryBusOptions) {}

  async start(): Promise<void> {}

  async shutdown(): Promise<void> {
    this.closed = true;
    while (this.draining) await this.draining;
  }

  consume(sink: ChunkSink): void {
    this.sink = sink;
    this.kick();
  }

  /** Bytes accepted but not yet committed (for /metrics). */
  get backlogBytes(): number {
    return this.pendingBytes;
  }

  statuses(): Record<string, ComponentStatus> {
    const figures = { backlogBytes: this.pendingBytes, limitBytes: this.options.maxPendingBytes };
    if (this.closed) return { bus: { ok: false, detail: 'shutting down', figures } };
    // Full is not down: it refuses with 503 until storage catches up, which readiness should show.
    if (this.pendingBytes >= this.options.maxPendingBytes * 0.9) return { bus: { ok: false, detail: 'storage is behind: the commit queue is full', figures } };
    return { bus: { ok: true, figures } };
  }

  async figures(): Promise<BusFigures> {
    return { backlogBytes: this.pendingBytes };
  }

  publish(chunks: readonly TableChunk[]): Promise<void> {
    if (chunks.length === 0) return Promise.resolve();
    const bytes = chunkBytes(chunks);
    if (this.closed) return Promise.reject(this.unavailable('shutting down'));
    if (this.pendingBytes + bytes > this.options.maxPendingBytes) {
      return Promise.reject(this.unavailable('storage is behind: too much data waiting for insert'));
    }
    return new Promise<void>((resolve, reject) => {
      const pending: Pending = { chunks, bytes, resolve, reject, timer: undefined as unknown as NodeJS.Timeout };
      pending.timer = setTimeout(() => this.withdraw(pending), this.options.timeoutMs);
      this.queue.push(pending);
      this.pendingBytes += bytes;
      this.kick();
    });
  }

  private unavailable(message: string, cause?: unknown): SluiceError {
    return new SluiceError('unavailable', message, { cause, retryAfterSeconds: this.options.retryAfterSeconds });
  }

  private withdraw(pending: Pending): void {
    const index = this.queue.indexOf(pending);
    if (index < 0) return; // already with the sink: its verdict settles the promise
    this.queue.splice(index, 1);
    this.pendingBytes -= pending.bytes;
    pending.reject(this.unavailable('storage did not commit in time'));
  }

  private kick(): void {
    if (this.draining || !this.sink || this.queue.length === 0) return;
    this.draining = this.drain(this.sink).finally(() => {
      this.draining = undefined;
      this.kick();
    });
  }

  private async drain(sink: ChunkSink): Promise<void> {
    const batch: Pending[] = [];
    let bytes = 0;
    while (this.queue.length > 0 && (batch.length === 0 || bytes + this.queue[0]!.bytes <= this.options.maxBatchBytes)) {
      const pending = this.queue.shift()!;
      clearTimeout(pending.timer);
      batch.push(pending);
      bytes += pending.bytes;
    }
    try {
      const refused = new Map<Pending, unknown>();
      for (const members of byTable(batch)) {
        const candidates = members.filter((member) => !refused.has(member.pending));
        const outcomes = await storeIsolating(candidates, (group) => sink(group.flatMap((member) => member.chunks)));
        outcomes.forEach((err, index) => err !== undefined && refused.set(candidates[index]!.pending, err));
      }
      this.report(batch.length, refused);
      for (const pending of batch) {
        if (refused.has(pending)) pending.reject(this.toClientError(refused.get(pending)));
        else pending.resolve();
      }
    } finally {
      this.pendingBytes -= bytes;
    }
  }

  /** Storage errors as the client sees them: an outage is a 503 with Retry-After, anything unclassified a bug. */
  private toClientError(err: unknown): SluiceError {
    if (!(err instanceof SluiceError)) return new SluiceError('internal', 'storage insert failed unexpectedly', { cause: err });
    if (err.code === 'unavailable' && err.retryAfterSeconds === undefined) return this.unavailable(err.message, err);
    return err;
  }

  private report(requests: number, refused: Map<Pending, unknown>): void {
    if (refused.size === 0) return;
    const poisoned = [...refused.values()].filter(isDataError);
    const first = [...refused.values()][0];
    this.options.log?.warn(
      { requests, refused: refused.size, poisoned: poisoned.length, err: (first as Error)?.message },
      poisoned.length > 0 ? 'storage refused the rows of some requests; the rest of the group commit was stored' : 'storage insert failed; requests refused with 503',
    );
  }
}

interface Member {
  pending: Pending;
  chunks: TableChunk[];
}

/** The batch as one list of requests per insert (table and column list), in arrival order. */
function byTable(batch: readonly Pending[]): Member[][] {
  const groups = new Map<string, Map<Pending, Member>>();
  for (const pending of batch) {
    for (const chunk of pending.chunks) {
      const key = `${chunk.table}\n${chunk.columns.join(',')}`;
      const members = groups.get(key) ?? new Map<Pending, Member>();
      groups.set(key, members);
      const member = members.get(pending) ?? { pending, chunks: [] };
      members.set(pending, member);
      member.chunks.push(chunk);
    }
  }
  return [...groups.values()].map((members) => [...members.values()]);
}
