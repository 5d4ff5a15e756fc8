/*
 * The rows of a call, per table (storage/table-rows.ts): each table's rows are written into a
 * buffer of their own; once they pass the largest chunk the caller asked for, they leave as a
 * chunk through emit_chunk (the loader copies them out of the module's memory) and the buffer
 * starts again, so a table's rows never hold more than about a chunk here. Each table also
 * counts the days its rows fall on (its partitions), and the items refused one by one.
 */
#include "sluice.h"

__attribute__((import_module("env"), import_name("emit_chunk")))
extern void emit_chunk(u32 table, u32 rows, const u8 *data, u32 length);

/* The most days one request's rows may span per table (storage/schema.ts#MAX_REQUEST_PARTITIONS). */
#define MAX_REQUEST_PARTITIONS 100
/* Days up to the last a DateTime64(9) holds (2262-04-11), one bit each. */
#define DAY_BITS (106752 / 8)

static TableOutput *tables[TABLE_COUNT];
static double max_chunk;
static u32 rejected;
static Buf *first_rejection;

void output_reset(double max_chunk_bytes) {
  for (u32 i = 0; i < TABLE_COUNT; i++) tables[i] = 0;
  result.table_count = 0;
  max_chunk = max_chunk_bytes;
  rejected = 0;
  first_rejection = 0;
}

TableOutput *output_table(u32 table) {
  TableOutput *t = tables[table];
  if (t) return t;
  t = arena_alloc(sizeof(TableOutput));
  buf_init(&t->w, 64 * 1024);
  t->table = table;
  t->rows = t->sealed_rows = t->row_day = t->partitions = 0;
  t->days = arena_alloc(DAY_BITS);
  __builtin_memset(t->days, 0, DAY_BITS);
  result.tables[result.table_count++] = table;
  tables[table] = t;
  return t;
}

void table_row_day(TableOutput *t, u32 day) {
  t->row_day = day;
}

static void seal(TableOutput *t) {
  emit_chunk(t->table, t->rows - t->sealed_rows, t->w.data, t->w.pos);
  t->sealed_rows = t->rows;
  t->w.pos = 0;
}

void table_end_row(TableOutput *t) {
  t->rows++;
  u8 *byte = t->days + (t->row_day >> 3);
  u8 bit = (u8)(1u << (t->row_day & 7));
  if (!(*byte & bit)) {
    *byte |= bit;
    t->partitions++;
  }
  if ((double)t->w.pos >= max_chunk) seal(t);
}

Buf *output_reject(void) {
  if (rejected++ > 0) return 0;
  first_rejection = message();
  return first_rejection;
}

void output_finish(u32 accepted) {
  for (u32 i = 0; i < result.table_count; i++) {
    TableOutput *t = tables[result.tables[i]];
    if (t->partitions > MAX_REQUEST_PARTITIONS) {
      result.status = TOO_MANY_PARTITIONS;
      result.partition_table = t->table;
      result.partition_count = t->partitions;
      return;
    }
  }
  for (u32 i = 0; i < result.table_count; i++) {
    TableOutput *t = tables[result.tables[i]];
    if (t->rows > t->sealed_rows) seal(t);
  }
  result.accepted = accepted;
  result.rejected = rejected;
  result.message_length = 0;
  if (first_rejection) {
    if (rejected > 1) {
      put_text(first_rejection, " (and ");
      put_u32_text(first_rejection, rejected - 1);
      put_text(first_rejection, " more)");
    }
    result.message = (u32)(uintptr_t)first_rejection->data;
    result.message_length = first_rejection->pos;
  }
  result.status = DONE;
}
