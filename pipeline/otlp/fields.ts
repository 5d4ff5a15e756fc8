/**
 * Small helpers shared by the signal transcoders: finding one field in a message that is
 * not on the hot path (an event's name, a link's id), and the column encodings several
 * tables use (ids, DateTime64 timestamps).
 */
import type { RowBinaryWriter } from './rowbinary.ts';
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

/** A DateTime64(9) from a fixed64 at `at` (-1: absent, 0): the nanoseconds copied as is. */
export function writeTimestamp(r: WireReader, w: RowBinaryWriter, at: number): void {
  if (at < 0) w.u64(0, 0);
  else w.raw(r.buf, at, at + 8);
}
