/**
 * IngestTally: what the front ends took in, per source, signal, outcome and refusal reason, for
 * the console's overview. Each front end counts every request once, as it answers it; every
 * flush interval (10 s) the counts become rows of `ingest_counts` (storage/schema.ts), published on
 * the bus like any other rows, so the embedded log and JetStream carry them and every gateway of
 * a cluster adds its own rows to the same table.
 *
 * What is counted (docs/reference/storage.md, Ingest counts):
 * - an accepted request: one request, the items the pipeline stored (spans, log records, data
 *   points, entries); items it refused one by one inside the request (OTLP partial_success) are
 *   refused items of reason `bad_request`, with no request of their own;
 * - a refused request: one request and its items when they were counted (refused after
 *   decoding: the bus or storage could not take them), else one item — its payload was never
 *   read, and a refusal that counted as nothing would not show on the overview at all;
 * - the reason is the refusal's error code (core/errors.ts);
 * - the source is the key's; a request refused before its key was checked (rate limited, no key
 *   or a bad one) counts under the empty SourceId, which no tenant's overview shows.
 *
 * The hot path is one Map lookup by source and two additions into a Float64Array of that source
 * (a slot per signal and outcome): nothing is allocated per request. A flush that the bus refuses
 * is kept and sent again with the next one, up to maxPendingRows rows: past that the oldest
 * rows are dropped, counted and logged, so a long storage outage never grows memory without
 * limit.
 */
import type { Bus, TableChunk } from '../bus/bus.ts';
import { ERROR_CODES, SluiceError, type ErrorCode } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import type { SignalLabel } from '../core/metrics.ts';
import { sleep, type LoopContext } from '../core/supervisor.ts';
import { RefusedAfterDecoding } from './ingest.ts';
import { TranscodeOutput } from '../storage/table-rows.ts';
import type { RowBinaryWriter } from '../storage/rowbinary.ts';

const SIGNALS: readonly SignalLabel[] = ['traces', 'logs', 'metrics', 'agent_logs', 'agent_metrics', 'heartbeats', 'deploys'];
const SIGNAL_SLOT = new Map(SIGNALS.map((signal, i) => [signal, i]));
/** Outcome slot 0 is accepted; 1 + i is refused with REASONS[i]. */
const REASONS = Object.keys(ERROR_CODES) as ErrorCode[];
const REASON_SLOT = new Map(REASONS.map((reason, i) => [reason, 1 + i]));
const OUTCOMES = 1 + REASONS.length;
/** Per source: requests and items for each signal and outcome. */
const COUNTERS = SIGNALS.length * OUTCOMES * 2;

export interface IngestTallyOptions {
  bus: Pick<Bus, 'publish'>;
  log: Logger;
  /** Length of a bucket and time between flushes. Default 10 s. */
  flushIntervalMs?: number;
  /** Rows kept for the next flush while the bus refuses them; past it the oldest go. Default 50,000 (about 4 MB). */
  maxPendingRows?: number;
  /** Called with the number of rows dropped over maxPendingRows (a metric). */
  onDropped?: (rows: number) => void;
  now?: () => number;
}

export class IngestTally {
  /** sourceId → counters of the bucket under way. */
  private counts = new Map<string, Float64Array>();
  /** When the bucket under way began (epoch ms). */
  private since: number;
  /** Encoded rows of earlier flushes the bus did not take, oldest first. */
  private readonly pending: TableChunk[] = [];
  private pendingRows = 0;
  private flushing: Promise<void> = Promise.resolve();
  private readonly stopped = new AbortController();
  private readonly intervalMs: number;
  private readonly maxPendingRows: number;
  private readonly now: () => number;

  constructor(private readonly options: IngestTallyOptions) {
    this.intervalMs = options.flushIntervalMs ?? 10_000;
    this.maxPendingRows = options.maxPendingRows ?? 50_000;
    this.now = options.now ?? Date.now;
    this.since = this.now();
  }

  /** An accepted request: `items` stored, `rejected` refused one by one inside it. */
  accepted(sourceId: string, signal: SignalLabel, items: number, rejected = 0): void {
    const counters = this.countersOf(sourceId);
    const slot = SIGNAL_SLOT.get(signal)! * OUTCOMES * 2;
    counters[slot]! += 1;
    counters[slot + 1]! += items;
    if (rejected > 0) counters[slot + REASON_SLOT.get('bad_request')! * 2 + 1]! += rejected;
  }

  /** A refused request, with the error it was answered with (its code is the reason). */
  refused(sourceId: string, signal: SignalLabel, err: unknown): void {
    const reason = err instanceof SluiceError ? err.code : 'internal';
    this.refusedFor(sourceId, signal, reason, err instanceof RefusedAfterDecoding ? err.items : undefined);
  }

