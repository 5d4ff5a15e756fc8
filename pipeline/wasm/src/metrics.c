/*
 * ExportMetricsServiceRequest → rows of the five metrics tables, one per data point
 * (pipeline/otlp/metrics.ts and metric-points.ts). The metric's own columns are a further
 * level of the row prefix; each point writer adds its columns and says why the point is
 * refused, if it is.
 */
#include "sluice.h"

#define NAME TAG(1, LEN)
#define DESCRIPTION TAG(2, LEN)
#define UNIT TAG(3, LEN)
#define GAUGE TAG(5, LEN)
#define SUM TAG(7, LEN)
#define HISTOGRAM TAG(9, LEN)
#define EXPONENTIAL_HISTOGRAM TAG(10, LEN)
#define SUMMARY TAG(11, LEN)

/* Inside Gauge, Sum, Histogram, ExponentialHistogram and Summary. */
#define DATA_POINTS TAG(1, LEN)
#define AGGREGATION_TEMPORALITY TAG(2, VARINT)
#define IS_MONOTONIC TAG(3, VARINT)

/* Why a point is refused (metric-points.ts's messages, made by describe_problem). */
typedef struct {
  enum { NO_PROBLEM, BUCKETS, EXEMPLAR_ID } kind;
  u32 a, b, c;
} Problem;

static const Problem OK = {NO_PROBLEM, 0, 0, 0};

typedef Problem (*PointWriter)(Buf *w, u32 start, u32 end);

/* ---- metric-points.ts ---- */

/* The fields every point type has. */
static struct {
  u32 attributes_first, attribute_count, start_at, time_at, exemplars_first, exemplar_count, flags;
} point;

static void reset_point(void) {
  point.attribute_count = point.exemplar_count = point.flags = 0;
  point.start_at = point.time_at = NONE;
}

#define START_TIME TAG(2, I64) /* the same number in every point type */
#define TIME TAG(3, I64)

/* Notes the fields all point types share; returns 0 for any other tag. */
static int note_point_field(u32 tag, u32 field_at, u32 end, u32 attributes_tag, u32 exemplars_tag, u32 flags_tag) {
  if (tag == attributes_tag) {
    if (point.attribute_count++ == 0) point.attributes_first = field_at;
    P = rd_len(end);
  } else if (tag == START_TIME) {
    point.start_at = rd_fixed64(end);
  } else if (tag == TIME) {
    point.time_at = rd_fixed64(end);
  } else if (tag == flags_tag) {
    point.flags = rd_uint32(end);
  } else if (tag == exemplars_tag) {
    if (point.exemplar_count++ == 0) point.exemplars_first = field_at;
    P = rd_len(end);
  } else {
    return 0;
  }
  return 1;
}

/* DateTime seconds of the fixed64 nanoseconds at `at` (NONE: 0); past 2106-02-07T06:28:15Z, that last second. */
static u32 seconds_at(u32 at) {
  if (at == NONE) return 0;
  u64 seconds = u64_at(at) / 1000000000ull;
  return seconds > 0xffffffffull ? 0xffffffffu : (u32)seconds;
}

static void write_seconds(Buf *w, u32 at) {
  w_u32(w, seconds_at(at));
}

/* A UInt64 or Float64 column from the fixed64 or double at `at`, 0 when absent. */
static void write_fixed64(Buf *w, u32 at) {
  w_u64(w, at == NONE ? 0 : u64_at(at));
}

/* The sfixed64 at `at` as the nearest double, as a Float64 column. */
static void write_int64_as_double(Buf *w, u32 at) {
  double value = (double)(i64)u64_at(at);
  u64 bits;
  __builtin_memcpy(&bits, &value, 8);
  w_u64(w, bits);
}

/* Positions compared as metric-points.ts compares them, absent (NONE) being -1. */
static i64 position(u32 at) {
  return at == NONE ? -1 : (i64)at;
}

