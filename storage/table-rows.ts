/**
 * What a transcode produces: RowBinary rows per table, and the accepted and rejected item
 * counts with the reason for the first refusal (for OTLP partial_success).
 *
 * The row writers are pooled per thread and reused from one request to the next, so their
 * buffers grow once to the working size instead of being reallocated per request. Each
 * table's rows leave in a buffer of their own (transferred to the main thread whole): a
 * spare one if this thread has one that fits (buffers of earlier rows that the main thread
 * sent back once the bus was done with them, see pool.ts), else a new right-sized one.
 */
import { badRequest, type SluiceError } from '../core/errors.ts';
import { MAX_REQUEST_PARTITIONS, PARTITIONS, TABLE_COLUMNS, type Partitioning, type TableName } from './schema.ts';
import { RowBinaryWriter } from './rowbinary.ts';

/** RowBinary rows for one table, in the column order of TABLE_COLUMNS[table]. */
export interface TableRows {
  table: TableName;
  columns: readonly string[];
  rows: number;
  /**
   * Starts its ArrayBuffer, which holds nothing else, so it can be transferred between
   * threads; the buffer may be a little longer (a spare, see spareFor).
   */
  data: Uint8Array;
}

export interface TranscodeResult {
  tables: TableRows[];
  /** Spans, log records or metric data points stored. */
  accepted: number;
  /** Items refused one by one (the rest of the request is stored). */
  rejected: number;
  rejectMessage?: string;
}

/** A pooled writer that grew past this is dropped after use rather than kept. */
const KEEP_WRITER_BYTES = 16 * 1024 * 1024;
const idleWriters: RowBinaryWriter[] = [];

function borrowWriter(): RowBinaryWriter {
  const writer = idleWriters.pop() ?? new RowBinaryWriter(256 * 1024);
  writer.reset();
  return writer;
}

function releaseWriter(writer: RowBinaryWriter): void {
  if (writer.buf.length <= KEEP_WRITER_BYTES) idleWriters.push(writer);
}

/** At most this many spare buffers, of at most SPARE_BYTES in all, wait in a thread. */
const MAX_SPARES = 8;
const SPARE_BYTES = 16 * 1024 * 1024;
const spares: ArrayBuffer[] = [];
let spareBytes = 0;

/**
 * Takes buffers of earlier rows back for reuse (in a worker thread: what the main thread
 * returned). The oldest make room for the newest, so the spares follow the sizes of the
 * current requests.
 */
export function offerSpares(buffers: readonly ArrayBuffer[]): void {
  for (const buffer of buffers) {
    if (buffer.byteLength > SPARE_BYTES) continue;
    while (spares.length >= MAX_SPARES || spareBytes + buffer.byteLength > SPARE_BYTES) spareBytes -= spares.shift()!.byteLength;
    spares.push(buffer);
    spareBytes += buffer.byteLength;
  }
}

/**
 * The smallest spare that holds `bytes` without wasting more than a quarter (the row bytes
 * are what the byte budget counts), taken out of the pool; undefined if none fits.
 */
function spareFor(bytes: number): ArrayBuffer | undefined {
  let best = -1;
  for (let i = 0; i < spares.length; i++) {
    const size = spares[i]!.byteLength;
    if (size >= bytes && size <= bytes + (bytes >> 2) && (best < 0 || size < spares[best]!.byteLength)) best = i;
  }
  if (best < 0) return undefined;
  const [spare] = spares.splice(best, 1);
  spareBytes -= spare!.byteLength;
  return spare;
}

/** The writer's bytes in a buffer of their own: a spare that fits, else a new one. */
function rowsOf(writer: RowBinaryWriter): Uint8Array {
  const spare = spareFor(writer.pos);
  if (!spare) return writer.finish();
  const data = new Uint8Array(spare, 0, writer.pos);
  data.set(writer.buf.subarray(0, writer.pos));
  return data;
}

/**
 * Rows written elsewhere (the WebAssembly transcoder's memory, pipeline/wasm) copied into a
 * buffer of their own, as rowsOf() does: a spare that fits, else a new one.
 */
export function ownRows(bytes: Uint8Array): Uint8Array {
  const spare = spareFor(bytes.length);
  const data = spare ? new Uint8Array(spare, 0, bytes.length) : Buffer.allocUnsafeSlow(bytes.length);
  data.set(bytes);
  return data;
}

/** The refusal of a request whose rows for `table` fall into `count` partitions, more than MAX_REQUEST_PARTITIONS. */
export function tooManyPartitions(table: TableName, count: number): SluiceError {
  const { column, by } = PARTITIONS[table]!;
  return badRequest(
    `rows span ${count} ${by}s; one request may span at most ${MAX_REQUEST_PARTITIONS} ${by}s per table ` +
      `(the storage partitions ${table} by the ${by} of ${column}, UTC): send them in several requests`,
  );
}

