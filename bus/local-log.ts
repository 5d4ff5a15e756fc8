/**
 * LocalLogBus: the embedded default's bus. A publish appends the request's rows to the local
 * write-ahead log (record-log.ts, records of row-codec.ts) and resolves once they are on disk: that is what a 2xx promises,
 * and it takes a group-committed fdatasync (a millisecond or two), not a storage insert.
 *
 * Storage is fed in the background: the applier reads what the log holds in large batches
 * (every flushIntervalMs, or sooner when flushBytes are waiting or a reader waits) and inserts
 * each table's rows in one statement, so the engine makes few parts and merges little. After a
 * crash or a restart it starts again from the checkpoint; the batch that was being inserted is
 * replayed exactly, with the same insert_deduplication_tokens, so nothing is stored twice.
 *
 * Failures: a storage outage is retried with backoff while the log absorbs new rows; past
 * maxPendingBytes of rows not yet inserted, publishes are refused with 503 + Retry-After. Rows
 * storage refuses (a data error) are isolated like the cluster consumer's (bus/isolate.ts): the
 * offending request's record goes to <log>/dead-letters as JSON with the reason, and is logged
 * and counted; every other request of the batch is stored.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SluiceError } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import type { ConsumerTotals } from '../core/metrics.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import { isDataError } from '../storage/errors.ts';
import { chunkBytes, type Bus, type BusFigures, type ChunkSink, type TableChunk } from './bus.ts';
import { storeIsolating } from './isolate.ts';
import { LogTimeout, RecordLog, type LogRecord } from './record-log.ts';
import { ROW_CODEC } from './row-codec.ts';

type RowRecord = LogRecord<readonly TableChunk[]>;

export interface LocalLogBusOptions {
  /** The log's directory (<dataDir>/log). */
  dir: string;
  /** Bytes of rows in the log not yet in storage; past it publishes are refused with 503. */
  maxPendingBytes: number;
  /** Upper bound of one batch read back and inserted. */
  maxBatchBytes: number;
  /** Rows wait at most this long in the log before they are inserted. */
  flushIntervalMs: number;
  /** ...or until this many bytes are waiting. */
  flushBytes: number;
  /** How long a publish may wait for its write (a slow disk) before it is withdrawn with 503. */
  timeoutMs: number;
  retryAfterSeconds: number;
  segmentBytes?: number;
  log?: Logger;
  /**
   * The process's memory budget (core/memory-guard.ts): an insert waits while it has no room, so
   * chDB can give memory back (rows wait in the log meanwhile, which refuses when full), but no
   * longer than MEMORY_WAIT_MS: memory that is not coming back (an allocator keeping what was
   * freed) must not hold acknowledged rows out of storage for good.
   */
  memory?: { hasRoom(): boolean } | undefined;
}

/** How often an insert held for memory looks again, and how long it waits at most. */
const MEMORY_RECHECK_MS = 50;
const MEMORY_WAIT_MS = 2_000;

const LOG_FULL = 'storage is behind: the local log is full';

/** Backoff of the applier while storage is unavailable. */
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 5_000;

export class LocalLogBus implements Bus {
  private readonly rowLog: RecordLog<readonly TableChunk[]>;
  private sink: ChunkSink | undefined;
  private applying: Promise<void> | undefined;
  private closed = false;
  /** Position up to which everything is in storage (or dead-lettered). */
  private applied = 0;
  /** When the oldest record not yet applied was appended (0: none waiting). */
  private waitingSince = 0;
  private wake: (() => void) | undefined;
  private readonly waiters: Array<{ position: number; resolve: () => void }> = [];
  /** Publishes waiting for the disk, in bytes (they count against maxPendingBytes too). */
  private appendingBytes = 0;
  private lastFailure: { at: number; message: string } | undefined;
  /**
   * Set when a publish found no room, cleared when the applier frees some: meanwhile requests
   * are refused before they are decoded (refusal()). Room comes back a whole batch at a time,
   * and until then every request decoded was refused after the work: in the bench at saturation
   * about as many requests were decoded and refused as were stored.
   */
  private full = false;
  /** Once closed, when the applier stops even with rows left (epoch ms). */
  private stopBy = Infinity;
  readonly totals: ConsumerTotals = { batches: 0, rows: 0, deadLettered: 0, failures: 0 };

  constructor(private readonly options: LocalLogBusOptions) {
    this.rowLog = new RecordLog(options.dir, ROW_CODEC, {
      segmentBytes: options.segmentBytes ?? 64 * 1024 * 1024,
      onRepair: (detail) => options.log?.warn(detail, 'local log: cut a record a crash left unfinished (it was never acknowledged)'),
    });
  }

  async start(): Promise<void> {
    await this.rowLog.open();
    this.applied = this.rowLog.checkpoint.applied;
    if (this.pendingBytes > 0) {
      this.waitingSince = Date.now();
      this.options.log?.info({ bytes: this.pendingBytes }, 'local log: rows acknowledged before the last stop are being inserted');
    }
  }