#define EXEMPLAR_TIME TAG(2, I64)
#define EXEMPLAR_AS_DOUBLE TAG(3, I64)
#define EXEMPLAR_SPAN_ID TAG(4, LEN)
#define EXEMPLAR_TRACE_ID TAG(5, LEN)
#define EXEMPLAR_AS_INT TAG(6, I64)
#define EXEMPLAR_FILTERED_ATTRIBUTES TAG(7, LEN)

/* Exemplars.FilteredAttributes, .TimeUnix, .Value, .SpanId, .TraceId, one array each. */
static Problem write_exemplars(Buf *w, u32 end, u32 exemplars_tag) {
  u32 count = point.exemplar_count;
  for (int column = 0; column < 5; column++) {
    w_var_uint(w, count);
    u32 next = point.exemplars_first;
    for (u32 i = 0; i < count; i++) {
      u32 exemplar_end = rd_seek(next, end, exemplars_tag);
      u32 exemplar_start = P;
      if (column == 0) {
        u32 attributes = count_fields(exemplar_start, exemplar_end, EXEMPLAR_FILTERED_ATTRIBUTES);
        write_attributes(w, exemplar_start, exemplar_end, EXEMPLAR_FILTERED_ATTRIBUTES, attributes);
      } else if (column == 1) {
        write_seconds(w, find_fixed64(exemplar_start, exemplar_end, EXEMPLAR_TIME));
      } else if (column == 2) {
        u32 double_at = find_fixed64(exemplar_start, exemplar_end, EXEMPLAR_AS_DOUBLE);
        u32 int_at = find_fixed64(exemplar_start, exemplar_end, EXEMPLAR_AS_INT);
        if (position(int_at) > position(double_at)) write_int64_as_double(w, int_at);
        else write_fixed64(w, double_at);
      } else {
        int is_span = column == 3;
        Range id = find_bytes(exemplar_start, exemplar_end, is_span ? EXEMPLAR_SPAN_ID : EXEMPLAR_TRACE_ID);
        u32 want = is_span ? 8 : 16;
        u32 length = id.end - id.start;
        if (length == 0) {
          /* The exporter hex-encodes its fixed-size id arrays: zeros when empty. */
          static const u8 ZEROS[32] = "00000000000000000000000000000000";
          w_encoded(w, ZEROS, want * 2);
        } else if (length == want) {
          w_hex(w, id.start, id.end);
        } else {
          return (Problem){EXEMPLAR_ID, i + 1, (u32)is_span, length};
        }
      }
      next = exemplar_end;
    }
  }
  return OK;
}

#define NUMBER_AS_DOUBLE TAG(4, I64)
#define NUMBER_EXEMPLARS TAG(5, LEN)
#define NUMBER_AS_INT TAG(6, I64)
#define NUMBER_ATTRIBUTES TAG(7, LEN)
#define NUMBER_FLAGS TAG(8, VARINT)

/* Gauge and sum: Attributes, StartTimeUnix, TimeUnix, Value, Flags, Exemplars.*. */
static Problem write_number_point(Buf *w, u32 start, u32 end) {
  reset_point();
  u32 value_tag = 0, value_at = NONE;
  P = start;
  while (P < end) {
    u32 field_at = P;
    u32 tag = rd_tag(end);
    if (tag == NUMBER_AS_DOUBLE || tag == NUMBER_AS_INT) {
      value_tag = tag;
      value_at = rd_fixed64(end);
    } else if (!note_point_field(tag, field_at, end, NUMBER_ATTRIBUTES, NUMBER_EXEMPLARS, NUMBER_FLAGS)) {
      rd_skip(tag, end);
    }
  }
  rd_expect_end(end);
  write_attributes(w, point.attributes_first, end, NUMBER_ATTRIBUTES, point.attribute_count);
  write_seconds(w, point.start_at);
  write_seconds(w, point.time_at);
  if (value_at != NONE && value_tag == NUMBER_AS_INT) write_int64_as_double(w, value_at);
  else write_fixed64(w, value_at);
  w_u32(w, point.flags);
  return write_exemplars(w, end, NUMBER_EXEMPLARS);
}

