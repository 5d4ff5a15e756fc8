/**
 * The per-point columns of the five metrics tables: each writer notes where the point's
 * fields lie, then writes its columns in TABLE_COLUMNS order (everything from Attributes on;
 * metrics.ts writes the prefix). A writer returns why the point is refused, or undefined;
 * the caller then takes the row back out.
 *
 * Mapping, as the Collector ClickHouse exporter writes it:
 *   StartTimeUnix, TimeUnix, Exemplars.TimeUnix   DateTime: whole seconds (the exporter's
 *                 current schema), floor(nanoseconds / 1e9); past what a DateTime holds
 *                 (2106-02-07T06:28:15Z) that last second
 *   Value         as_double, or as_int converted to Float64; 0 when unset
 *   Sum, Min, Max 0 when unset; Count, ZeroCount, bucket counts as UInt64
 *   Exemplars.SpanId / TraceId   lowercase hex of the id, zeros when empty (the exporter
 *                 hex-encodes its fixed-size id arrays)
 * Refused points: a histogram whose bucket_counts is neither empty nor one longer than
 * explicit_bounds, and an exemplar whose ids have the wrong length.
 */
import { badRequest } from '../../core/errors.ts';
import { countFields, writeAttributes } from './anyvalue.ts';
import { findBytes, findFixed64, unixSeconds } from './fields.ts';
import type { RowBinaryWriter } from '../../storage/rowbinary.ts';
import { fieldTag, I64, LEN, VARINT, type WireReader } from './wire.ts';

const TWO_32 = 4294967296;
const ZERO_SPAN_ID = '0'.repeat(16);
const ZERO_TRACE_ID = '0'.repeat(32);

/** Writes a point's columns from [start, end); returns why it is refused, or undefined. */
export type PointWriter = (r: WireReader, w: RowBinaryWriter, start: number, end: number) => string | undefined;

/** The fields every point type has, and where their tags differ. */
class PointFields {
  attributesFirst = 0; attributeCount = 0;
  startAt = -1; timeAt = -1;
  exemplarsFirst = 0; exemplarCount = 0;
  flags = 0;

  reset(): void {
    this.attributeCount = this.exemplarCount = this.flags = 0;
    this.startAt = this.timeAt = -1;
  }
}
const point = new PointFields();

const START_TIME = fieldTag(2, I64); // the same number in every point type
const TIME = fieldTag(3, I64);

const NUMBER_AS_DOUBLE = fieldTag(4, I64);
const NUMBER_EXEMPLARS = fieldTag(5, LEN);
const NUMBER_AS_INT = fieldTag(6, I64);
const NUMBER_ATTRIBUTES = fieldTag(7, LEN);
const NUMBER_FLAGS = fieldTag(8, VARINT);

/** Gauge and sum: Attributes, StartTimeUnix, TimeUnix, Value, Flags, Exemplars.*. */
export const writeNumberPoint: PointWriter = (r, w, start, end) => {
  point.reset();
  let valueTag = 0, valueAt = -1;
  r.pos = start;
  while (r.pos < end) {
    const fieldAt = r.pos;
    const tag = r.tag(end);
    if (tag === NUMBER_AS_DOUBLE || tag === NUMBER_AS_INT) {
      valueTag = tag;
      valueAt = r.fixed64(end);
    } else if (!notePointField(r, tag, fieldAt, end, NUMBER_ATTRIBUTES, NUMBER_EXEMPLARS, NUMBER_FLAGS)) r.skip(tag, end);
  }
  r.expectEnd(end);
  writeAttributes(r, w, point.attributesFirst, end, NUMBER_ATTRIBUTES, point.attributeCount);
  writeSeconds(r, w, point.startAt);
  writeSeconds(r, w, point.timeAt);
  w.f64(valueAt < 0 ? 0 : valueTag === NUMBER_AS_DOUBLE ? r.doubleAt(valueAt) : int64At(r, valueAt));
  w.u32(point.flags);
  return writeExemplars(r, w, end, NUMBER_EXEMPLARS);
};

