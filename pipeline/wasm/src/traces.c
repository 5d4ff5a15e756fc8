/*
 * ExportTraceServiceRequest → otel_traces rows, one per span (pipeline/otlp/traces.ts): a first
 * pass notes where the span's fields lie, then the row is written in column order.
 */
#include "sluice.h"

#define TRACE_ID TAG(1, LEN)
#define SPAN_ID TAG(2, LEN)
#define TRACE_STATE TAG(3, LEN)
#define PARENT_SPAN_ID TAG(4, LEN)
#define NAME TAG(5, LEN)
#define KIND TAG(6, VARINT)
#define START_TIME TAG(7, I64)
#define END_TIME TAG(8, I64)
#define ATTRIBUTES TAG(9, LEN)
#define EVENTS TAG(11, LEN)
#define LINKS TAG(13, LEN)
#define STATUS TAG(15, LEN)

#define EVENT_TIME TAG(1, I64)
#define EVENT_NAME TAG(2, LEN)
#define EVENT_ATTRIBUTES TAG(3, LEN)

#define LINK_TRACE_ID TAG(1, LEN)
#define LINK_SPAN_ID TAG(2, LEN)
#define LINK_TRACE_STATE TAG(3, LEN)
#define LINK_ATTRIBUTES TAG(4, LEN)

#define STATUS_MESSAGE TAG(2, LEN)
#define STATUS_CODE TAG(3, VARINT)

/* pdata's SpanKind.String() and StatusCode.String(), by the enum's value. */
static const char *const SPAN_KINDS[] = {"Unspecified", "Internal", "Server", "Client", "Producer", "Consumer"};
static const char *const STATUS_CODES[] = {"Unset", "Ok", "Error"};

/* Where the fields of the current span lie. */
static struct {
  u32 trace_id_start, trace_id_end, span_id_start, span_id_end, parent_start, parent_end;
  u32 state_start, state_end, name_start, name_end, status_start, status_end;
  u32 kind, start_at, end_at;
  u32 attributes_first, attribute_count, events_first, event_count, links_first, link_count;
  u32 span_end;
} span;

static TableOutput *spans;
static RowPrefix prefix;
static u32 index;

static void put_enum(Buf *w, const char *const *names, u32 count, u32 value) {
  if (value >= count) {
    w_empty_string(w);
    return;
  }
  const char *name = names[value];
  u32 n = 0;
  while (name[n]) n++;
  w_encoded(w, (const u8 *)name, n);
}

/* "<field> is N bytes, not <want>" */
static void id_problem(Buf *m, const char *field, u32 length, const char *want) {
  put_text(m, field);
  put_text(m, " is ");
  put_u32_text(m, length);
  put_text(m, " bytes, not ");
  put_text(m, want);
}

/* Notes the span's fields; returns 1 if it is refused (the reason written). */
static int scan_span(u32 start, u32 end) {
  span.trace_id_start = span.trace_id_end = span.span_id_start = span.span_id_end = start;
  span.parent_start = span.parent_end = span.state_start = span.state_end = start;
  span.name_start = span.name_end = span.status_start = span.status_end = start;
  span.kind = span.attribute_count = span.event_count = span.link_count = 0;
  span.start_at = span.end_at = NONE;
  span.span_end = end;
  P = start;
  while (P < end) {
    u32 field_at = P;
    u32 tag = rd_tag(end);
    switch (tag) {
      case ATTRIBUTES: {
        if (span.attribute_count++ == 0) span.attributes_first = field_at;
        /* Attributes come in a run: step over the rest of it by their one-byte lengths. */
        u32 at = rd_len(end);
        while ((u64)at + 2 <= end && R[at] == ATTRIBUTES && R[at + 1] < 0x80 && (u64)at + 2 + R[at + 1] <= end) {
          at += 2 + R[at + 1];
          span.attribute_count++;
        }
        P = at;
        break;
      }
      case TRACE_ID: span.trace_id_end = rd_len(end); span.trace_id_start = P; P = span.trace_id_end; break;
      case SPAN_ID: span.span_id_end = rd_len(end); span.span_id_start = P; P = span.span_id_end; break;
      case PARENT_SPAN_ID: span.parent_end = rd_len(end); span.parent_start = P; P = span.parent_end; break;
      case TRACE_STATE: span.state_end = rd_len(end); span.state_start = P; P = span.state_end; break;
      case NAME: span.name_end = rd_len(end); span.name_start = P; P = span.name_end; break;
      case STATUS: span.status_end = rd_len(end); span.status_start = P; P = span.status_end; break;
      case KIND: span.kind = rd_uint32(end); break;
      case START_TIME: span.start_at = rd_fixed64(end); break;
      case END_TIME: span.end_at = rd_fixed64(end); break;
      case EVENTS:
        if (span.event_count++ == 0) span.events_first = field_at;
        P = rd_len(end);
        break;
      case LINKS:
        if (span.link_count++ == 0) span.links_first = field_at;
        P = rd_len(end);
        break;
      default:
        rd_skip(tag, end);
    }
  }
  rd_expect_end(end);
  u32 trace_id_length = span.trace_id_end - span.trace_id_start;
  u32 span_id_length = span.span_id_end - span.span_id_start;
  u32 parent_length = span.parent_end - span.parent_start;
  const char *field = 0, *want = 0;
  u32 length = 0;
  if (trace_id_length != 16) field = "trace_id", want = "16", length = trace_id_length;
  else if (span_id_length != 8) field = "span_id", want = "8", length = span_id_length;
  else if (parent_length != 0 && parent_length != 8) field = "parent_span_id", want = "0 or 8", length = parent_length;
  if (!field) return 0;
  Buf *m = output_reject();
  if (m) {
    put_text(m, "span ");
    put_u32_text(m, index);
    put_text(m, ": ");
    id_problem(m, field, length, want);
  }
  return 1;
}

