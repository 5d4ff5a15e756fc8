/**
 * RecordLog: the embedded default's write-ahead log, one mechanism for the bus's rows
 * (LocalLogBus) and the delivery queue's jobs (delivery/local-queue.ts). A record is durable once
 * its append resolves: appends that arrive while a write runs share the next write and its
 * fdatasync (group commit). The reader moves an applied position on; segments wholly behind it
 * are deleted.
 *
 * On disk (0700): segment files named by the log position (LSN, a byte offset that only grows)
 * of their first record, `<16 hex digits>.seg`, and `checkpoint.json` (the applied position and
 * what its owner keeps beside it). A record is
 *
 *   u32 payload length | u32 CRC-32 of the payload | payload (the codec's bytes)
 *
 * (little endian). A record is written whole or, after a crash, cut short: opening the log keeps
 * the longest prefix of whole records whose CRC matches and truncates the rest, which was never
 * acknowledged (its append had not resolved).
 */
import { mkdir, open, readdir, readFile, rename, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

/** How the log's owner turns its values into payload bytes and back. */
export interface RecordCodec<T> {
  /** The payload as write buffers (not copied: the log writes them as they are). */
  encode(value: T): Uint8Array[];
  /** The value of a payload; it may keep views of `payload` (see RecordLog.read). */
  decode(payload: Buffer): T;
}

const HEADER_BYTES = 8;
/** What a record takes in the log beside its payload: its length and checksum. */
export const RECORD_FRAME_BYTES = HEADER_BYTES;
const MiB = 1024 * 1024;
const SEGMENT = /^([0-9a-f]{16})\.seg$/;
/** A record longer than this is not one we wrote: the log is cut there. */
const MAX_RECORD_BYTES = 1024 * 1024 * 1024;

export interface LogRecord<T> {
  /** Position of the record's first byte. */
  lsn: number;
  /** Position just past the record. */
  end: number;
  value: T;
}

export interface Checkpoint {
  /** Every record before this position is done with (in storage, or no longer needed). */
  applied: number;
  /** The bus's batch being inserted: replayed exactly (same records, same dedup tokens) after a crash. */
  inFlight?: { from: number; to: number };
}

export interface RecordLogOptions {
  /** A segment is closed once it holds this many bytes (records never span segments). */
  segmentBytes: number;
  /** Said when the log opened: what was cut from a segment's end and why. */
  onRepair?: (detail: { segment: string; keptBytes: number; cutBytes: number; reason: string }) => void;
}

interface Segment {
  start: number;
  /** Bytes of whole records in the file. */
  size: number;
  name: string;
}

interface Append {
  iov: Uint8Array[];
  bytes: number;
  /** Called with the record's position once it is on disk. */
  resolve: (lsn: number) => void;
  reject: (err: unknown) => void;
  /** Set once the writer took it: it can no longer be withdrawn. */
  taken: boolean;
}

export class RecordLog<T> {
  private readonly segments: Segment[] = [];
  private active: FileHandle | undefined;
  private queue: Append[] = [];
  private writing: Promise<void> | undefined;
  private checkpointed: Checkpoint = { applied: 0 };
  private readBuffer = Buffer.alloc(0);

  constructor(private readonly dir: string, private readonly codec: RecordCodec<T>, private readonly options: RecordLogOptions) {}

  /** Position just past the last durable record. */
  get end(): number {
    const last = this.segments.at(-1);
    return last ? last.start + last.size : 0;
  }

  /** Where replay starts: the checkpoint read at open, as later written. */
  get checkpoint(): Checkpoint {
    return this.checkpointed;
  }

  /** Opens the log: reads the checkpoint, cuts torn records off the segments' ends, opens the last segment for appending. */
  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    this.checkpointed = await this.readCheckpoint();
    const names = (await readdir(this.dir)).filter((name) => SEGMENT.test(name)).sort();
    for (const name of names) {
      const start = parseInt(SEGMENT.exec(name)![1]!, 16);
      this.segments.push({ start, name, size: await this.repair(name, start) });
    }
    // Segments already applied are deleted lazily; drop the ones a crash left behind.
    await this.release(this.checkpointed.applied);
    if (this.segments.length === 0) await this.roll(Math.max(this.checkpointed.applied, 0));
    else this.active = await open(join(this.dir, this.segments.at(-1)!.name), 'r+');
  }

  async close(): Promise<void> {
    while (this.writing) await this.writing;
    await this.active?.close();
    this.active = undefined;
  }

  /**
   * Appends one record holding the value; `done` resolves with its position once it is on disk.
   * `withdraw` takes it back if the writer has not taken it yet, and says whether it did.
   */
  append(value: T): { done: Promise<number>; withdraw: () => boolean; bytes: number } {
    const iov = frame(this.codec.encode(value));
    let entry!: Append;
    const done = new Promise<number>((resolve, reject) => {
      entry = { iov, bytes: iov.reduce((sum, part) => sum + part.byteLength, 0), resolve, reject, taken: false };
    });
    this.queue.push(entry);
    this.kick();
    const withdraw = () => {
      if (entry.taken) return false;
      this.queue.splice(this.queue.indexOf(entry), 1);
      return true;
    };
    return { done, withdraw, bytes: entry.bytes };
  }

  /**
   * append(), given up after `timeoutMs` if the writer has not taken the record by then (a stuck
   * disk): it is then never written and this rejects with LogTimeout. Once taken, its outcome stands.
   */
  async appendWithin(value: T, timeoutMs: number): Promise<number> {
    const { done, withdraw } = this.append(value);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        if (withdraw()) reject(new LogTimeout(timeoutMs));
      }, timeoutMs);
    });
    try {
      return await Promise.race([done, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The records from `from` on, up to about maxBytes (at least one record) and never past
   * `until`. They are views of a buffer reused by the next read: done with them before then.
   */
  async read(from: number, maxBytes: number, until = this.end): Promise<{ records: Array<LogRecord<T>>; next: number }> {
    const records: Array<LogRecord<T>> = [];
    let position = from;
    let used = 0;
    while (position < until) {
      const segment = this.segmentAt(position);
      if (!segment) break;
      const segmentEnd = segment.start + segment.size;
      if (position >= segmentEnd) {
        const following = this.segments[this.segments.indexOf(segment) + 1];
        if (!following) break;
        position = following.start; // the rest of that segment was cut at open
        continue;
      }
      const room = maxBytes - (position - from);
      if (room <= 0 && records.length > 0) break;
      let view = await this.readInto(segment, position, Math.min(Math.min(segmentEnd, until) - position, Math.max(room, HEADER_BYTES)), used);
      let parsed = this.parseRecords(view, position);
      if (parsed.length === 0) {
        // One record longer than the room left: it is read whole on its own.
        view = await this.readInto(segment, position, HEADER_BYTES + view.readUInt32LE(0), used);
        parsed = this.parseRecords(view, position);
        if (parsed.length === 0) throw new Error(`log segment ${segment.name} ends inside a record`);
      }
      records.push(...parsed);
      used += parsed.at(-1)!.end - position;
      position = parsed.at(-1)!.end;
    }
    return { records, next: position };
  }

  /** Writes the checkpoint durably (write, fsync, rename, fsync the directory). */
  async writeCheckpoint(checkpoint: Checkpoint): Promise<void> {
    const file = join(this.dir, 'checkpoint.json');
    const handle = await open(`${file}.tmp`, 'w', 0o600);
    try {
      await handle.writeFile(JSON.stringify(checkpoint));
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await rename(`${file}.tmp`, file);
    await this.syncDirectory();
    this.checkpointed = checkpoint;
  }

  /** Whether release(applied) would delete a segment. */
  releasable(applied: number): boolean {
    return this.segments.length > 1 && this.segments[1]!.start <= applied;
  }

  /** Deletes the segments wholly before `applied` (never the one being appended to). */
  async release(applied: number): Promise<void> {
    while (this.segments.length > 1 && this.segments[1]!.start <= applied) {
      const segment = this.segments.shift()!;
      await rm(join(this.dir, segment.name), { force: true });
    }
  }

  /** The whole records at the start of `bytes` (a read may end inside one: it is left for the next read). */
  private parseRecords(bytes: Buffer, position: number): Array<LogRecord<T>> {
    const records: Array<LogRecord<T>> = [];
    let offset = 0;
    while (offset + HEADER_BYTES <= bytes.length) {
      const [length] = recordLength(bytes, offset);
      if (offset + HEADER_BYTES + length > bytes.length) break;
      const payload = bytes.subarray(offset + HEADER_BYTES, offset + HEADER_BYTES + length);
      records.push({ lsn: position + offset, end: position + offset + HEADER_BYTES + length, value: this.codec.decode(payload) });
      offset += HEADER_BYTES + length;
    }
    return records;
  }

  private segmentAt(position: number): Segment | undefined {
    let found: Segment | undefined;
    for (const segment of this.segments) {
      if (segment.start <= position) found = segment;
      else break;
    }
    return found;
  }

  /** Reads `length` bytes at `position` into the read buffer at `at` (a new buffer when it is too small: views of the old one stay valid). */
  private async readInto(segment: Segment, position: number, length: number, at: number): Promise<Buffer> {
    // Grown to what this read needs (rounded to a MiB), not doubled: its size is the batch's, which bounds memory.
    if (this.readBuffer.length < at + length) this.readBuffer = Buffer.allocUnsafe(Math.ceil((at + length) / MiB) * MiB);
    const handle = await open(join(this.dir, segment.name), 'r');
    try {
      let read = 0;
      while (read < length) {
        const { bytesRead } = await handle.read(this.readBuffer, at + read, length - read, position - segment.start + read);
        if (bytesRead === 0) break;
        read += bytesRead;
      }
      return this.readBuffer.subarray(at, at + read);
    } finally {
      await handle.close();
    }
  }

  private kick(): void {
    if (this.writing || this.queue.length === 0) return;
    this.writing = this.writeQueued().finally(() => {
      this.writing = undefined;
      this.kick();
    });
  }

  /** One write and one fdatasync for everything queued (group commit). */
  private async writeQueued(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    for (const entry of batch) entry.taken = true;
    try {
      const bytes = batch.reduce((sum, entry) => sum + entry.bytes, 0);
      let segment = this.segments.at(-1)!;
      if (segment.size > 0 && segment.size + bytes > this.options.segmentBytes) segment = await this.roll(segment.start + segment.size);
      // A failed write leaves size where it was: what reached the file is overwritten by the next write, or cut at open.
      await writeAll(this.active!, batch.flatMap((entry) => entry.iov), segment.size);
      await this.active!.datasync();
      let lsn = segment.start + segment.size;
      segment.size += bytes;
      for (const entry of batch) {
        entry.resolve(lsn);
        lsn += entry.bytes;
      }
    } catch (err) {
      for (const entry of batch) entry.reject(err);
    }
  }

  /** Starts a new segment at `start`; its directory entry is made durable before anything is acknowledged in it. */
  private async roll(start: number): Promise<Segment> {
    const segment = { start, size: 0, name: `${start.toString(16).padStart(16, '0')}.seg` };
    const handle = await open(join(this.dir, segment.name), 'w+', 0o600);
    await this.syncDirectory();
    await this.active?.close();
    this.active = handle;
    this.segments.push(segment);
    return segment;
  }

  private async syncDirectory(): Promise<void> {
    const handle = await open(this.dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  private async readCheckpoint(): Promise<Checkpoint> {
    const text = await readFile(join(this.dir, 'checkpoint.json'), 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    if (text === undefined) return { applied: 0 };
    const parsed = JSON.parse(text) as Checkpoint;
    if (!Number.isSafeInteger(parsed.applied)) throw new Error(`${this.dir}/checkpoint.json is not a log checkpoint`);
    return parsed;
  }

  /** The bytes of whole, intact records at the start of the segment; anything after is cut off the file. */
  private async repair(name: string, start: number): Promise<number> {
    const file = join(this.dir, name);
    const handle = await open(file, 'r+');
    try {
      const { size } = await handle.stat();
      // Records before the applied position were read back already: no need to check them again.
      let offset = Math.max(0, Math.min(this.checkpointed.applied - start, size));
      const header = Buffer.alloc(HEADER_BYTES);
      let reason = '';
      while (offset < size) {
        if (size - offset < HEADER_BYTES) {
          reason = 'a record header cut short';
          break;
        }
        await handle.read(header, 0, HEADER_BYTES, offset);
        const [length, crc] = recordLength(header, 0);
        if (length > MAX_RECORD_BYTES || offset + HEADER_BYTES + length > size) {
          reason = 'a record cut short';
          break;
        }
        const payload = Buffer.allocUnsafe(length);
        await handle.read(payload, 0, length, offset + HEADER_BYTES);
        if (crc32(payload) !== crc) {
          reason = 'a record whose checksum does not match';
          break;
        }
        offset += HEADER_BYTES + length;
      }
      if (offset < size) {
        this.options.onRepair?.({ segment: name, keptBytes: offset, cutBytes: size - offset, reason });
        await handle.truncate(offset);
        await handle.datasync();
      }
      return offset;
    } finally {
      await handle.close();
    }
  }
}

/** An append the disk did not take within its time: it was withdrawn and is never written. */
export class LogTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`the disk did not take the record within ${timeoutMs} ms`);
  }
}

/** The payload's parts behind the record header (length and CRC): the parts are not copied. */
function frame(payload: Uint8Array[]): Uint8Array[] {
  const head = Buffer.allocUnsafe(HEADER_BYTES);
  let length = 0;
  let crc = 0;
  for (const part of payload) {
    crc = crc32(part, crc);
    length += part.byteLength;
  }
  head.writeUInt32LE(length, 0);
  head.writeUInt32LE(crc, 4);
  return [head, ...payload];
}

function recordLength(buffer: Buffer, offset: number): [length: number, crc: number] {
  return [buffer.readUInt32LE(offset), buffer.readUInt32LE(offset + 4)];
}

/** writev until every byte is written (a write may be short). */
async function writeAll(handle: FileHandle, iov: Uint8Array[], position: number): Promise<void> {
  let parts = iov;
  let at = position;
  while (parts.length > 0) {
    const { bytesWritten } = await handle.writev(parts, at);
    at += bytesWritten;
    let skip = bytesWritten;
    let index = 0;
    while (index < parts.length && skip >= parts[index]!.byteLength) skip -= parts[index++]!.byteLength;
    parts = parts.slice(index);
    if (skip > 0) parts[0] = parts[0]!.subarray(skip);
  }
}