/** One table's rows under construction. */
export class TableOutput {
  readonly writer = borrowWriter();
  /** Rows written so far, sealed chunks included. */
  rows = 0;
  /** Chunks already cut off at maxChunkBytes (see endRow). */
  readonly sealed: Array<{ rows: number; data: Uint8Array }> = [];
  private sealedRows = 0;
  private readonly partitioning: Partitioning | undefined;
  /** The partition of the row being written, and of the last row ended (most rows share it). */
  private rowPartition: number | undefined;
  private lastPartition: number | undefined;
  /** Every partition of the rows ended, made once a second one appears. */
  private partitions: Set<number> | undefined;

  constructor(readonly table: TableName, private readonly maxChunkBytes: number) {
    this.partitioning = PARTITIONS[table];
  }

  /**
   * The day (since 1970-01-01, UTC) of the row being written in the table's partition column
   * (storage/schema.ts PARTITIONS): its partition counts once the row ends. (A day, not seconds:
   * a number that small needs no allocation per row.)
   */
  rowDay(day: number): void {
    if (this.partitioning) this.rowPartition = this.partitioning.by === 'day' ? day : monthOf(day);
  }

  /**
   * Counts a completed row. Once the rows pass maxChunkBytes they are sealed into a chunk of
   * their own, so each chunk fits in one bus message and can be inserted on its own (a chunk is
   * cut only between rows). The writer object stays the same, so callers may keep a reference.
   */
  endRow(): void {
    this.rows++;
    if (this.rowPartition !== this.lastPartition) {
      if (this.lastPartition !== undefined) (this.partitions ??= new Set([this.lastPartition])).add(this.rowPartition!);
      this.lastPartition = this.rowPartition;
    }
    if (this.writer.pos >= this.maxChunkBytes) this.seal();
  }

  /** Refuses the request if its rows fall into more partitions than MAX_REQUEST_PARTITIONS. */
  checkPartitions(): void {
    const count = this.partitions?.size ?? 1;
    if (count > MAX_REQUEST_PARTITIONS) throw tooManyPartitions(this.table, count);
  }

  private seal(): void {
    this.sealed.push({ rows: this.rows - this.sealedRows, data: rowsOf(this.writer) });
    this.sealedRows = this.rows;
    this.writer.truncate(0);
  }

  /** Every chunk of this table, the open one sealed too. */
  chunks(): Array<{ rows: number; data: Uint8Array }> {
    if (this.rows > this.sealedRows) this.seal();
    return this.sealed;
  }
}

export class TranscodeOutput {
  private readonly outputs = new Map<TableName, TableOutput>();
  /** Writers for bytes that are not rows (the envelope's row prefix), pooled too. */
  private readonly scratch: RowBinaryWriter[] = [];

  /** @param maxChunkBytes cut each table's rows into chunks of about this size (default: one chunk). */
  constructor(private readonly maxChunkBytes = Infinity) {}

  accepted = 0;
  private rejected = 0;
  private firstRejection: string | undefined;

  /** The rows of `table`, created on first use. */
  table(table: TableName): TableOutput {
    let output = this.outputs.get(table);
    if (!output) this.outputs.set(table, (output = new TableOutput(table, this.maxChunkBytes)));
    return output;
  }

  /** A pooled writer for bytes copied into rows, returned with the tables' writers. */
  scratchWriter(): RowBinaryWriter {
    const writer = borrowWriter();
    this.scratch.push(writer);
    return writer;
  }

  /** Counts one refused item; `reason` says which and why. */
  reject(reason: string): void {
    this.rejected++;
    this.firstRejection ??= reason;
  }

  /**
   * Seals the tables (empty ones are left out) and returns the writers to the pool. Throws
   * badRequest (the writers returned) if a table's rows span too many partitions.
   */
  finish(): TranscodeResult {
    try {
      for (const output of this.outputs.values()) output.checkPartitions();
    } catch (err) {
      this.discard();
      throw err;
    }
    const tables: TableRows[] = [];
    for (const output of this.outputs.values()) {
      for (const chunk of output.chunks()) {
        tables.push({ table: output.table, columns: TABLE_COLUMNS[output.table], rows: chunk.rows, data: chunk.data });
      }
      releaseWriter(output.writer);
    }
    this.outputs.clear();
    this.releaseScratch();
    const result: TranscodeResult = { tables, accepted: this.accepted, rejected: this.rejected };
    if (this.firstRejection !== undefined) {
      result.rejectMessage = this.rejected === 1 ? this.firstRejection : `${this.firstRejection} (and ${this.rejected - 1} more)`;
    }
    return result;
  }

  /** Returns the writers to the pool without producing rows (the request was refused). */
  discard(): void {
    for (const output of this.outputs.values()) releaseWriter(output.writer);
    this.outputs.clear();
    this.releaseScratch();
  }

  private releaseScratch(): void {
    for (const writer of this.scratch) releaseWriter(writer);
    this.scratch.length = 0;
  }
}

/** Months since 1970-01 of a day since 1970-01-01 (UTC). */
function monthOf(day: number): number {
  const date = new Date(day * 86_400_000);
  return (date.getUTCFullYear() - 1970) * 12 + date.getUTCMonth();
}
