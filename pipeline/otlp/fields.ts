/**
 * Small helpers shared by the signal transcoders: finding one field in a message that is
 * not on the hot path (an event's name, a link's id), and the column encodings several
 * tables use (ids, DateTime64 timestamps).
 */
import type { RowBinaryWriter } from '../../storage/rowbinary.ts';
import type { WireReader } from './wire.ts';

/** The range of the last length-delimited field with `tag` in [start, end) ([start, start] if none). */
export function findBytes(r: WireReader, start: number, end: number, tag: number): [number, number] {
  let found: [number, number] = [start, start];
  r.pos = start;
  while (r.pos < end) {
    const t = r.tag(end);
    if (t !== tag) {
      r.skip(t, end);
      continue;
    }
    const fieldEnd = r.len(end);
    found = [r.pos, fieldEnd];
    r.pos = fieldEnd;
  }
  r.expectEnd(end);
  return found;
}

/** The position of the last fixed64 field with `tag` in [start, end), or -1. */
export function findFixed64(r: WireReader, start: number, end: number, tag: number): number {
  let at = -1;
  r.pos = start;
  while (r.pos < end) {
    const t = r.tag(end);
    if (t === tag) at = r.fixed64(end);
    else r.skip(t, end);
  }
  r.expectEnd(end);
  return at;
}

/** A String column from the last string field with `tag` in [start, end) ("" if none). */
export function writeStringField(r: WireReader, w: RowBinaryWriter, start: number, end: number, tag: number): void {
  const [fieldStart, fieldEnd] = findBytes(r, start, end, tag);
  w.utf8(r.buf, fieldStart, fieldEnd);
}

/**
 * A trace or span id as the exporter writes it (traceutil.*IDToHexOrEmptyString): lowercase
 * hex, or "" when the id is empty or all zero.
 */
export function writeId(r: WireReader, w: RowBinaryWriter, start: number, end: number): void {
  if (r.isZero(start, end - start)) w.emptyString();
  else w.hex(r.buf, start, end);
}

/** The day (since 1970-01-01) of the last instant a DateTime64(9) holds: 2262-04-11T23:47:16.854775807Z. */
const MAX_DATETIME64_DAY = 106_751;

/**
 * A DateTime64(9) from the fixed64 (uint64) nanoseconds at `at` (-1: absent, 0), copied as is;
 * a value past the column's Int64 range is stored as its last instant,
 * 2262-04-11T23:47:16.854775807Z, rather than wrapped into 1969. Returns its day (since
 * 1970-01-01, UTC), for the row's partition.
 */
export function writeTimestamp(r: WireReader, w: RowBinaryWriter, at: number): number {
  if (at < 0) {
    w.u64(0, 0);
    return 0;
  }
  const hi = r.uint32At(at + 4);
  if (hi >= 0x80000000) {
    w.u64(0xffffffff, 0x7fffffff);
    return MAX_DATETIME64_DAY;
  }
  w.raw(r.buf, at, at + 8);
  return unixDay(r.uint32At(at), hi);
}

/**
 * floor(nanoseconds / 86400e9) for a uint64 below 2^63 given as halves, exactly: 86400e9 is
 * 2^16 * 1318359375, and ns >> 16 fits a double's 53 bits. (No seconds on the way: a number past
 * 2^30 would be allocated per row.)
 */
export function unixDay(lo: number, hi: number): number {
  return Math.floor((hi * 65536 + (lo >>> 16)) / 1318359375);
}

/** floor(nanoseconds / 1e9) for a uint64 given as halves, exactly. */
export function unixSeconds(lo: number, hi: number): number {
  if (hi >= 0x40000000) return Number(((BigInt(hi) << 32n) | BigInt(lo)) / 1_000_000_000n);
  // 1e9 = 2^9 * 1953125. Below 2^62 ns, ns >> 9 fits a double's 53 bits exactly; the
  // quotient's possible rounding is then corrected by one step either way.
  const shifted = hi * 8388608 + (lo >>> 9);
  let seconds = Math.floor(shifted / 1953125);
  if (seconds * 1953125 > shifted) seconds--;
  else if ((seconds + 1) * 1953125 <= shifted) seconds++;
  return seconds;
}
