/*
 * ExportLogsServiceRequest → otel_logs rows, one per log record (pipeline/otlp/logs.ts), written
 * as traces.c writes spans: note where the record's fields lie, then write the row.
 */
#include "sluice.h"

#define TIME TAG(1, I64)
#define SEVERITY_NUMBER TAG(2, VARINT)
#define SEVERITY_TEXT TAG(3, LEN)
#define BODY TAG(5, LEN)
#define ATTRIBUTES TAG(6, LEN)
#define FLAGS TAG(8, I32)
#define TRACE_ID TAG(9, LEN)
#define SPAN_ID TAG(10, LEN)
#define OBSERVED_TIME TAG(11, I64)
#define EVENT_NAME TAG(12, LEN)

/* Where the fields of the current log record lie. */
static struct {
  u32 time_at, observed_at, severity_number, severity_start, severity_end, body_start, body_end;
  u32 attributes_first, attribute_count, flags, trace_id_start, trace_id_end, span_id_start, span_id_end;
  u32 event_name_start, event_name_end, record_end;
} record;

static TableOutput *logs;
static RowPrefix prefix;
static u32 index;

/* Notes the record's fields; returns 1 if it is refused (the reason written). */
static int scan_record(u32 start, u32 end) {
  record.time_at = record.observed_at = NONE;
  record.severity_number = record.attribute_count = record.flags = 0;
  record.severity_start = record.severity_end = record.body_start = record.body_end = start;
  record.trace_id_start = record.trace_id_end = record.span_id_start = record.span_id_end = start;
  record.event_name_start = record.event_name_end = start;
  record.record_end = end;
  P = start;
  while (P < end) {
    u32 field_at = P;
    u32 tag = rd_tag(end);
    switch (tag) {
      case ATTRIBUTES:
        if (record.attribute_count++ == 0) record.attributes_first = field_at;
        P = rd_len(end);
        break;
      case TIME: record.time_at = rd_fixed64(end); break;
      case OBSERVED_TIME: record.observed_at = rd_fixed64(end); break;
      case SEVERITY_NUMBER: record.severity_number = rd_uint32(end); break;
      case FLAGS: record.flags = rd_fixed32(end); break;
      case SEVERITY_TEXT: record.severity_end = rd_len(end); record.severity_start = P; P = record.severity_end; break;
      case BODY: record.body_end = rd_len(end); record.body_start = P; P = record.body_end; break;
      case TRACE_ID: record.trace_id_end = rd_len(end); record.trace_id_start = P; P = record.trace_id_end; break;
      case SPAN_ID: record.span_id_end = rd_len(end); record.span_id_start = P; P = record.span_id_end; break;
      case EVENT_NAME: record.event_name_end = rd_len(end); record.event_name_start = P; P = record.event_name_end; break;
      default:
        rd_skip(tag, end);
    }
  }
  rd_expect_end(end);
  u32 trace_id_length = record.trace_id_end - record.trace_id_start;
  u32 span_id_length = record.span_id_end - record.span_id_start;
  const char *field = 0, *want = 0;
  u32 length = 0;
  if (trace_id_length != 0 && trace_id_length != 16) field = "trace_id", want = "0 or 16", length = trace_id_length;
  else if (span_id_length != 0 && span_id_length != 8) field = "span_id", want = "0 or 8", length = span_id_length;
  if (!field) return 0;
  Buf *m = output_reject();
  if (m) {
    put_text(m, "log record ");
    put_u32_text(m, index);
    put_text(m, ": ");
    put_text(m, field);
    put_text(m, " is ");
    put_u32_text(m, length);
    put_text(m, " bytes, not ");
    put_text(m, want);
  }
  return 1;
}

/* Writes the record's columns; returns the day of its Timestamp. */
static u32 write_record(Buf *w) {
  int time_is_set = record.time_at != NONE && !rd_is_zero(record.time_at, 8);
  u32 day = write_timestamp(w, time_is_set ? record.time_at : record.observed_at);
  write_id(w, record.trace_id_start, record.trace_id_end);
  write_id(w, record.span_id_start, record.span_id_end);
  w_u8(w, record.flags & 0xff);
  w_utf8(w, record.severity_start, record.severity_end);
  w_u8(w, record.severity_number & 0xff);
  write_any_value(w, record.body_start, record.body_end);
  write_attributes(w, record.attributes_first, record.record_end, ATTRIBUTES, record.attribute_count);
  w_utf8(w, record.event_name_start, record.event_name_end);
  return day;
}

static void visit_record(u32 start, u32 end) {
  index++;
  if (scan_record(start, end)) return;
  prefix_copy_into(&prefix, &logs->w);
  table_row_day(logs, write_record(&logs->w));
  table_end_row(logs);
}

void transcode_logs(const u8 *source_id, u32 source_length) {
  logs = output_table(OTEL_LOGS);
  prefix_init(&prefix, RESOURCE_SERVICE_NAME | RESOURCE_ATTRIBUTES_COLUMN | RESOURCE_SCHEMA_URL | SCOPE_NAME_COLUMN | SCOPE_VERSION_COLUMN | SCOPE_ATTRIBUTES_COLUMN | SCOPE_SCHEMA_URL, source_id, source_length);
  index = 0;
  walk_request(&prefix, visit_record);
  output_finish(logs->rows);
}
