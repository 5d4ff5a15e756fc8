/**
 * The bus carries rows from the pipeline to the storage consumers. Drivers: LocalLogBus
 * (embedded: a write-ahead log on local disk, applied to chDB in the background) and, in
 * cluster mode, NATS JetStream. publish() resolves only once the rows are durable — written
 * and fdatasync'ed to the local log, or acknowledged by JetStream — which is what a 2xx
 * promises the client.
 */
import type { Reservation } from '../core/byte-budget.ts';
import type { SluiceError } from '../core/errors.ts';
import type { ConsumerTotals } from '../core/metrics.ts';
import type { ComponentStatus } from '../core/readiness.ts';

/** RowBinary rows for one table. */
export interface TableChunk {
  table: string;
  columns: readonly string[];
  rows: number;
  data: Uint8Array;
}

/**
 * Moves a batch of chunks to storage; throws if they were not stored. A bus that may deliver
 * the same batch twice passes a dedupToken that is identical on every delivery. Once it
 * resolves, nothing may read the chunks' bytes any more (the JetStream consumer lends their
 * memory to the next messages it pulls).
 */
export type ChunkSink = (chunks: TableChunk[], dedupToken?: string) => Promise<void>;

export interface Bus {
  start(): Promise<void>;
  /**
   * Stops taking new chunks and drains what was accepted; a bus whose accepted rows are
   * durable (the local log) stops draining at `deadline` (epoch ms) and keeps the rest for the next start.
   */
  shutdown(deadline?: number): Promise<void>;
  /**
   * Once it resolves the bus reads the chunks' bytes no more: the caller may reuse their
   * buffers (the pipeline hands them to the next request's rows). `held` is the byte-budget
   * reservation covering the chunks; the publisher releases it when
   * this settles. A bus that still holds the bytes after settling (JetStream after a timeout:
   * they may sit in the connection's buffer) splits off what it keeps and releases that later.
   */
  publish(chunks: readonly TableChunk[], held?: Reservation): Promise<void>;
  /**
   * The refusal a publish of rows for `tables` would meet now, whatever the rows (the bus is
   * shutting down, stalled, or full until storage frees room), or undefined. Asked before a
   * request is decoded, so that a bus that cannot take rows does not cost the making of them.
   */
  refusal?(tables: readonly string[]): SluiceError | undefined;
  /** Registers the sink the consumer side delivers batches to. */
  consume(sink: ChunkSink): void;
  /** How the bus and this process's consumer loops are, for readiness (`bus`, `consumer.<table>`). */
  statuses(): Record<string, ComponentStatus>;
  /**
   * Resolves once rows acknowledged before the call are in storage (or after a time limit):
   * a bus that acknowledges before storage has them (the embedded log) lets reads wait for them.
   */
  settled?(): Promise<void>;
  /** Figures for /metrics: bytes waiting (embedded), consumer totals and lag (cluster consumers). */
  figures(): Promise<BusFigures>;
}

export interface BusFigures {
  /** Row bytes acknowledged and not yet in storage (embedded: in the local log). */
  backlogBytes?: number;
  /** The most backlog bytes before publishes are refused (embedded). */
  backlogLimitBytes?: number;
  /** Publishes refused because the bus was full, per table. */
  fullRefusals?: Record<string, number>;
  /** Messages of publishes that timed out (their requests got 503): to withdraw, withdrawn, not withdrawn (may be stored). */
  timedOut?: { pending: number; withdrawn: number; notWithdrawn: number };
  /** This process's storage consumer: its totals since start, and what waits per partition stream (one whose figures could not be read is left out). */
  consumer?: { totals: ConsumerTotals; lag: ConsumerLag[] };
}

/** What waits in one partition stream of a table for the storage consumers (one figure for the whole group). */
export interface ConsumerLag {
  table: string;
  partition: number;
  messages: number;
  bytes: number;
  /** The stream's max_bytes (-1: none). */
  limitBytes: number;
}

export function chunkBytes(chunks: readonly TableChunk[]): number {
  let bytes = 0;
  for (const chunk of chunks) bytes += chunk.data.byteLength;
  return bytes;
}

/** Whether two chunks carry the same column list (most often the very same array). */
export function sameColumns(a: readonly string[], b: readonly string[]): boolean {
  return a === b || (a.length === b.length && a.every((column, i) => column === b[i]));
}