#define HISTOGRAM_COUNT TAG(4, I64)
#define HISTOGRAM_SUM TAG(5, I64)
#define HISTOGRAM_BUCKETS_PACKED TAG(6, LEN)
#define HISTOGRAM_BUCKET TAG(6, I64)
#define HISTOGRAM_BOUNDS_PACKED TAG(7, LEN)
#define HISTOGRAM_BOUND TAG(7, I64)
#define HISTOGRAM_EXEMPLARS TAG(8, LEN)
#define HISTOGRAM_ATTRIBUTES TAG(9, LEN)
#define HISTOGRAM_FLAGS TAG(10, VARINT)
#define HISTOGRAM_MIN TAG(11, I64)
#define HISTOGRAM_MAX TAG(12, I64)

/* A packed repeated fixed64/double field: steps over it and returns how many values it holds. */
static u32 packed_fixed64_count(u32 end) {
  u32 packed_end = rd_len(end);
  u32 bytes = packed_end - P;
  if (bytes % 8 != 0) malformed_packed(bytes, P);
  P = packed_end;
  return bytes / 8;
}

/* An Array(UInt64) or Array(Float64) from a repeated fixed64/double field, packed or not. */
static void write_fixed64_array(Buf *w, u32 start, u32 end, u32 packed_tag, u32 single_tag, u32 count) {
  w_var_uint(w, count);
  if (count == 0) return;
  P = start;
  while (P < end) {
    u32 tag = rd_tag(end);
    if (tag == packed_tag) {
      u32 packed_end = rd_len(end);
      w_raw(w, R + P, packed_end - P); /* little-endian on both sides */
      P = packed_end;
    } else if (tag == single_tag) {
      u32 at = rd_fixed64(end);
      w_raw(w, R + at, 8);
    } else {
      rd_skip(tag, end);
    }
  }
}

/* Attributes, StartTimeUnix, TimeUnix, Count, Sum, BucketCounts, ExplicitBounds, Exemplars.*, Flags, Min, Max. */
static Problem write_histogram_point(Buf *w, u32 start, u32 end) {
  reset_point();
  u32 count_at = NONE, sum_at = NONE, min_at = NONE, max_at = NONE, buckets = 0, bounds = 0;
  P = start;
  while (P < end) {
    u32 field_at = P;
    u32 tag = rd_tag(end);
    switch (tag) {
      case HISTOGRAM_COUNT: count_at = rd_fixed64(end); break;
      case HISTOGRAM_SUM: sum_at = rd_fixed64(end); break;
      case HISTOGRAM_MIN: min_at = rd_fixed64(end); break;
      case HISTOGRAM_MAX: max_at = rd_fixed64(end); break;
      case HISTOGRAM_BUCKETS_PACKED: buckets += packed_fixed64_count(end); break;
      case HISTOGRAM_BUCKET: buckets++; rd_fixed64(end); break;
      case HISTOGRAM_BOUNDS_PACKED: bounds += packed_fixed64_count(end); break;
      case HISTOGRAM_BOUND: bounds++; rd_fixed64(end); break;
      default:
        if (!note_point_field(tag, field_at, end, HISTOGRAM_ATTRIBUTES, HISTOGRAM_EXEMPLARS, HISTOGRAM_FLAGS)) rd_skip(tag, end);
    }
  }
  rd_expect_end(end);
  if (buckets != 0 && buckets != bounds + 1) return (Problem){BUCKETS, buckets, bounds, 0};
  write_attributes(w, point.attributes_first, end, HISTOGRAM_ATTRIBUTES, point.attribute_count);
  write_seconds(w, point.start_at);
  write_seconds(w, point.time_at);
  write_fixed64(w, count_at);
  write_fixed64(w, sum_at);
  write_fixed64_array(w, start, end, HISTOGRAM_BUCKETS_PACKED, HISTOGRAM_BUCKET, buckets);
  write_fixed64_array(w, start, end, HISTOGRAM_BOUNDS_PACKED, HISTOGRAM_BOUND, bounds);
  Problem problem = write_exemplars(w, end, HISTOGRAM_EXEMPLARS);
  if (problem.kind != NO_PROBLEM) return problem;
  w_u32(w, point.flags);
  write_fixed64(w, min_at);
  write_fixed64(w, max_at);
  return OK;
}

