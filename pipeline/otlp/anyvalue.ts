/**
 * Attributes and AnyValues as the Collector ClickHouse exporter stores them: every value
 * becomes a string, as pdata's pcommon.Value.AsString() makes it.
 *   string   as is
 *   int      decimal (int64, exact)
 *   double   as Go's float64AsString (see go-format.ts)
 *   bool     true / false
 *   bytes    standard base64 with padding
 *   array, kvlist   JSON (see anyvalue-json.ts)
 *   empty    ""
 * String values are copied byte for byte from the request; only doubles, bytes and the
 * JSON cases make a JS string.
 */
import { anyValueJson } from './anyvalue-json.ts';
import {
  ANY_ARRAY, ANY_BOOL, ANY_BYTES, ANY_DOUBLE, ANY_INT, ANY_KVLIST, ANY_STRING,
  isAnyValueTag, KEY_VALUE_KEY, KEY_VALUE_VALUE,
} from './common-tags.ts';
import { writeGoFloat } from './go-format.ts';
import type { RowBinaryWriter } from '../../storage/rowbinary.ts';
import type { WireReader } from './wire.ts';

const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');
const TWO_32 = 4294967296;

/** Writes the AnyValue held in [start, end) as a String column. Leaves pos at end. */
export function writeAnyValue(r: WireReader, w: RowBinaryWriter, start: number, end: number): void {
  if (start === end) {
    w.emptyString();
    r.pos = end;
    return;
  }
  // Fast path: a lone string value with a one-byte length, the common attribute.
  const buf = r.buf;
  if (buf[start] === ANY_STRING && buf[start + 1]! < 0x80 && start + 2 + buf[start + 1]! === end) {
    w.utf8(buf, start + 2, end);
    r.pos = end;
    return;
  }
  // A oneof on the wire: the last value field wins.
  let tag = 0;
  let at = 0;
  r.pos = start;
  while (r.pos < end) {
    const t = r.tag(end);
    if (isAnyValueTag(t)) {
      tag = t;
      at = r.pos;
    }
    r.skip(t, end);
  }
  r.expectEnd(end);
  r.pos = at;
  writeValueField(r, w, tag, end);
  r.pos = end;
}

/** Writes one AnyValue field whose tag was read; pos is at its payload. */
function writeValueField(r: WireReader, w: RowBinaryWriter, tag: number, end: number): void {
  switch (tag) {
    case ANY_STRING: {
      const stringEnd = r.len(end);
      w.utf8(r.buf, r.pos, stringEnd);
      return;
    }
    case ANY_INT:
      r.varint64(end);
      if (r.hi < 0x200000) w.decimal(r.hi * TWO_32 + r.lo); // non-negative, below 2^53
      else w.ascii(r.int64Decimal());
      return;
    case ANY_BOOL:
      r.varint64(end);
      w.encoded(r.lo !== 0 || r.hi !== 0 ? TRUE : FALSE);
      return;
    case ANY_DOUBLE:
      writeGoFloat(w, r.double(end));
      return;
    case ANY_BYTES: {
      const bytesEnd = r.len(end);
      w.ascii(Buffer.from(r.buf.buffer, r.buf.byteOffset + r.pos, bytesEnd - r.pos).toString('base64'));
      return;
    }
    case ANY_ARRAY:
    case ANY_KVLIST: {
      const valueEnd = r.len(end);
      w.string(anyValueJson(r, tag === ANY_ARRAY, r.pos, valueEnd));
      return;
    }
    default:
      w.emptyString(); // no value set
  }
}

/**
 * Writes one KeyValue as a Map entry: the key, then the value as a string. A missing key or
 * value is an empty string. Leaves pos at end.
 */
export function writeKeyValue(r: WireReader, w: RowBinaryWriter, start: number, end: number): void {
  // Fast path: key then value, each with a one-byte length, as SDKs write them.
  const buf = r.buf;
  if (buf[start] === KEY_VALUE_KEY) {
    const keyEnd = start + 2 + buf[start + 1]!;
    if (buf[start + 1]! < 0x80 && keyEnd + 2 <= end && buf[keyEnd] === KEY_VALUE_VALUE && buf[keyEnd + 1]! < 0x80 && keyEnd + 2 + buf[keyEnd + 1]! === end) {
      w.utf8(buf, start + 2, keyEnd);
      writeAnyValue(r, w, keyEnd + 2, end);
      return;
    }
  }
  r.pos = start;
  let keyStart = start;
  let keyEnd = start;
  let valueStart = end;
  let valueEnd = end;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag === KEY_VALUE_KEY) {
      keyEnd = r.len(end);
      keyStart = r.pos;
      r.pos = keyEnd;
    } else if (tag === KEY_VALUE_VALUE) {
      valueEnd = r.len(end);
      valueStart = r.pos;
      r.pos = valueEnd;
    } else r.skip(tag, end);
  }
  r.expectEnd(end);
  w.utf8(r.buf, keyStart, keyEnd);
  writeAnyValue(r, w, valueStart, valueEnd);
}

