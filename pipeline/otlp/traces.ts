/**
 * ExportTraceServiceRequest bytes → otel_traces RowBinary rows, one per span, without an
 * object per span. A first pass over the span notes where each field lies (fields may come
 * in any order on the wire); the row is then written in column order, copying string bytes
 * straight from the request.
 *
 * Mapping, as the Collector ClickHouse exporter writes it:
 *   SpanKind    Unspecified | Internal | Server | Client | Producer | Consumer ("" if unknown)
 *   StatusCode  Unset | Ok | Error ("" if unknown)
 *   ids         lowercase hex, "" when empty or all zero
 *   Timestamp   start_time_unix_nano; past what DateTime64(9) holds (2262-04-11T23:47:16.854775807Z)
 *               that last instant, not a wrapped 1969 (fields.ts#writeTimestamp); events alike
 *   Duration    end - start in nanoseconds (0, not a wrapped UInt64, if end < start)
 * A span whose trace_id is not 16 bytes, span_id not 8 bytes, parent_span_id not 0 or 8
 * bytes, or with a link whose ids have the wrong length, is refused on its own.
 */
import { countFields, writeAttributes } from './anyvalue.ts';
import { RowPrefix, walkRequest } from './envelope.ts';
import { findBytes, findFixed64, writeId, writeStringField, writeTimestamp } from './fields.ts';
import { TableOutput, TranscodeOutput, type TranscodeResult } from '../../storage/table-rows.ts';
import type { RowBinaryWriter } from '../../storage/rowbinary.ts';
import { fieldTag, I64, LEN, VARINT, WireReader } from './wire.ts';

const TRACE_ID = fieldTag(1, LEN);
const SPAN_ID = fieldTag(2, LEN);
const TRACE_STATE = fieldTag(3, LEN);
const PARENT_SPAN_ID = fieldTag(4, LEN);
const NAME = fieldTag(5, LEN);
const KIND = fieldTag(6, VARINT);
const START_TIME = fieldTag(7, I64);
const END_TIME = fieldTag(8, I64);
const ATTRIBUTES = fieldTag(9, LEN);
const EVENTS = fieldTag(11, LEN);
const LINKS = fieldTag(13, LEN);
const STATUS = fieldTag(15, LEN);

const EVENT_TIME = fieldTag(1, I64);
const EVENT_NAME = fieldTag(2, LEN);
const EVENT_ATTRIBUTES = fieldTag(3, LEN);

const LINK_TRACE_ID = fieldTag(1, LEN);
const LINK_SPAN_ID = fieldTag(2, LEN);
const LINK_TRACE_STATE = fieldTag(3, LEN);
const LINK_ATTRIBUTES = fieldTag(4, LEN);

const STATUS_MESSAGE = fieldTag(2, LEN);
const STATUS_CODE = fieldTag(3, VARINT);

/** pdata's SpanKind.String() and StatusCode.String(), indexed by the enum value. */
const SPAN_KINDS = ['Unspecified', 'Internal', 'Server', 'Client', 'Producer', 'Consumer'].map((s) => Buffer.from(s));
const STATUS_CODES = ['Unset', 'Ok', 'Error'].map((s) => Buffer.from(s));
const UNKNOWN_ENUM = Buffer.alloc(0);
const TWO_32 = 4294967296;

/** Where the fields of the current span lie; one instance, reset per span. */
class SpanFields {
  traceIdStart = 0; traceIdEnd = 0;
  spanIdStart = 0; spanIdEnd = 0;
  parentStart = 0; parentEnd = 0;
  stateStart = 0; stateEnd = 0;
  nameStart = 0; nameEnd = 0;
  kind = 0;
  startAt = -1; endAt = -1;
  statusStart = 0; statusEnd = 0;
  attributesFirst = 0; attributeCount = 0;
  eventsFirst = 0; eventCount = 0;
  linksFirst = 0; linkCount = 0;
  spanEnd = 0;

