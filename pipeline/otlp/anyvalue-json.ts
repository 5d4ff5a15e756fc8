/**
 * Array and kvlist attribute values as JSON, the way the Collector exporter stores them:
 * pdata turns the value into Go values (AsRaw) and encodes them with encoding/json without
 * HTML escaping. So: map keys sorted by their UTF-8 bytes (a repeated key keeps its last
 * value), bytes as base64 strings, ints as exact decimals, doubles in the ES6 form, an unset
 * value as null, U+2028 and U+2029 escaped; and a NaN or ±Inf anywhere makes Go's encoder
 * fail, which leaves the attribute "" .
 *
 * This is the cold path (such attributes are rare), so it builds JS strings freely.
 */
import { isUtf8 } from 'node:buffer';
import { badRequest } from '../../core/errors.ts';
import {
  ANY_ARRAY, ANY_BOOL, ANY_BYTES, ANY_DOUBLE, ANY_INT, ANY_KVLIST, ANY_STRING,
  isAnyValueTag, KEY_VALUE_KEY, KEY_VALUE_VALUE, LIST_VALUES,
} from './common-tags.ts';
import { compareUtf8, float64AsString, goQuote } from './go-format.ts';
import type { WireReader } from './wire.ts';

/** How deep array and kvlist attribute values may nest, in protobuf and OTLP/JSON (json.ts) alike. */
export const MAX_ANYVALUE_DEPTH = 100;

/** The refusal of a value nested deeper than MAX_ANYVALUE_DEPTH. */
export function tooDeep() {
  return badRequest(`an attribute value is nested deeper than ${MAX_ANYVALUE_DEPTH} levels`);
}

/** Thrown inside, caught at the top: Go's json.Marshal refuses NaN and ±Inf. */
const UNSUPPORTED_FLOAT = Symbol('unsupported float');

/** The JSON of the ArrayValue (isArray) or KeyValueList message in [start, end). */
export function anyValueJson(r: WireReader, isArray: boolean, start: number, end: number): string {
  try {
    return isArray ? arrayJson(r, start, end, 0) : kvlistJson(r, start, end, 0);
  } catch (err) {
    if (err === UNSUPPORTED_FLOAT) return '';
    throw err;
  }
}

function arrayJson(r: WireReader, start: number, end: number, depth: number): string {
  const items: string[] = [];
  let next = start;
  for (;;) {
    const itemEnd = r.seek(next, end, LIST_VALUES);
    if (itemEnd < 0) break;
    items.push(valueJson(r, r.pos, itemEnd, depth + 1));
    next = itemEnd;
  }
  return '[' + items.join(',') + ']';
}

function kvlistJson(r: WireReader, start: number, end: number, depth: number): string {
  const entries = new Map<string, string>();
  let next = start;
  for (;;) {
    const entryEnd = r.seek(next, end, LIST_VALUES);
    if (entryEnd < 0) break;
    let key = '';
    let value = 'null';
    while (r.pos < entryEnd) {
      const tag = r.tag(entryEnd);
      if (tag === KEY_VALUE_KEY || tag === KEY_VALUE_VALUE) {
        const partEnd = r.len(entryEnd);
        if (tag === KEY_VALUE_KEY) key = utf8String(r, r.pos, partEnd);
        else value = valueJson(r, r.pos, partEnd, depth + 1);
        r.pos = partEnd;
      } else r.skip(tag, entryEnd);
    }
    entries.delete(key); // Go's map: the last value of a key wins
    entries.set(key, value);
    next = entryEnd;
  }
  const keys = [...entries.keys()].sort(compareUtf8);
  return '{' + keys.map((key) => goQuote(key) + ':' + entries.get(key)).join(',') + '}';
}

/** The JSON of one AnyValue message in [start, end). */
function valueJson(r: WireReader, start: number, end: number, depth: number): string {
  if (depth > MAX_ANYVALUE_DEPTH) throw tooDeep();
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
  r.pos = at;
  switch (tag) {
    case ANY_STRING: {
      const stringEnd = r.len(end);
      return goQuote(utf8String(r, r.pos, stringEnd));
    }
    case ANY_BOOL:
      r.varint64(end);
      return r.lo !== 0 || r.hi !== 0 ? 'true' : 'false';
    case ANY_INT:
      r.varint64(end);
      return r.int64Decimal();
    case ANY_DOUBLE: {
      const value = r.double(end);
      if (!Number.isFinite(value)) throw UNSUPPORTED_FLOAT;
      return float64AsString(value);
    }
    case ANY_BYTES: {
      const bytesEnd = r.len(end);
      return '"' + Buffer.from(r.buf.buffer, r.buf.byteOffset + r.pos, bytesEnd - r.pos).toString('base64') + '"';
    }
    case ANY_ARRAY:
    case ANY_KVLIST: {
      const listEnd = r.len(end);
      return tag === ANY_ARRAY ? arrayJson(r, r.pos, listEnd, depth) : kvlistJson(r, r.pos, listEnd, depth);
    }
    default:
      return 'null'; // unset, or only unknown fields
  }
}

function utf8String(r: WireReader, start: number, end: number): string {
  const bytes = r.buf.subarray(start, end);
  if (!isUtf8(bytes)) throw badRequest('invalid UTF-8 in a protobuf string field');
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}