const HISTOGRAM_COUNT = fieldTag(4, I64);
const HISTOGRAM_SUM = fieldTag(5, I64);
const HISTOGRAM_BUCKETS_PACKED = fieldTag(6, LEN);
const HISTOGRAM_BUCKET = fieldTag(6, I64);
const HISTOGRAM_BOUNDS_PACKED = fieldTag(7, LEN);
const HISTOGRAM_BOUND = fieldTag(7, I64);
const HISTOGRAM_EXEMPLARS = fieldTag(8, LEN);
const HISTOGRAM_ATTRIBUTES = fieldTag(9, LEN);
const HISTOGRAM_FLAGS = fieldTag(10, VARINT);
const HISTOGRAM_MIN = fieldTag(11, I64);
const HISTOGRAM_MAX = fieldTag(12, I64);

/** Attributes, StartTimeUnix, TimeUnix, Count, Sum, BucketCounts, ExplicitBounds, Exemplars.*, Flags, Min, Max. */
export const writeHistogramPoint: PointWriter = (r, w, start, end) => {
  point.reset();
  let countAt = -1, sumAt = -1, minAt = -1, maxAt = -1, buckets = 0, bounds = 0;
  r.pos = start;
  while (r.pos < end) {
    const fieldAt = r.pos;
    const tag = r.tag(end);
    switch (tag) {
      case HISTOGRAM_COUNT: countAt = r.fixed64(end); break;
      case HISTOGRAM_SUM: sumAt = r.fixed64(end); break;
      case HISTOGRAM_MIN: minAt = r.fixed64(end); break;
      case HISTOGRAM_MAX: maxAt = r.fixed64(end); break;
      case HISTOGRAM_BUCKETS_PACKED: buckets += packedFixed64Count(r, end); break;
      case HISTOGRAM_BUCKET: buckets++; r.fixed64(end); break;
      case HISTOGRAM_BOUNDS_PACKED: bounds += packedFixed64Count(r, end); break;
      case HISTOGRAM_BOUND: bounds++; r.fixed64(end); break;
      default:
        if (!notePointField(r, tag, fieldAt, end, HISTOGRAM_ATTRIBUTES, HISTOGRAM_EXEMPLARS, HISTOGRAM_FLAGS)) r.skip(tag, end);
    }
  }
  r.expectEnd(end);
  if (buckets !== 0 && buckets !== bounds + 1) return `${buckets} bucket_counts for ${bounds} explicit_bounds (want ${bounds + 1})`;
  writeAttributes(r, w, point.attributesFirst, end, HISTOGRAM_ATTRIBUTES, point.attributeCount);
  writeSeconds(r, w, point.startAt);
  writeSeconds(r, w, point.timeAt);
  writeFixed64(r, w, countAt);
  writeFixed64(r, w, sumAt);
  writeFixed64Array(r, w, start, end, HISTOGRAM_BUCKETS_PACKED, HISTOGRAM_BUCKET, buckets);
  writeFixed64Array(r, w, start, end, HISTOGRAM_BOUNDS_PACKED, HISTOGRAM_BOUND, bounds);
  const problem = writeExemplars(r, w, end, HISTOGRAM_EXEMPLARS);
  if (problem) return problem;
  w.u32(point.flags);
  writeFixed64(r, w, minAt);
  writeFixed64(r, w, maxAt);
  return undefined;
};

const EXP_ATTRIBUTES = fieldTag(1, LEN);
const EXP_COUNT = fieldTag(4, I64);
const EXP_SUM = fieldTag(5, I64);
const EXP_SCALE = fieldTag(6, VARINT);
const EXP_ZERO_COUNT = fieldTag(7, I64);
const EXP_POSITIVE = fieldTag(8, LEN);
const EXP_NEGATIVE = fieldTag(9, LEN);
const EXP_FLAGS = fieldTag(10, VARINT);
const EXP_EXEMPLARS = fieldTag(11, LEN);
const EXP_MIN = fieldTag(12, I64);
const EXP_MAX = fieldTag(13, I64);