  /** Notes the span's fields; returns why the span is refused, or undefined. */
  scan(r: WireReader, start: number, end: number): string | undefined {
    this.traceIdStart = this.traceIdEnd = this.spanIdStart = this.spanIdEnd = start;
    this.parentStart = this.parentEnd = this.stateStart = this.stateEnd = start;
    this.nameStart = this.nameEnd = this.statusStart = this.statusEnd = start;
    this.kind = this.attributeCount = this.eventCount = this.linkCount = 0;
    this.startAt = this.endAt = -1;
    this.spanEnd = end;
    r.pos = start;
    while (r.pos < end) {
      const fieldAt = r.pos;
      const tag = r.tag(end);
      switch (tag) {
        case ATTRIBUTES: {
          if (this.attributeCount++ === 0) this.attributesFirst = fieldAt;
          // Attributes come in a run: step over the rest of it by their one-byte lengths.
          const buf = r.buf;
          let at = r.len(end);
          while (buf[at] === ATTRIBUTES && buf[at + 1]! < 0x80 && at + 2 + buf[at + 1]! <= end) {
            at += 2 + buf[at + 1]!;
            this.attributeCount++;
          }
          r.pos = at;
          break;
        }
        case TRACE_ID: this.traceIdEnd = r.len(end); this.traceIdStart = r.pos; r.pos = this.traceIdEnd; break;
        case SPAN_ID: this.spanIdEnd = r.len(end); this.spanIdStart = r.pos; r.pos = this.spanIdEnd; break;
        case PARENT_SPAN_ID: this.parentEnd = r.len(end); this.parentStart = r.pos; r.pos = this.parentEnd; break;
        case TRACE_STATE: this.stateEnd = r.len(end); this.stateStart = r.pos; r.pos = this.stateEnd; break;
        case NAME: this.nameEnd = r.len(end); this.nameStart = r.pos; r.pos = this.nameEnd; break;
        case STATUS: this.statusEnd = r.len(end); this.statusStart = r.pos; r.pos = this.statusEnd; break;
        case KIND: this.kind = r.uint32(end); break;
        case START_TIME: this.startAt = r.fixed64(end); break;
        case END_TIME: this.endAt = r.fixed64(end); break;
        case EVENTS:
          if (this.eventCount++ === 0) this.eventsFirst = fieldAt;
          r.pos = r.len(end);
          break;
        case LINKS:
          if (this.linkCount++ === 0) this.linksFirst = fieldAt;
          r.pos = r.len(end);
          break;
        default:
          r.skip(tag, end);
      }
    }
    r.expectEnd(end);
    if (this.traceIdEnd - this.traceIdStart !== 16) return `trace_id is ${this.traceIdEnd - this.traceIdStart} bytes, not 16`;
    if (this.spanIdEnd - this.spanIdStart !== 8) return `span_id is ${this.spanIdEnd - this.spanIdStart} bytes, not 8`;
    const parentLength = this.parentEnd - this.parentStart;
    if (parentLength !== 0 && parentLength !== 8) return `parent_span_id is ${parentLength} bytes, not 0 or 8`;
    return undefined;
  }
}

export function transcodeTraces(body: Uint8Array, sourceId: string, maxChunkBytes = Infinity): TranscodeResult {
  const r = new WireReader(body);
  const output = new TranscodeOutput(maxChunkBytes);
  const spans = output.table('otel_traces');
  const prefix = new RowPrefix('otel_traces', sourceId, output.scratchWriter());
  const span = new SpanFields();
  let index = 0;
  try {
    walkRequest(r, prefix, (start, end) => {
      index++;
      const problem = span.scan(r, start, end) ?? writeSpanRow(r, spans, prefix, span);
      if (problem) output.reject(`span ${index}: ${problem}`);
      else spans.endRow();
    });
  } catch (err) {
    output.discard();
    throw err;
  }
  output.accepted = spans.rows;
  return output.finish();
}