  /**
   * Stops taking rows and inserts what the log holds until `deadline` (epoch ms) if storage
   * takes it; what is left waits in the log for the next start (a batch being inserted at the
   * deadline is finished first).
   */
  async shutdown(deadline = Infinity): Promise<void> {
    this.stopBy = deadline;
    this.closed = true;
    this.wake?.();
    while (this.applying) await this.applying;
    await this.rowLog.close();
  }

  consume(sink: ChunkSink): void {
    this.sink = sink;
    this.applying = this.applyLoop(sink).finally(() => (this.applying = undefined));
  }

  /** Bytes of rows acknowledged (or being written) and not yet in storage. */
  get pendingBytes(): number {
    return this.rowLog.end - this.applied + this.appendingBytes;
  }

  statuses(): Record<string, ComponentStatus> {
    const figures = { backlogBytes: this.pendingBytes, limitBytes: this.options.maxPendingBytes, ...this.totals };
    if (this.closed) return { bus: { ok: false, detail: 'shutting down', figures } };
    if (this.pendingBytes >= this.options.maxPendingBytes * 0.9) return { bus: { ok: false, detail: 'storage is behind: the local log is nearly full', figures } };
    const failing = this.lastFailure && Date.now() - this.lastFailure.at < 10_000;
    if (failing && this.pendingBytes > 0) return { bus: { ok: false, detail: `storage inserts are failing (${this.lastFailure!.message}); rows wait in the local log`, figures } };
    return { bus: { ok: true, figures } };
  }

  async figures(): Promise<BusFigures> {
    return { backlogBytes: this.pendingBytes, backlogLimitBytes: this.options.maxPendingBytes, consumer: { totals: { ...this.totals }, lag: [] } };
  }

  /** The log is shared by every table: refused whatever the tables. */
  refusal(): SluiceError | undefined {
    if (this.closed) return this.unavailable('shutting down');
    if (this.full) return this.unavailable(LOG_FULL);
    return undefined;
  }

  async publish(chunks: readonly TableChunk[]): Promise<void> {
    if (chunks.length === 0) return;
    const bytes = chunkBytes(chunks);
    if (this.closed) throw this.unavailable('shutting down');
    if (this.pendingBytes + bytes > this.options.maxPendingBytes) {
      this.full = true;
      throw this.unavailable(LOG_FULL);
    }
    this.appendingBytes += bytes;
    try {
      await this.rowLog.appendWithin(chunks, this.options.timeoutMs);
    } catch (err) {
      // Withdrawn: nothing of it is written. A write that failed: its outcome stands (refused).
      throw err instanceof LogTimeout ? this.unavailable('the disk did not take the rows in time') : this.unavailable(`the local log could not be written: ${(err as Error).message}`, err);
    } finally {
      this.appendingBytes -= bytes;
    }
    if (this.waitingSince === 0) this.waitingSince = Date.now();
    if (this.rowLog.end - this.applied >= this.options.flushBytes) this.wake?.();
  }