/**
 * Attributes, StartTimeUnix, TimeUnix, Count, Sum, Scale, ZeroCount, PositiveOffset,
 * PositiveBucketCounts, NegativeOffset, NegativeBucketCounts, Exemplars.*, Flags, Min, Max.
 */
export const writeExpHistogramPoint: PointWriter = (r, w, start, end) => {
  point.reset();
  let countAt = -1, sumAt = -1, zeroCountAt = -1, minAt = -1, maxAt = -1, scale = 0;
  let positiveStart = start, positiveEnd = start, negativeStart = start, negativeEnd = start;
  r.pos = start;
  while (r.pos < end) {
    const fieldAt = r.pos;
    const tag = r.tag(end);
    switch (tag) {
      case EXP_COUNT: countAt = r.fixed64(end); break;
      case EXP_SUM: sumAt = r.fixed64(end); break;
      case EXP_ZERO_COUNT: zeroCountAt = r.fixed64(end); break;
      case EXP_MIN: minAt = r.fixed64(end); break;
      case EXP_MAX: maxAt = r.fixed64(end); break;
      case EXP_SCALE: scale = r.sint32(end); break;
      case EXP_POSITIVE: positiveEnd = r.len(end); positiveStart = r.pos; r.pos = positiveEnd; break;
      case EXP_NEGATIVE: negativeEnd = r.len(end); negativeStart = r.pos; r.pos = negativeEnd; break;
      default:
        if (!notePointField(r, tag, fieldAt, end, EXP_ATTRIBUTES, EXP_EXEMPLARS, EXP_FLAGS)) r.skip(tag, end);
    }
  }
  r.expectEnd(end);
  writeAttributes(r, w, point.attributesFirst, end, EXP_ATTRIBUTES, point.attributeCount);
  writeSeconds(r, w, point.startAt);
  writeSeconds(r, w, point.timeAt);
  writeFixed64(r, w, countAt);
  writeFixed64(r, w, sumAt);
  w.i32(scale);
  writeFixed64(r, w, zeroCountAt);
  writeBuckets(r, w, positiveStart, positiveEnd);
  writeBuckets(r, w, negativeStart, negativeEnd);
  const problem = writeExemplars(r, w, end, EXP_EXEMPLARS);
  if (problem) return problem;
  w.u32(point.flags);
  writeFixed64(r, w, minAt);
  writeFixed64(r, w, maxAt);
  return undefined;
};

const BUCKETS_OFFSET = fieldTag(1, VARINT);
const BUCKETS_COUNTS_PACKED = fieldTag(2, LEN);
const BUCKETS_COUNT = fieldTag(2, VARINT);

/** The Offset (Int32) and BucketCounts (Array(UInt64)) columns of one Buckets message. */
function writeBuckets(r: WireReader, w: RowBinaryWriter, start: number, end: number): void {
  let offset = 0, count = 0;
  r.pos = start;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag === BUCKETS_OFFSET) offset = r.sint32(end);
    else if (tag === BUCKETS_COUNT) {
      r.varint64(end);
      count++;
    } else if (tag === BUCKETS_COUNTS_PACKED) {
      const packedEnd = r.len(end);
      while (r.pos < packedEnd) {
        r.varint64(packedEnd);
        count++;
      }
    } else r.skip(tag, end);
  }
  r.expectEnd(end);
  w.i32(offset);
  w.varUInt(count);
  r.pos = start;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag === BUCKETS_COUNT) {
      r.varint64(end);
      w.u64(r.lo, r.hi);
    } else if (tag === BUCKETS_COUNTS_PACKED) {
      const packedEnd = r.len(end);
      while (r.pos < packedEnd) {
        r.varint64(packedEnd);
        w.u64(r.lo, r.hi);
      }
    } else r.skip(tag, end);
  }
}