#define EXP_ATTRIBUTES TAG(1, LEN)
#define EXP_COUNT TAG(4, I64)
#define EXP_SUM TAG(5, I64)
#define EXP_SCALE TAG(6, VARINT)
#define EXP_ZERO_COUNT TAG(7, I64)
#define EXP_POSITIVE TAG(8, LEN)
#define EXP_NEGATIVE TAG(9, LEN)
#define EXP_FLAGS TAG(10, VARINT)
#define EXP_EXEMPLARS TAG(11, LEN)
#define EXP_MIN TAG(12, I64)
#define EXP_MAX TAG(13, I64)

#define BUCKETS_OFFSET TAG(1, VARINT)
#define BUCKETS_COUNTS_PACKED TAG(2, LEN)
#define BUCKETS_COUNT TAG(2, VARINT)

/* The Offset (Int32) and BucketCounts (Array(UInt64)) columns of one Buckets message. */
static void write_buckets(Buf *w, u32 start, u32 end) {
  i32 offset = 0;
  u32 count = 0;
  P = start;
  while (P < end) {
    u32 tag = rd_tag(end);
    if (tag == BUCKETS_OFFSET) offset = rd_sint32(end);
    else if (tag == BUCKETS_COUNT) {
      rd_varint64(end);
      count++;
    } else if (tag == BUCKETS_COUNTS_PACKED) {
      u32 packed_end = rd_len(end);
      while (P < packed_end) {
        rd_varint64(packed_end);
        count++;
      }
    } else {
      rd_skip(tag, end);
    }
  }
  rd_expect_end(end);
  w_u32(w, (u32)offset);
  w_var_uint(w, count);
  P = start;
  while (P < end) {
    u32 tag = rd_tag(end);
    if (tag == BUCKETS_COUNT) {
      rd_varint64(end);
      w_u64(w, V);
    } else if (tag == BUCKETS_COUNTS_PACKED) {
      u32 packed_end = rd_len(end);
      while (P < packed_end) {
        rd_varint64(packed_end);
        w_u64(w, V);
      }
    } else {
      rd_skip(tag, end);
    }
  }
}

/*
 * Attributes, StartTimeUnix, TimeUnix, Count, Sum, Scale, ZeroCount, PositiveOffset,
 * PositiveBucketCounts, NegativeOffset, NegativeBucketCounts, Exemplars.*, Flags, Min, Max.
 */
static Problem write_exp_histogram_point(Buf *w, u32 start, u32 end) {
  reset_point();
  u32 count_at = NONE, sum_at = NONE, zero_count_at = NONE, min_at = NONE, max_at = NONE;
  i32 scale = 0;
  u32 positive_start = start, positive_end = start, negative_start = start, negative_end = start;
  P = start;
  while (P < end) {
    u32 field_at = P;
    u32 tag = rd_tag(end);
    switch (tag) {
      case EXP_COUNT: count_at = rd_fixed64(end); break;
      case EXP_SUM: sum_at = rd_fixed64(end); break;
      case EXP_ZERO_COUNT: zero_count_at = rd_fixed64(end); break;
      case EXP_MIN: min_at = rd_fixed64(end); break;
      case EXP_MAX: max_at = rd_fixed64(end); break;
      case EXP_SCALE: scale = rd_sint32(end); break;
      case EXP_POSITIVE: positive_end = rd_len(end); positive_start = P; P = positive_end; break;
      case EXP_NEGATIVE: negative_end = rd_len(end); negative_start = P; P = negative_end; break;
      default:
        if (!note_point_field(tag, field_at, end, EXP_ATTRIBUTES, EXP_EXEMPLARS, EXP_FLAGS)) rd_skip(tag, end);
    }
  }
  rd_expect_end(end);
  write_attributes(w, point.attributes_first, end, EXP_ATTRIBUTES, point.attribute_count);
  write_seconds(w, point.start_at);
  write_seconds(w, point.time_at);
  write_fixed64(w, count_at);
  write_fixed64(w, sum_at);
  w_u32(w, (u32)scale);
  write_fixed64(w, zero_count_at);
  write_buckets(w, positive_start, positive_end);
  write_buckets(w, negative_start, negative_end);
  Problem problem = write_exemplars(w, end, EXP_EXEMPLARS);
  if (problem.kind != NO_PROBLEM) return problem;
  w_u32(w, point.flags);
  write_fixed64(w, min_at);
  write_fixed64(w, max_at);
  return OK;
}

