/**
 * ExportLogsServiceRequest bytes → otel_logs RowBinary rows, one per log record, written the
 * way traces.ts writes spans: note where the record's fields lie, then write the row in
 * column order from the request bytes.
 *
 * Mapping, as the Collector ClickHouse exporter writes it:
 *   Timestamp       time_unix_nano, or observed_time_unix_nano when that is 0; past 2262 that
 *                   last instant (fields.ts#writeTimestamp)
 *   TraceFlags      the low 8 bits of flags (the W3C trace flags)
 *   SeverityNumber  the enum value as UInt8; SeverityText as sent
 *   Body            the AnyValue as a string (anyvalue.ts), "" when absent
 *   ids             lowercase hex, "" when empty or all zero
 * A record whose trace_id is neither 0 nor 16 bytes, or span_id neither 0 nor 8, is refused
 * on its own.
 */
import { writeAnyValue, writeAttributes } from './anyvalue.ts';
import { RowPrefix, walkRequest } from './envelope.ts';
import { writeId, writeTimestamp } from './fields.ts';
import { TranscodeOutput, type TranscodeResult } from '../../storage/table-rows.ts';
import type { RowBinaryWriter } from '../../storage/rowbinary.ts';
import { fieldTag, I32, I64, LEN, VARINT, WireReader } from './wire.ts';

const TIME = fieldTag(1, I64);
const SEVERITY_NUMBER = fieldTag(2, VARINT);
const SEVERITY_TEXT = fieldTag(3, LEN);
const BODY = fieldTag(5, LEN);
const ATTRIBUTES = fieldTag(6, LEN);
const FLAGS = fieldTag(8, I32);
const TRACE_ID = fieldTag(9, LEN);
const SPAN_ID = fieldTag(10, LEN);
const OBSERVED_TIME = fieldTag(11, I64);
const EVENT_NAME = fieldTag(12, LEN);

/** Where the fields of the current log record lie; one instance, reset per record. */
class LogRecordFields {
  timeAt = -1; observedAt = -1;
  severityNumber = 0;
  severityStart = 0; severityEnd = 0;
  bodyStart = 0; bodyEnd = 0;
  attributesFirst = 0; attributeCount = 0;
  flags = 0;
  traceIdStart = 0; traceIdEnd = 0;
  spanIdStart = 0; spanIdEnd = 0;
  eventNameStart = 0; eventNameEnd = 0;
  recordEnd = 0;

  /** Notes the record's fields; returns why it is refused, or undefined. */
  scan(r: WireReader, start: number, end: number): string | undefined {
    this.timeAt = this.observedAt = -1;
    this.severityNumber = this.attributeCount = this.flags = 0;
    this.severityStart = this.severityEnd = this.bodyStart = this.bodyEnd = start;
    this.traceIdStart = this.traceIdEnd = this.spanIdStart = this.spanIdEnd = start;
    this.eventNameStart = this.eventNameEnd = start;
    this.recordEnd = end;
    r.pos = start;
    while (r.pos < end) {
      const fieldAt = r.pos;
      const tag = r.tag(end);
      switch (tag) {
        case ATTRIBUTES:
          if (this.attributeCount++ === 0) this.attributesFirst = fieldAt;
          r.pos = r.len(end);
          break;
        case TIME: this.timeAt = r.fixed64(end); break;
        case OBSERVED_TIME: this.observedAt = r.fixed64(end); break;
        case SEVERITY_NUMBER: this.severityNumber = r.uint32(end); break;
        case FLAGS: this.flags = r.fixed32(end); break;
        case SEVERITY_TEXT: this.severityEnd = r.len(end); this.severityStart = r.pos; r.pos = this.severityEnd; break;
        case BODY: this.bodyEnd = r.len(end); this.bodyStart = r.pos; r.pos = this.bodyEnd; break;
        case TRACE_ID: this.traceIdEnd = r.len(end); this.traceIdStart = r.pos; r.pos = this.traceIdEnd; break;
        case SPAN_ID: this.spanIdEnd = r.len(end); this.spanIdStart = r.pos; r.pos = this.spanIdEnd; break;
        case EVENT_NAME: this.eventNameEnd = r.len(end); this.eventNameStart = r.pos; r.pos = this.eventNameEnd; break;
        default:
          r.skip(tag, end);
      }
    }
    r.expectEnd(end);
    const traceIdLength = this.traceIdEnd - this.traceIdStart;
    if (traceIdLength !== 0 && traceIdLength !== 16) return `trace_id is ${traceIdLength} bytes, not 0 or 16`;
    const spanIdLength = this.spanIdEnd - this.spanIdStart;
    if (spanIdLength !== 0 && spanIdLength !== 8) return `span_id is ${spanIdLength} bytes, not 0 or 8`;
    return undefined;
  }
}

export function transcodeLogs(body: Uint8Array, sourceId: string, maxChunkBytes = Infinity): TranscodeResult {
  const r = new WireReader(body);
  const output = new TranscodeOutput(maxChunkBytes);
  const logs = output.table('otel_logs');
  const prefix = new RowPrefix('otel_logs', sourceId, output.scratchWriter());
  const record = new LogRecordFields();
  let index = 0;
  try {
    walkRequest(r, prefix, (start, end) => {
      index++;
      const problem = record.scan(r, start, end);
      if (problem) return output.reject(`log record ${index}: ${problem}`);
      prefix.copyInto(logs.writer);
      logs.rowDay(writeLogRecord(r, logs.writer, record));
      logs.endRow();
    });
  } catch (err) {
    output.discard();
    throw err;
  }
  output.accepted = logs.rows;
  return output.finish();
}

/** Writes the record's columns; returns the day of its Timestamp. */
function writeLogRecord(r: WireReader, w: RowBinaryWriter, record: LogRecordFields): number {
  const buf = r.buf;
  const timeIsSet = record.timeAt >= 0 && !r.isZero(record.timeAt, 8);
  const day = writeTimestamp(r, w, timeIsSet ? record.timeAt : record.observedAt);
  writeId(r, w, record.traceIdStart, record.traceIdEnd);
  writeId(r, w, record.spanIdStart, record.spanIdEnd);
  w.u8(record.flags & 0xff);
  w.utf8(buf, record.severityStart, record.severityEnd);
  w.u8(record.severityNumber & 0xff);
  writeAnyValue(r, w, record.bodyStart, record.bodyEnd);
  writeAttributes(r, w, record.attributesFirst, record.recordEnd, ATTRIBUTES, record.attributeCount);
  w.utf8(buf, record.eventNameStart, record.eventNameEnd);
  return day;
}