const SUMMARY_COUNT = fieldTag(4, I64);
const SUMMARY_SUM = fieldTag(5, I64);
const SUMMARY_QUANTILES = fieldTag(6, LEN);
const SUMMARY_ATTRIBUTES = fieldTag(7, LEN);
const SUMMARY_FLAGS = fieldTag(8, VARINT);
const NO_EXEMPLARS = -1; // summaries have none
const QUANTILE = fieldTag(1, I64);
const QUANTILE_VALUE = fieldTag(2, I64);

/** Attributes, StartTimeUnix, TimeUnix, Count, Sum, ValueAtQuantiles.Quantile, ValueAtQuantiles.Value, Flags. */
export const writeSummaryPoint: PointWriter = (r, w, start, end) => {
  point.reset();
  let countAt = -1, sumAt = -1, quantileCount = 0, quantilesFirst = start;
  r.pos = start;
  while (r.pos < end) {
    const fieldAt = r.pos;
    const tag = r.tag(end);
    if (tag === SUMMARY_COUNT) countAt = r.fixed64(end);
    else if (tag === SUMMARY_SUM) sumAt = r.fixed64(end);
    else if (tag === SUMMARY_QUANTILES) {
      if (quantileCount++ === 0) quantilesFirst = fieldAt;
      r.pos = r.len(end);
    } else if (!notePointField(r, tag, fieldAt, end, SUMMARY_ATTRIBUTES, NO_EXEMPLARS, SUMMARY_FLAGS)) r.skip(tag, end);
  }
  r.expectEnd(end);
  writeAttributes(r, w, point.attributesFirst, end, SUMMARY_ATTRIBUTES, point.attributeCount);
  writeSeconds(r, w, point.startAt);
  writeSeconds(r, w, point.timeAt);
  writeFixed64(r, w, countAt);
  writeFixed64(r, w, sumAt);
  for (const tag of [QUANTILE, QUANTILE_VALUE]) {
    w.varUInt(quantileCount);
    let next = quantilesFirst;
    for (let i = 0; i < quantileCount; i++) {
      const quantileEnd = r.seek(next, end, SUMMARY_QUANTILES);
      writeFixed64(r, w, findFixed64(r, r.pos, quantileEnd, tag));
      next = quantileEnd;
    }
  }
  w.u32(point.flags);
  return undefined;
};

/** Notes the fields all point types share; returns false for any other tag. */
function notePointField(r: WireReader, tag: number, fieldAt: number, end: number, attributesTag: number, exemplarsTag: number, flagsTag: number): boolean {
  if (tag === attributesTag) {
    if (point.attributeCount++ === 0) point.attributesFirst = fieldAt;
    r.pos = r.len(end);
  } else if (tag === START_TIME) point.startAt = r.fixed64(end);
  else if (tag === TIME) point.timeAt = r.fixed64(end);
  else if (tag === flagsTag) point.flags = r.uint32(end);
  else if (tag === exemplarsTag) {
    if (point.exemplarCount++ === 0) point.exemplarsFirst = fieldAt;
    r.pos = r.len(end);
  } else return false;
  return true;
}

const EXEMPLAR_TIME = fieldTag(2, I64);
const EXEMPLAR_AS_DOUBLE = fieldTag(3, I64);
const EXEMPLAR_SPAN_ID = fieldTag(4, LEN);
const EXEMPLAR_TRACE_ID = fieldTag(5, LEN);
const EXEMPLAR_AS_INT = fieldTag(6, I64);
const EXEMPLAR_FILTERED_ATTRIBUTES = fieldTag(7, LEN);