#define SUMMARY_COUNT TAG(4, I64)
#define SUMMARY_SUM TAG(5, I64)
#define SUMMARY_QUANTILES TAG(6, LEN)
#define SUMMARY_ATTRIBUTES TAG(7, LEN)
#define SUMMARY_FLAGS TAG(8, VARINT)
#define QUANTILE TAG(1, I64)
#define QUANTILE_VALUE TAG(2, I64)

/* Attributes, StartTimeUnix, TimeUnix, Count, Sum, ValueAtQuantiles.Quantile, ValueAtQuantiles.Value, Flags. */
static Problem write_summary_point(Buf *w, u32 start, u32 end) {
  reset_point();
  u32 count_at = NONE, sum_at = NONE, quantile_count = 0, quantiles_first = start;
  P = start;
  while (P < end) {
    u32 field_at = P;
    u32 tag = rd_tag(end);
    if (tag == SUMMARY_COUNT) count_at = rd_fixed64(end);
    else if (tag == SUMMARY_SUM) sum_at = rd_fixed64(end);
    else if (tag == SUMMARY_QUANTILES) {
      if (quantile_count++ == 0) quantiles_first = field_at;
      P = rd_len(end);
    } else if (!note_point_field(tag, field_at, end, SUMMARY_ATTRIBUTES, NONE /* summaries have no exemplars */, SUMMARY_FLAGS)) {
      rd_skip(tag, end);
    }
  }
  rd_expect_end(end);
  write_attributes(w, point.attributes_first, end, SUMMARY_ATTRIBUTES, point.attribute_count);
  write_seconds(w, point.start_at);
  write_seconds(w, point.time_at);
  write_fixed64(w, count_at);
  write_fixed64(w, sum_at);
  for (int column = 0; column < 2; column++) {
    w_var_uint(w, quantile_count);
    u32 next = quantiles_first;
    for (u32 i = 0; i < quantile_count; i++) {
      u32 quantile_end = rd_seek(next, end, SUMMARY_QUANTILES);
      write_fixed64(w, find_fixed64(P, quantile_end, column == 0 ? QUANTILE : QUANTILE_VALUE));
      next = quantile_end;
    }
  }
  w_u32(w, point.flags);
  return OK;
}

/* ---- metrics.ts ---- */

typedef struct {
  u32 tag;
  u32 table;
  PointWriter write_point;
  /* Which metric-level columns the table has after MetricUnit. */
  int temporality, monotonic;
} MetricKind;

static const MetricKind KINDS[] = {
  {GAUGE, OTEL_METRICS_GAUGE, write_number_point, 0, 0},
  {SUM, OTEL_METRICS_SUM, write_number_point, 1, 1},
  {HISTOGRAM, OTEL_METRICS_HISTOGRAM, write_histogram_point, 1, 0},
  {EXPONENTIAL_HISTOGRAM, OTEL_METRICS_EXP_HISTOGRAM, write_exp_histogram_point, 1, 0},
  {SUMMARY, OTEL_METRICS_SUMMARY, write_summary_point, 0, 0},
};

