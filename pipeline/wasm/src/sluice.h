/*
 * The WebAssembly transcoder: pipeline/otlp's JavaScript transcoder (traces.ts, logs.ts,
 * metrics.ts and what they use) written again in C, function for function, so that both write
 * the same RowBinary bytes and refuse the same requests with the same messages. The JavaScript
 * is the reference: where this file names a function, it is the one of the same name there.
 *
 * Built with clang for wasm32, without a libc (pipeline/wasm/build.sh). The module works in its
 * own linear memory only: the loader (pipeline/wasm/transcoder.ts) copies the request in, and
 * the rows leave through one import, emit_chunk, which copies them out.
 *
 * Errors: a refused request (what the JavaScript throws as badRequest) ends the call with a
 * trap after noting the message (refuse()); so does a memory request past the module's maximum
 * (out_of_memory()). The loader tells the two apart from a trap it did not expect (a bug) by
 * the status noted in `result`.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t i32;
typedef int64_t i64;

/* ---- runtime.c: memory, copies, the outcome of a call ---- */

/* A growable byte buffer in the module's heap (a RowBinaryWriter, a message, a scratch area). */
typedef struct {
  u8 *data;
  u32 pos;
  u32 cap;
} Buf;

void arena_reset(void);
void *arena_alloc(u32 bytes);
void buf_init(Buf *b, u32 cap);
/* Makes room for `bytes` more bytes at b->pos. */
static inline void buf_reserve(Buf *b, u32 bytes);
void buf_grow(Buf *b, u32 bytes);

void copy_bytes(u8 *to, const u8 *from, u32 n);

enum Status { RUNNING = 0, DONE = 1, REFUSED = 2, OUT_OF_MEMORY = 3, TOO_MANY_PARTITIONS = 4 };

/* What the loader reads after a call (see transcoder.c#result). */
typedef struct {
  u32 status;
  u32 accepted;
  u32 rejected;
  /* DONE: the rejection message (0 bytes if none); REFUSED: why. */
  u32 message;
  u32 message_length;
  /* The tables that have rows or were started, in the order they were first used. */
  u32 table_count;
  u32 tables[8];
  /* TOO_MANY_PARTITIONS: the table, and how many days its rows span. */
  u32 partition_table;
  u32 partition_count;
} Result;

extern Result result;

/* A message under construction (in the heap: it may quote request bytes at any length). */
Buf *message(void);
/* Ends the call: the request is refused with `m` as the reason (JavaScript: throw badRequest). */
_Noreturn void refuse(Buf *m);
_Noreturn void refuse_text(const char *text);
_Noreturn void out_of_memory(void);

/* ---- rows.c: RowBinary columns (rowbinary.ts) and message text ---- */

void put_bytes(Buf *b, const u8 *s, u32 n);
void put_text(Buf *b, const char *s);
void put_u32_text(Buf *b, u32 v);
void put_u64_text(Buf *b, u64 v);
void put_i64_text(Buf *b, i64 v);
/* JSON.stringify of a valid UTF-8 string; with go, U+2028 and U+2029 escaped too (goQuote). */
void put_json_quoted(Buf *b, const u8 *s, u32 n, int go);

int utf8_valid(const u8 *s, u32 n);

static inline void w_u8(Buf *w, u32 v) {
  buf_reserve(w, 1);
  w->data[w->pos++] = (u8)v;
}
static inline void w_u32(Buf *w, u32 v) {
  buf_reserve(w, 4);
  __builtin_memcpy(w->data + w->pos, &v, 4); /* wasm is little-endian, as RowBinary */
  w->pos += 4;
}
static inline void w_u64(Buf *w, u64 v) {
  buf_reserve(w, 8);
  __builtin_memcpy(w->data + w->pos, &v, 8);
  w->pos += 8;
}
static inline void w_var_uint(Buf *w, u32 v) {
  buf_reserve(w, 5);
  u8 *d = w->data;
  u32 pos = w->pos;
  while (v >= 0x80) {
    d[pos++] = (u8)(v | 0x80);
    v >>= 7;
  }
  d[pos++] = (u8)v;
  w->pos = pos;
}
static inline void w_empty_string(Buf *w) { w_u8(w, 0); }
/* src[start, end) as is: a fixed-width value already little-endian on the wire. */
void w_raw(Buf *w, const u8 *src, u32 n);
/* A String column from a protobuf string field's bytes; refuses invalid UTF-8. */
void w_utf8(Buf *w, u32 start, u32 end);
/* A String column from bytes known to be valid (constants, text made here). */
void w_encoded(Buf *w, const u8 *s, u32 n);
/* A String column of the lowercase hex of the request bytes [start, end). */
void w_hex(Buf *w, u32 start, u32 end);
/* A String column of a signed 64-bit integer in decimal. */
void w_i64_decimal(Buf *w, i64 v);
/* A String column of the standard base64 (with padding) of the request bytes [start, end). */
void w_base64(Buf *w, u32 start, u32 end);
/* The same base64, without a length before it (inside JSON). */
void put_base64(Buf *b, u32 start, u32 end);

/* ---- numbers.c: doubles as JavaScript's String() and Go's float64AsString write them ---- */

/* float64AsString(value) as a String column (go-format.ts#writeGoFloat). */
void w_go_float(Buf *w, double value);
/* String(value) for a finite value, -0 as "-0" (go-format.ts#float64AsString); returns the length. */
u32 format_double(double value, u8 *out);