/** Counts the fields with `tag` in [start, end). Leaves pos at end. */
export function countFields(r: WireReader, start: number, end: number, tag: number): number {
  let count = 0;
  r.pos = start;
  while (r.pos < end) {
    const t = r.tag(end);
    if (t === tag) count++;
    r.skip(t, end);
  }
  r.expectEnd(end);
  return count;
}

/**
 * Writes a Map(String, String) column from the `count` KeyValue fields with `tag` found
 * from `first` (the position of the first one's tag) to `end`. Leaves pos undefined.
 */
export function writeAttributes(r: WireReader, w: RowBinaryWriter, first: number, end: number, tag: number, count: number): void {
  w.varUInt(count);
  const src = r.buf;
  let next = first;
  for (let i = 0; i < count; i++) {
    // Fast path, the layout SDKs write, matched byte by byte with all lengths below 128:
    //   tag len { 0x0a keyLen key 0x12 valueLen { one scalar value field } }
    const fieldEnd = next + 2 + src[next + 1]!;
    const keyEnd = next + 4 + src[next + 3]!;
    if (src[next] === tag && src[next + 2] === KEY_VALUE_KEY && src[keyEnd] === KEY_VALUE_VALUE
      && keyEnd + 2 + src[keyEnd + 1]! === fieldEnd && fieldEnd <= end
      && (src[next + 1]! | src[next + 3]! | src[keyEnd + 1]!) < 0x80
      && writeScalarAttribute(r, w, next + 4, keyEnd, fieldEnd)) {
      next = fieldEnd;
      continue;
    }
    const kvEnd = r.seek(next, end, tag);
    writeKeyValue(r, w, r.pos, kvEnd);
    next = kvEnd;
  }
}

/**
 * The fast path's second half: writes the key [keyStart, keyEnd) and the value whose
 * AnyValue runs from keyEnd + 2 to end, if it is one string, int (below 2^28), bool or
 * double field; returns false (having written nothing) for anything else.
 */
function writeScalarAttribute(r: WireReader, w: RowBinaryWriter, keyStart: number, keyEnd: number, end: number): boolean {
  const src = r.buf;
  const valueAt = keyEnd + 3; // the value field's payload, after the AnyValue's tag
  switch (src[keyEnd + 2]) {
    case ANY_STRING:
      if (src[valueAt]! >= 0x80 || valueAt + 1 + src[valueAt]! !== end) return false;
      w.shortUtf8Pair(src, keyStart, keyEnd, valueAt + 1, end);
      return true;
    case ANY_INT: {
      const bytes = end - valueAt;
      if (bytes < 1 || bytes > 4 || src[end - 1]! >= 0x80) return false;
      let value = 0;
      for (let at = end - 1; at >= valueAt; at--) {
        if (at < end - 1 && src[at]! < 0x80) return false; // a varint ends at its first byte < 0x80
        value = (value << 7) | (src[at]! & 0x7f);
      }
      w.utf8(src, keyStart, keyEnd);
      w.decimal(value);
      return true;
    }
    case ANY_BOOL:
      if (end !== valueAt + 1 || src[valueAt]! > 1) return false;
      w.utf8(src, keyStart, keyEnd);
      w.encoded(src[valueAt] === 1 ? TRUE : FALSE);
      return true;
    case ANY_DOUBLE:
      if (end !== valueAt + 8) return false;
      w.utf8(src, keyStart, keyEnd);
      writeGoFloat(w, r.doubleAt(valueAt));
      return true;
    default:
      return false;
  }
}

/** Writes a Map column from every KeyValue with `tag` in [start, end) (not hot: counts first). */
export function writeAllAttributes(r: WireReader, w: RowBinaryWriter, start: number, end: number, tag: number): void {
  writeAttributes(r, w, start, end, tag, countFields(r, start, end, tag));
}

/**
 * Finds the value of the first attribute named `key` among the KeyValues with `tag` in
 * [start, end): returns [valueStart, valueEnd] of its AnyValue, or undefined.
 */
export function findAttribute(r: WireReader, start: number, end: number, tag: number, key: Uint8Array): [number, number] | undefined {
  let next = start;
  for (;;) {
    const fieldEnd = r.seek(next, end, tag);
    if (fieldEnd < 0) return undefined;
    let keyMatches = false;
    let value: [number, number] = [fieldEnd, fieldEnd];
    while (r.pos < fieldEnd) {
      const t = r.tag(fieldEnd);
      if (t === KEY_VALUE_KEY || t === KEY_VALUE_VALUE) {
        const partEnd = r.len(fieldEnd);
        if (t === KEY_VALUE_KEY) keyMatches = bytesEqual(r.buf, r.pos, partEnd, key);
        else value = [r.pos, partEnd];
        r.pos = partEnd;
      } else r.skip(t, fieldEnd);
    }
    if (keyMatches) return value;
    next = fieldEnd;
  }
}

function bytesEqual(buf: Uint8Array, start: number, end: number, expected: Uint8Array): boolean {
  if (end - start !== expected.length) return false;
  for (let i = 0; i < expected.length; i++) if (buf[start + i] !== expected[i]) return false;
  return true;
}