static const MetricKind *kind_of(u32 tag) {
  for (u32 i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
    if (KINDS[i].tag == tag) return &KINDS[i];
  return 0;
}

static RowPrefix prefix;
static u32 index, accepted;

/* `data point N (metric "name"): why` */
static void describe_problem(Buf *m, Problem problem, u32 name_start, u32 name_end) {
  put_text(m, "data point ");
  put_u32_text(m, index);
  put_text(m, " (metric ");
  put_json_quoted(m, R + name_start, name_end - name_start, 0);
  put_text(m, "): ");
  if (problem.kind == BUCKETS) {
    put_u32_text(m, problem.a);
    put_text(m, " bucket_counts for ");
    put_u32_text(m, problem.b);
    put_text(m, " explicit_bounds (want ");
    put_u32_text(m, problem.b + 1);
    put_text(m, ")");
  } else {
    put_text(m, "exemplar ");
    put_u32_text(m, problem.a);
    put_text(m, problem.b ? " span_id is " : " trace_id is ");
    put_u32_text(m, problem.c);
    put_text(m, problem.b ? " bytes, not 8" : " bytes, not 16");
  }
}

static void visit_metric(u32 metric_start, u32 metric_end) {
  u32 name_start = metric_start, name_end = metric_start, description_start = metric_start, description_end = metric_start;
  u32 unit_start = metric_start, unit_end = metric_start, data_tag = 0, data_start = 0, data_end = 0;
  P = metric_start;
  while (P < metric_end) {
    u32 tag = rd_tag(metric_end);
    if ((tag & 7) != LEN || !(tag == NAME || tag == DESCRIPTION || tag == UNIT || kind_of(tag))) {
      rd_skip(tag, metric_end);
      continue;
    }
    u32 field_end = rd_len(metric_end);
    if (tag == NAME) name_start = P, name_end = field_end;
    else if (tag == DESCRIPTION) description_start = P, description_end = field_end;
    else if (tag == UNIT) unit_start = P, unit_end = field_end;
    else data_tag = tag, data_start = P, data_end = field_end; /* a oneof: the last wins */
    P = field_end;
  }
  rd_expect_end(metric_end);
  const MetricKind *kind = kind_of(data_tag);
  if (!kind) return;

  Buf *metric = prefix_extend(&prefix);
  w_utf8(metric, name_start, name_end);
  w_utf8(metric, description_start, description_end);
  w_utf8(metric, unit_start, unit_end);
  if (kind->temporality) {
    u32 temporality = 0, monotonic = 0;
    P = data_start;
    while (P < data_end) {
      u32 tag = rd_tag(data_end);
      if (tag == AGGREGATION_TEMPORALITY) temporality = rd_uint32(data_end);
      else if (tag == IS_MONOTONIC) monotonic = rd_uint32(data_end) != 0;
      else rd_skip(tag, data_end);
    }
    rd_expect_end(data_end);
    w_u32(metric, temporality);
    if (kind->monotonic) w_u8(metric, monotonic);
  }

  TableOutput *table = output_table(kind->table);
  Buf *w = &table->w;
  u32 next = data_start;
  for (;;) {
    u32 point_end = rd_seek(next, data_end, DATA_POINTS);
    if (point_end == NONE) break;
    index++;
    u32 row_start = w->pos;
    prefix_copy_into(&prefix, w);
    Problem problem = kind->write_point(w, P, point_end);
    if (problem.kind != NO_PROBLEM) {
      w->pos = row_start;
      Buf *m = output_reject();
      if (m) describe_problem(m, problem, name_start, name_end);
    } else {
      table_row_day(table, seconds_at(point.time_at) / 86400);
      table_end_row(table);
      accepted++;
    }
    next = point_end;
  }
}

void transcode_metrics(const u8 *source_id, u32 source_length) {
  /* The resource and scope columns are the same in all five tables: one prefix serves all. */
  prefix_init(&prefix, RESOURCE_SERVICE_NAME | RESOURCE_ATTRIBUTES_COLUMN | RESOURCE_SCHEMA_URL | SCOPE_NAME_COLUMN | SCOPE_VERSION_COLUMN | SCOPE_ATTRIBUTES_COLUMN | SCOPE_DROPPED_COLUMN | SCOPE_SCHEMA_URL, source_id, source_length);
  index = accepted = 0;
  walk_request(&prefix, visit_metric);
  output_finish(accepted);
}