  /** A refused request by reason; `items` when they were counted (else it counts as one). */
  refusedFor(sourceId: string, signal: SignalLabel, reason: ErrorCode, items?: number): void {
    const counters = this.countersOf(sourceId);
    const slot = (SIGNAL_SLOT.get(signal)! * OUTCOMES + REASON_SLOT.get(reason)!) * 2;
    counters[slot]! += 1;
    counters[slot + 1]! += items ?? 1;
  }

  /**
   * The flush loop, for the supervisor: flushes at every bucket boundary (wall clock, so every
   * gateway's rows of a bucket carry the same Timestamp) until stopped or shut down.
   */
  async run({ signal }: LoopContext): Promise<void> {
    const stop = AbortSignal.any([signal, this.stopped.signal]);
    for (;;) {
      await sleep(this.intervalMs - (this.now() % this.intervalMs), stop);
      if (stop.aborted) break;
      await this.flush();
    }
    // Shut down before the supervisor stops: parked until it does (a loop that returns by itself is restarted).
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  }

  /**
   * Publishes the counts so far (and what earlier flushes could not), stamped with the start of
   * their bucket. Never throws: a refusal is logged and the rows wait for the next flush.
   */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.flushOnce());
    return this.flushing;
  }

  /** Stops the loop and flushes the rest (the front ends have stopped counting by then). */
  async shutdown(): Promise<void> {
    this.stopped.abort();
    await this.flush();
    if (this.pendingRows === 0) return;
    this.options.onDropped?.(this.pendingRows);
    this.options.log.error({ rows: this.pendingRows }, 'ingest counts lost at shutdown: the bus did not take them');
    this.pending.length = 0;
    this.pendingRows = 0;
  }

  /** Rows waiting for the bus (for tests and figures). */
  get pendingRowCount(): number {
    return this.pendingRows;
  }

  private countersOf(sourceId: string): Float64Array {
    let counters = this.counts.get(sourceId);
    if (!counters) this.counts.set(sourceId, (counters = new Float64Array(COUNTERS)));
    return counters;
  }

  private async flushOnce(): Promise<void> {
    const counts = this.counts;
    const bucket = Math.floor(this.since / this.intervalMs) * this.intervalMs;
    this.counts = new Map();
    this.since = this.now();
    this.keep(encodeRows(counts, bucket / 1000));
    if (this.pending.length === 0) return;
    const chunks = this.pending.splice(0);
    const rows = this.pendingRows;
    this.pendingRows = 0;
    try {
      await this.options.bus.publish(chunks);
    } catch (err) {
      this.keep(chunks);
      this.options.log.warn({ err: (err as Error).message, rows, pendingRows: this.pendingRows }, 'ingest counts not written: kept for the next flush');
    }
  }

  /** Keeps chunks for the next flush, oldest first; drops the oldest past maxPendingRows. */
  private keep(chunks: readonly TableChunk[]): void {
    this.pending.push(...chunks);
    for (const chunk of chunks) this.pendingRows += chunk.rows;
    let dropped = 0;
    while (this.pendingRows > this.maxPendingRows && this.pending.length > 0) {
      const oldest = this.pending.shift()!;
      this.pendingRows -= oldest.rows;
      dropped += oldest.rows;
    }
    if (dropped > 0) {
      this.options.onDropped?.(dropped);
      this.options.log.error({ rows: dropped, maxPendingRows: this.maxPendingRows }, 'ingest counts dropped: the bus refused them for too long');
    }
  }
}

/** Rows per chunk are cut at this size: a cluster's bus messages hold at most about 1 MiB. */
const MAX_CHUNK_BYTES = 256 * 1024;

/** The rows of one bucket (`seconds`: its start), one per source, signal, outcome and reason counted. */
function encodeRows(counts: ReadonlyMap<string, Float64Array>, seconds: number): TableChunk[] {
  if (counts.size === 0) return [];
  const out = new TranscodeOutput(MAX_CHUNK_BYTES);
  const rows = out.table('ingest_counts');
  const w = rows.writer;
  const day = Math.floor(seconds / 86_400);
  for (const [sourceId, counters] of counts) {
    for (let signal = 0; signal < SIGNALS.length; signal++) {
      for (let outcome = 0; outcome < OUTCOMES; outcome++) {
        const slot = (signal * OUTCOMES + outcome) * 2;
        const requests = counters[slot]!;
        const items = counters[slot + 1]!;
        if (requests === 0 && items === 0) continue;
        rows.rowDay(day);
        w.string(sourceId);
        w.u32(seconds);
        w.ascii(SIGNALS[signal]!);
        w.ascii(outcome === 0 ? 'accepted' : 'refused');
        w.ascii(outcome === 0 ? '' : REASONS[outcome - 1]!);
        writeU64(w, requests);
        writeU64(w, items);
        rows.endRow();
      }
    }
  }
  return out.finish().tables;
}

/** A UInt64 from a safe integer (counts stay far below 2^53). */
function writeU64(w: RowBinaryWriter, value: number): void {
  w.u64(value % 2 ** 32, Math.floor(value / 2 ** 32));
}