/* ---- wire.c: the protobuf reader (wire.ts), over the request in memory ---- */

enum { VARINT = 0, I64 = 1, LEN = 2, I32 = 5 };
#define TAG(number, wire_type) ((u32)(((number) << 3) | (wire_type)))
/* seek(): no such field. */
#define NONE 0xffffffffu

extern const u8 *R; /* the request */
extern u32 R_LENGTH;
extern u32 P;        /* WireReader.pos */
extern u64 V;        /* the last varint64() or fixed64Value() */

u32 rd_tag(u32 end);
u32 rd_uint32(u32 end);
void rd_varint64(u32 end);
u32 rd_len(u32 end);
u32 rd_fixed64(u32 end);
u32 rd_fixed32(u32 end);
i32 rd_sint32(u32 end);
void rd_skip(u32 tag, u32 end);
void rd_expect_end(u32 end);
u32 rd_seek(u32 from, u32 end, u32 tag);
int rd_is_zero(u32 at, u32 n);
static inline u64 u64_at(u32 at) {
  u64 v;
  __builtin_memcpy(&v, R + at, 8);
  return v;
}
static inline u32 u32_at(u32 at) {
  u32 v;
  __builtin_memcpy(&v, R + at, 4);
  return v;
}
_Noreturn void malformed_packed(u32 bytes, u32 at);

/* ---- anyvalue.c: attributes and AnyValues as strings (anyvalue.ts, anyvalue-json.ts) ---- */

void write_any_value(Buf *w, u32 start, u32 end);
u32 count_fields(u32 start, u32 end, u32 tag);
void write_attributes(Buf *w, u32 first, u32 end, u32 tag, u32 count);
void write_all_attributes(Buf *w, u32 start, u32 end, u32 tag);
/* findAttribute: sets [*value_start, *value_end) and returns 1, or returns 0. */
int find_attribute(u32 start, u32 end, u32 tag, const u8 *key, u32 key_length, u32 *value_start, u32 *value_end);
void anyvalue_reset(void);

/* ---- fields.c: ids, timestamps, single fields (fields.ts) ---- */

typedef struct { u32 start, end; } Range;
Range find_bytes(u32 start, u32 end, u32 tag);
/* The position of the last fixed64 field with `tag` in [start, end), or NONE. */
u32 find_fixed64(u32 start, u32 end, u32 tag);
void write_string_field(Buf *w, u32 start, u32 end, u32 tag);
void write_id(Buf *w, u32 start, u32 end);
/* DateTime64(9) from the fixed64 at `at` (NONE: 0); returns its day since 1970-01-01. */
u32 write_timestamp(Buf *w, u32 at);

/* ---- output.c: tables, chunks, partitions, refused items (storage/table-rows.ts) ---- */

enum Table { OTEL_TRACES, OTEL_LOGS, OTEL_METRICS_GAUGE, OTEL_METRICS_SUM, OTEL_METRICS_HISTOGRAM, OTEL_METRICS_EXP_HISTOGRAM, OTEL_METRICS_SUMMARY, TABLE_COUNT };

typedef struct {
  Buf w;
  u32 table;
  u32 rows;
  u32 sealed_rows;
  u32 row_day;
  u32 partitions; /* distinct days of the rows ended */
  u8 *days;       /* a bit per day */
} TableOutput;

void output_reset(double max_chunk_bytes);
TableOutput *output_table(u32 table);
void table_row_day(TableOutput *t, u32 day);
void table_end_row(TableOutput *t);
/* Counts one refused item; returns the buffer to write its reason into if it is the first, else 0. */
Buf *output_reject(void);
void output_finish(u32 accepted);

/* ---- envelope.c: resource and scope levels, the row prefix (envelope.ts) ---- */

enum {
  RESOURCE_SERVICE_NAME = 1, RESOURCE_ATTRIBUTES_COLUMN = 2, RESOURCE_SCHEMA_URL = 4,
  SCOPE_NAME_COLUMN = 8, SCOPE_VERSION_COLUMN = 16, SCOPE_ATTRIBUTES_COLUMN = 32, SCOPE_DROPPED_COLUMN = 64, SCOPE_SCHEMA_URL = 128,
};
typedef struct {
  Buf w;
  u32 columns;
  u32 source_end, resource_end, scope_end;
} RowPrefix;

void prefix_init(RowPrefix *prefix, u32 columns, const u8 *source_id, u32 source_length);
/* The prefix positioned after the scope columns, for a further level's columns. */
Buf *prefix_extend(RowPrefix *prefix);
static inline void prefix_copy_into(const RowPrefix *prefix, Buf *out) { put_bytes(out, prefix->w.data, prefix->w.pos); }
typedef void (*ItemVisitor)(u32 start, u32 end);
void walk_request(RowPrefix *prefix, ItemVisitor visit);

/* ---- the signals ---- */

void transcode_traces(const u8 *source_id, u32 source_length);
void transcode_logs(const u8 *source_id, u32 source_length);
void transcode_metrics(const u8 *source_id, u32 source_length);

/* ---- buf_reserve, inline: it is on every column ---- */

static inline void buf_reserve(Buf *b, u32 bytes) {
  if ((u64)b->pos + bytes > b->cap) buf_grow(b, bytes);
}

#endif
