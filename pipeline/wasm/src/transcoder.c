/*
 * The module's exports. A call goes:
 *   prepare(bodyLength, sourceLength) -> where to copy the body, the source id right after it
 *   transcode(signal, maxChunkBytes)   -> the address of `result` (sluice.h#Result; also result())
 * Rows leave during transcode through the import env.emit_chunk(table, rows, data, length).
 * A refusal or out-of-memory ends transcode with a trap; `result.status` says which (REFUSED,
 * OUT_OF_MEMORY); a trap with the status still RUNNING is a bug.
 *
 * contract() is the text of what the module was built for (tables, columns, limits): the loader
 * compares it with storage/schema.ts and does not use a module built for another schema.
 */
#include "sluice.h"

enum Signal { TRACES = 0, LOGS = 1, METRICS = 2 };

static u32 body_at, body_length, source_length;

__attribute__((export_name("prepare")))
u32 prepare(u32 body_bytes, u32 source_bytes) {
  arena_reset();
  anyvalue_reset();
  result = (Result){0};
  result.status = RUNNING;
  body_length = body_bytes;
  source_length = source_bytes;
  body_at = (u32)(uintptr_t)arena_alloc(body_bytes + source_bytes);
  return body_at;
}

__attribute__((export_name("result")))
Result *result_address(void) {
  return &result;
}

__attribute__((export_name("transcode")))
u32 transcode(u32 signal, double max_chunk_bytes) {
  R = (const u8 *)(uintptr_t)body_at;
  R_LENGTH = body_length;
  P = 0;
  const u8 *source_id = R + body_length;
  output_reset(max_chunk_bytes);
  switch (signal) {
    case TRACES: transcode_traces(source_id, source_length); break;
    case LOGS: transcode_logs(source_id, source_length); break;
    default: transcode_metrics(source_id, source_length);
  }
  return (u32)(uintptr_t)&result;
}

static const char CONTRACT[] =
  "otel_traces: SourceId ServiceName ResourceAttributes ScopeName ScopeVersion Timestamp TraceId SpanId ParentSpanId "
  "TraceState SpanName SpanKind SpanAttributes Duration StatusCode StatusMessage Events.Timestamp Events.Name "
  "Events.Attributes Links.TraceId Links.SpanId Links.TraceState Links.Attributes; by day of Timestamp\n"
  "otel_logs: SourceId ServiceName ResourceAttributes ResourceSchemaUrl ScopeName ScopeVersion ScopeAttributes "
  "ScopeSchemaUrl Timestamp TraceId SpanId TraceFlags SeverityText SeverityNumber Body LogAttributes EventName; "
  "by day of Timestamp\n"
  "otel_metrics_gauge: SourceId ServiceName ResourceAttributes ResourceSchemaUrl ScopeName ScopeVersion "
  "ScopeAttributes ScopeDroppedAttrCount ScopeSchemaUrl MetricName MetricDescription MetricUnit Attributes "
  "StartTimeUnix TimeUnix Value Flags Exemplars.FilteredAttributes Exemplars.TimeUnix Exemplars.Value "
  "Exemplars.SpanId Exemplars.TraceId; by day of TimeUnix\n"
  "otel_metrics_sum: SourceId ServiceName ResourceAttributes ResourceSchemaUrl ScopeName ScopeVersion "
  "ScopeAttributes ScopeDroppedAttrCount ScopeSchemaUrl MetricName MetricDescription MetricUnit "
  "AggregationTemporality IsMonotonic Attributes StartTimeUnix TimeUnix Value Flags Exemplars.FilteredAttributes "
  "Exemplars.TimeUnix Exemplars.Value Exemplars.SpanId Exemplars.TraceId; by day of TimeUnix\n"
  "otel_metrics_histogram: SourceId ServiceName ResourceAttributes ResourceSchemaUrl ScopeName ScopeVersion "
  "ScopeAttributes ScopeDroppedAttrCount ScopeSchemaUrl MetricName MetricDescription MetricUnit "
  "AggregationTemporality Attributes StartTimeUnix TimeUnix Count Sum BucketCounts ExplicitBounds "
  "Exemplars.FilteredAttributes Exemplars.TimeUnix Exemplars.Value Exemplars.SpanId Exemplars.TraceId Flags Min "
  "Max; by day of TimeUnix\n"
  "otel_metrics_exp_histogram: SourceId ServiceName ResourceAttributes ResourceSchemaUrl ScopeName ScopeVersion "
  "ScopeAttributes ScopeDroppedAttrCount ScopeSchemaUrl MetricName MetricDescription MetricUnit "
  "AggregationTemporality Attributes StartTimeUnix TimeUnix Count Sum Scale ZeroCount PositiveOffset "
  "PositiveBucketCounts NegativeOffset NegativeBucketCounts Exemplars.FilteredAttributes Exemplars.TimeUnix "
  "Exemplars.Value Exemplars.SpanId Exemplars.TraceId Flags Min Max; by day of TimeUnix\n"
  "otel_metrics_summary: SourceId ServiceName ResourceAttributes ResourceSchemaUrl ScopeName ScopeVersion "
  "ScopeAttributes ScopeDroppedAttrCount ScopeSchemaUrl MetricName MetricDescription MetricUnit Attributes "
  "StartTimeUnix TimeUnix Count Sum ValueAtQuantiles.Quantile ValueAtQuantiles.Value Flags; by day of TimeUnix\n"
  "partitions per table: 100\n"
  "attribute value depth: 100\n";

__attribute__((export_name("contract")))
const char *contract(void) {
  return CONTRACT;
}

__attribute__((export_name("contract_length")))
u32 contract_length(void) {
  return sizeof CONTRACT - 1;
}