/** Writes one row; on a refusal, takes the row back out and says why. */
function writeSpanRow(r: WireReader, spans: TableOutput, prefix: RowPrefix, span: SpanFields): string | undefined {
  const w = spans.writer;
  const rowStart = w.pos;
  const buf = r.buf;
  prefix.copyInto(w);
  spans.rowDay(writeTimestamp(r, w, span.startAt));
  writeId(r, w, span.traceIdStart, span.traceIdEnd);
  writeId(r, w, span.spanIdStart, span.spanIdEnd);
  writeId(r, w, span.parentStart, span.parentEnd);
  w.utf8(buf, span.stateStart, span.stateEnd);
  w.utf8(buf, span.nameStart, span.nameEnd);
  w.encoded(SPAN_KINDS[span.kind] ?? UNKNOWN_ENUM);
  writeAttributes(r, w, span.attributesFirst, span.spanEnd, ATTRIBUTES, span.attributeCount);
  writeDuration(r, w, span.startAt, span.endAt);
  writeStatus(r, w, span.statusStart, span.statusEnd);
  writeEvents(r, w, span);
  const problem = writeLinks(r, w, span);
  if (problem) w.truncate(rowStart);
  return problem;
}

function writeDuration(r: WireReader, w: RowBinaryWriter, startAt: number, endAt: number): void {
  if (startAt < 0 || endAt < 0) return w.u64(0, 0);
  let lo = r.uint32At(endAt) - r.uint32At(startAt);
  let hi = r.uint32At(endAt + 4) - r.uint32At(startAt + 4);
  if (lo < 0) {
    lo += TWO_32;
    hi--;
  }
  if (hi < 0) w.u64(0, 0);
  else w.u64(lo, hi);
}

/** StatusCode then StatusMessage. */
function writeStatus(r: WireReader, w: RowBinaryWriter, start: number, end: number): void {
  let code = 0, messageStart = start, messageEnd = start;
  r.pos = start;
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag === STATUS_CODE) code = r.uint32(end);
    else if (tag === STATUS_MESSAGE) {
      messageEnd = r.len(end);
      messageStart = r.pos;
      r.pos = messageEnd;
    } else r.skip(tag, end);
  }
  r.expectEnd(end);
  w.encoded(STATUS_CODES[code] ?? UNKNOWN_ENUM);
  w.utf8(r.buf, messageStart, messageEnd);
}

/** Events.Timestamp, Events.Name, Events.Attributes: one array each, walked in turn. */
function writeEvents(r: WireReader, w: RowBinaryWriter, span: SpanFields): void {
  for (let column = 0; column < 3; column++) {
    w.varUInt(span.eventCount);
    let next = span.eventsFirst;
    for (let i = 0; i < span.eventCount; i++) {
      const eventEnd = r.seek(next, span.spanEnd, EVENTS);
      const eventStart = r.pos;
      if (column === 0) writeTimestamp(r, w, findFixed64(r, eventStart, eventEnd, EVENT_TIME));
      else if (column === 1) writeStringField(r, w, eventStart, eventEnd, EVENT_NAME);
      else writeAttributes(r, w, eventStart, eventEnd, EVENT_ATTRIBUTES, countFields(r, eventStart, eventEnd, EVENT_ATTRIBUTES));
      next = eventEnd;
    }
  }
}

/** Links.TraceId, Links.SpanId, Links.TraceState, Links.Attributes. */
function writeLinks(r: WireReader, w: RowBinaryWriter, span: SpanFields): string | undefined {
  for (let column = 0; column < 4; column++) {
    w.varUInt(span.linkCount);
    let next = span.linksFirst;
    for (let i = 0; i < span.linkCount; i++) {
      const linkEnd = r.seek(next, span.spanEnd, LINKS);
      const linkStart = r.pos;
      if (column === 0 || column === 1) {
        const [idStart, idEnd] = findBytes(r, linkStart, linkEnd, column === 0 ? LINK_TRACE_ID : LINK_SPAN_ID);
        const want = column === 0 ? 16 : 8;
        if (idEnd - idStart !== 0 && idEnd - idStart !== want) {
          return `link ${i + 1} ${column === 0 ? 'trace_id' : 'span_id'} is ${idEnd - idStart} bytes, not ${want}`;
        }
        writeId(r, w, idStart, idEnd);
      } else if (column === 2) writeStringField(r, w, linkStart, linkEnd, LINK_TRACE_STATE);
      else writeAttributes(r, w, linkStart, linkEnd, LINK_ATTRIBUTES, countFields(r, linkStart, linkEnd, LINK_ATTRIBUTES));
      next = linkEnd;
    }
  }
  return undefined;
}