  /**
   * Resolves once every row acknowledged before the call is in storage, or after timeoutMs
   * (reads go on with what storage has). Embedded reads use it, so a listing right after a 2xx
   * shows the request's rows.
   */
  settled(timeoutMs = this.options.timeoutMs): Promise<void> {
    const position = this.rowLog.end;
    if (this.applied >= position || !this.sink) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const waiter = { position, resolve };
      this.waiters.push(waiter);
      this.wake?.();
      setTimeout(() => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        resolve();
      }, timeoutMs).unref();
    });
  }

  private unavailable(message: string, cause?: unknown): SluiceError {
    return new SluiceError('unavailable', message, { cause, retryAfterSeconds: this.options.retryAfterSeconds });
  }

  private async applyLoop(sink: ChunkSink): Promise<void> {
    let retryMs = RETRY_MIN_MS;
    /** When the next insert began to wait for memory (0: it is not waiting). */
    let memoryWaitSince = 0;
    // A batch that was being inserted when the process stopped is replayed first, exactly.
    let replay = this.rowLog.checkpoint.inFlight;
    for (;;) {
      if (this.closed && Date.now() >= this.stopBy) return;
      const due = this.waiters.length > 0 || this.closed || (this.waitingSince > 0 && (Date.now() - this.waitingSince >= this.options.flushIntervalMs || this.rowLog.end - this.applied >= this.options.flushBytes));
      if (this.rowLog.end <= this.applied) {
        if (this.closed) return;
        await this.sleep(this.options.flushIntervalMs);
        continue;
      }
      if (!due && !replay) {
        await this.sleep(Math.max(1, this.waitingSince + this.options.flushIntervalMs - Date.now()));
        continue;
      }
      if (this.options.memory && !this.options.memory.hasRoom()) {
        memoryWaitSince ||= Date.now();
        if (Date.now() - memoryWaitSince < MEMORY_WAIT_MS) {
          await this.sleep(MEMORY_RECHECK_MS);
          continue;
        }
      }
      memoryWaitSince = 0;
      try {
        await this.applyBatch(sink, replay);
        replay = undefined;
        retryMs = RETRY_MIN_MS;
      } catch (err) {
        this.totals.failures++;
        this.lastFailure = { at: Date.now(), message: (err as Error).message };
        this.options.log?.warn({ err: (err as Error).message, pendingBytes: this.pendingBytes, retryInMs: retryMs }, 'local log: storage insert failed; the rows stay in the log and are retried');
        // Stopping while storage is down: the rows wait in the log for the next start.
        if (this.closed) return;
        replay = this.rowLog.checkpoint.inFlight;
        await this.sleep(retryMs);
        retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
      }
    }
  }

  /** Reads a batch, inserts it table by table, dead-letters what storage refuses, moves the checkpoint on. */
  private async applyBatch(sink: ChunkSink, replay?: { from: number; to: number }): Promise<void> {
    const from = this.applied;
    const { records, next } = replay
      ? await this.rowLog.read(replay.from, Infinity, replay.to)
      : await this.rowLog.read(from, this.options.maxBatchBytes);
    const to = replay?.to ?? next;
    // Write-ahead: after a crash this exact range is inserted again under the same tokens.
    if (!replay) await this.rowLog.writeCheckpoint({ applied: from, inFlight: { from, to } });
    for (const [index, group] of byTable(records).entries()) {
      // Tokens name the records inserted, so a replayed insert (same batch, same split) is dropped by the engine.
      const outcomes = await storeIsolating(
        group.records,
        (units) => sink(units.flatMap((record) => group.chunksOf.get(record)!), `log:${index}:${units[0]!.lsn}-${units.at(-1)!.end}`),
        isDataError,
        (err, requests) => this.options.log?.warn({ table: group.table, requests, reason: (err as Error).message }, 'storage refused the rows of a batch: splitting it to find the requests it refuses'),
      );
      const outage = outcomes.find((err) => err !== undefined && !isDataError(err));
      if (outage !== undefined) throw outage;
      for (const [unit, err] of outcomes.entries()) {
        const record = group.records[unit]!;
        if (err !== undefined) await this.deadLetter(record, group.chunksOf.get(record)!, err);
        else this.totals.rows += group.chunksOf.get(record)!.reduce((rows, chunk) => rows + chunk.rows, 0);
      }
    }
    this.totals.batches++;
    await this.rowLog.writeCheckpoint({ applied: to });
    this.applied = to;
    this.full = false;
    if (this.rowLog.end <= to) this.waitingSince = 0;
    else this.waitingSince = Date.now();
    await this.rowLog.release(to);
    for (const waiter of this.waiters.filter((w) => w.position <= to)) {
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  }

  /** Keeps the rows storage refused, with the reason, where an operator can look at them and re-send them. */
  private async deadLetter(record: RowRecord, chunks: TableChunk[], err: unknown): Promise<void> {
    const dir = join(this.options.dir, 'dead-letters');
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const file = join(dir, `${record.lsn.toString(16).padStart(16, '0')}-${chunks[0]!.table}.json`);
    const reason = (err as Error).message;
    const letter = {
      reason,
      at: new Date().toISOString(),
      chunks: chunks.map((chunk) => ({ table: chunk.table, columns: chunk.columns, rows: chunk.rows, format: 'RowBinary', data: Buffer.from(chunk.data).toString('base64') })),
    };
    await writeFile(file, JSON.stringify(letter), { mode: 0o600 });
    this.totals.deadLettered++;
    this.options.log?.error({ table: chunks[0]!.table, rows: chunks.reduce((sum, c) => sum + c.rows, 0), reason, file }, 'storage refused acknowledged rows: they were dead-lettered');
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }
}

interface TableGroup {
  table: string;
  records: RowRecord[];
  /** Each record's chunks of this group's table. */
  chunksOf: Map<RowRecord, TableChunk[]>;
}

/** The batch as one list of records per insert (table and column list), in log order. */
function byTable(records: readonly RowRecord[]): TableGroup[] {
  const groups = new Map<string, TableGroup>();
  for (const record of records) {
    for (const chunk of record.value) {
      const key = `${chunk.table}\n${chunk.columns.join(',')}`;
      let group = groups.get(key);
      if (!group) groups.set(key, (group = { table: chunk.table, records: [], chunksOf: new Map() }));
      const chunks = group.chunksOf.get(record);
      if (chunks) chunks.push(chunk);
      else {
        group.records.push(record);
        group.chunksOf.set(record, [chunk]);
      }
    }
  }
  return [...groups.values()];
}