static void write_duration(Buf *w) {
  if (span.start_at == NONE || span.end_at == NONE) {
    w_u64(w, 0);
    return;
  }
  u64 start = u64_at(span.start_at), end = u64_at(span.end_at);
  w_u64(w, end >= start ? end - start : 0);
}

/* StatusCode then StatusMessage. */
static void write_status(Buf *w, u32 start, u32 end) {
  u32 code = 0, message_start = start, message_end = start;
  P = start;
  while (P < end) {
    u32 tag = rd_tag(end);
    if (tag == STATUS_CODE) code = rd_uint32(end);
    else if (tag == STATUS_MESSAGE) {
      message_end = rd_len(end);
      message_start = P;
      P = message_end;
    } else {
      rd_skip(tag, end);
    }
  }
  rd_expect_end(end);
  put_enum(w, STATUS_CODES, 3, code);
  w_utf8(w, message_start, message_end);
}

/* Events.Timestamp, Events.Name, Events.Attributes: one array each, walked in turn. */
static void write_events(Buf *w) {
  for (int column = 0; column < 3; column++) {
    w_var_uint(w, span.event_count);
    u32 next = span.events_first;
    for (u32 i = 0; i < span.event_count; i++) {
      u32 event_end = rd_seek(next, span.span_end, EVENTS);
      u32 event_start = P;
      if (column == 0) write_timestamp(w, find_fixed64(event_start, event_end, EVENT_TIME));
      else if (column == 1) write_string_field(w, event_start, event_end, EVENT_NAME);
      else write_attributes(w, event_start, event_end, EVENT_ATTRIBUTES, count_fields(event_start, event_end, EVENT_ATTRIBUTES));
      next = event_end;
    }
  }
}

/* Links.TraceId, Links.SpanId, Links.TraceState, Links.Attributes; 1 if a link refuses the span. */
static int write_links(Buf *w) {
  for (int column = 0; column < 4; column++) {
    w_var_uint(w, span.link_count);
    u32 next = span.links_first;
    for (u32 i = 0; i < span.link_count; i++) {
      u32 link_end = rd_seek(next, span.span_end, LINKS);
      u32 link_start = P;
      if (column == 0 || column == 1) {
        Range id = find_bytes(link_start, link_end, column == 0 ? LINK_TRACE_ID : LINK_SPAN_ID);
        u32 want = column == 0 ? 16 : 8;
        u32 length = id.end - id.start;
        if (length != 0 && length != want) {
          Buf *m = output_reject();
          if (m) {
            put_text(m, "span ");
            put_u32_text(m, index);
            put_text(m, ": link ");
            put_u32_text(m, i + 1);
            put_text(m, " ");
            id_problem(m, column == 0 ? "trace_id" : "span_id", length, column == 0 ? "16" : "8");
          }
          return 1;
        }
        write_id(w, id.start, id.end);
      } else if (column == 2) {
        write_string_field(w, link_start, link_end, LINK_TRACE_STATE);
      } else {
        write_attributes(w, link_start, link_end, LINK_ATTRIBUTES, count_fields(link_start, link_end, LINK_ATTRIBUTES));
      }
      next = link_end;
    }
  }
  return 0;
}

/* Writes one row; on a refusal, takes the row back out. */
static void write_span(void) {
  Buf *w = &spans->w;
  u32 row_start = w->pos;
  prefix_copy_into(&prefix, w);
  table_row_day(spans, write_timestamp(w, span.start_at));
  write_id(w, span.trace_id_start, span.trace_id_end);
  write_id(w, span.span_id_start, span.span_id_end);
  write_id(w, span.parent_start, span.parent_end);
  w_utf8(w, span.state_start, span.state_end);
  w_utf8(w, span.name_start, span.name_end);
  put_enum(w, SPAN_KINDS, 6, span.kind);
  write_attributes(w, span.attributes_first, span.span_end, ATTRIBUTES, span.attribute_count);
  write_duration(w);
  write_status(w, span.status_start, span.status_end);
  write_events(w);
  if (write_links(w)) w->pos = row_start;
  else table_end_row(spans);
}

static void visit_span(u32 start, u32 end) {
  index++;
  if (!scan_span(start, end)) write_span();
}

void transcode_traces(const u8 *source_id, u32 source_length) {
  spans = output_table(OTEL_TRACES);
  prefix_init(&prefix, RESOURCE_SERVICE_NAME | RESOURCE_ATTRIBUTES_COLUMN | SCOPE_NAME_COLUMN | SCOPE_VERSION_COLUMN, source_id, source_length);
  index = 0;
  walk_request(&prefix, visit_span);
  output_finish(spans->rows);
}
