/**
 * MemoryBus: the embedded bus. Publishers wait in a queue; one consumer loop takes everything
 * queued (up to maxBatchBytes) and hands it to the sink as one batch, so many requests share
 * one insert (group commit) while the previous insert runs. A publisher's promise settles with
 * its batch: a 2xx is sent only after the insert that holds its rows committed.
 *
 * Memory is bounded: past maxPendingBytes new publishes are refused with 503. A publish still
 * queued after timeoutMs is withdrawn and refused (nothing of it is stored); one already handed
 * to the sink waits for the sink's verdict, so a 503 always means "not stored".
 */
import { SluiceError } from '../core/errors.ts';
import { chunkBytes, type Bus, type ChunkSink, type TableChunk } from './bus.ts';

export interface MemoryBusOptions {
  maxPendingBytes: number;
  /** Upper bound of one batch handed to the sink. */
  maxBatchBytes: number;
  timeoutMs: number;
  retryAfterSeconds: number;
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
      await sink(batch.flatMap((p) => p.chunks));
      for (const pending of batch) pending.resolve();
    } catch (err) {
      const error = err instanceof SluiceError ? err : this.unavailable('storage insert failed', err);
      for (const pending of batch) pending.reject(error);
    } finally {
      this.pendingBytes -= bytes;
    }
  }
}