/** Exemplars.FilteredAttributes, .TimeUnix, .Value, .SpanId, .TraceId, one array each. */
function writeExemplars(r: WireReader, w: RowBinaryWriter, end: number, exemplarsTag: number): string | undefined {
  const count = point.exemplarCount;
  for (let column = 0; column < 5; column++) {
    w.varUInt(count);
    let next = point.exemplarsFirst;
    for (let i = 0; i < count; i++) {
      const exemplarEnd = r.seek(next, end, exemplarsTag);
      const exemplarStart = r.pos;
      if (column === 0) {
        const attributes = countFields(r, exemplarStart, exemplarEnd, EXEMPLAR_FILTERED_ATTRIBUTES);
        writeAttributes(r, w, exemplarStart, exemplarEnd, EXEMPLAR_FILTERED_ATTRIBUTES, attributes);
      } else if (column === 1) writeSeconds(r, w, findFixed64(r, exemplarStart, exemplarEnd, EXEMPLAR_TIME));
      else if (column === 2) {
        const doubleAt = findFixed64(r, exemplarStart, exemplarEnd, EXEMPLAR_AS_DOUBLE);
        const intAt = findFixed64(r, exemplarStart, exemplarEnd, EXEMPLAR_AS_INT);
        w.f64(intAt > doubleAt ? int64At(r, intAt) : doubleAt >= 0 ? r.doubleAt(doubleAt) : 0);
      } else {
        const isSpan = column === 3;
        const [idStart, idEnd] = findBytes(r, exemplarStart, exemplarEnd, isSpan ? EXEMPLAR_SPAN_ID : EXEMPLAR_TRACE_ID);
        const want = isSpan ? 8 : 16;
        if (idEnd === idStart) w.string(isSpan ? ZERO_SPAN_ID : ZERO_TRACE_ID);
        else if (idEnd - idStart === want) w.hex(r.buf, idStart, idEnd);
        else return `exemplar ${i + 1} ${isSpan ? 'span_id' : 'trace_id'} is ${idEnd - idStart} bytes, not ${want}`;
      }
      next = exemplarEnd;
    }
  }
  return undefined;
}

/** A packed repeated fixed64/double field: steps over it and returns how many values it holds. */
function packedFixed64Count(r: WireReader, end: number): number {
  const packedEnd = r.len(end);
  const bytes = packedEnd - r.pos;
  if (bytes % 8 !== 0) throw badRequest(`malformed protobuf: a packed 64-bit field of ${bytes} bytes at byte ${r.pos}`);
  r.pos = packedEnd;
  return bytes / 8;
}

/** An Array(UInt64) or Array(Float64) from a repeated fixed64/double field, packed or not. */
function writeFixed64Array(r: WireReader, w: RowBinaryWriter, start: number, end: number, packedTag: number, singleTag: number, count: number): void {
  w.varUInt(count);
  if (count === 0) return;
  r.pos = start;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag === packedTag) {
      const packedEnd = r.len(end);
      w.raw(r.buf, r.pos, packedEnd); // little-endian on both sides
      r.pos = packedEnd;
    } else if (tag === singleTag) {
      const at = r.fixed64(end);
      w.raw(r.buf, at, at + 8);
    } else r.skip(tag, end);
  }
}

/** A UInt64 or Float64 column from the fixed64/double at `at`, 0 when absent (-1). */
function writeFixed64(r: WireReader, w: RowBinaryWriter, at: number): void {
  if (at < 0) w.u64(0, 0);
  else w.raw(r.buf, at, at + 8);
}

/** The sfixed64 at `at` converted to the nearest double. */
function int64At(r: WireReader, at: number): number {
  return (r.uint32At(at + 4) | 0) * TWO_32 + r.uint32At(at);
}

/** The last instant a DateTime (UInt32 seconds) holds: 2106-02-07T06:28:15Z. */
const MAX_DATETIME_SECONDS = 0xffffffff;

/** DateTime seconds of the fixed64 nanoseconds at `at` (absent: 0), past its range its last second. */
function secondsAt(r: WireReader, at: number): number {
  return at < 0 ? 0 : Math.min(unixSeconds(r.uint32At(at), r.uint32At(at + 4)), MAX_DATETIME_SECONDS);
}

/** A DateTime (UInt32 seconds) from the fixed64 nanoseconds at `at` (absent: 0). */
function writeSeconds(r: WireReader, w: RowBinaryWriter, at: number): void {
  w.u32(secondsAt(r, at));
}

/** The day of the point last written's TimeUnix: its row's partition. */
export function pointDay(r: WireReader): number {
  return Math.floor(secondsAt(r, point.timeAt) / 86400);
}
