/* Single fields, ids and timestamps (pipeline/otlp/fields.ts). */
#include "sluice.h"

Range find_bytes(u32 start, u32 end, u32 tag) {
  Range found = {start, start};
  P = start;
  while (P < end) {
    u32 t = rd_tag(end);
    if (t != tag) {
      rd_skip(t, end);
      continue;
    }
    u32 field_end = rd_len(end);
    found.start = P;
    found.end = field_end;
    P = field_end;
  }
  rd_expect_end(end);
  return found;
}

u32 find_fixed64(u32 start, u32 end, u32 tag) {
  u32 at = NONE;
  P = start;
  while (P < end) {
    u32 t = rd_tag(end);
    if (t == tag) at = rd_fixed64(end);
    else rd_skip(t, end);
  }
  rd_expect_end(end);
  return at;
}

void write_string_field(Buf *w, u32 start, u32 end, u32 tag) {
  Range field = find_bytes(start, end, tag);
  w_utf8(w, field.start, field.end);
}

/* Lowercase hex, or "" when the id is empty or all zero (traceutil.*IDToHexOrEmptyString). */
void write_id(Buf *w, u32 start, u32 end) {
  if (rd_is_zero(start, end - start)) w_empty_string(w);
  else w_hex(w, start, end);
}

/* The day of 2262-04-11T23:47:16.854775807Z, the last instant a DateTime64(9) holds. */
#define MAX_DATETIME64_DAY 106751u

u32 write_timestamp(Buf *w, u32 at) {
  if (at == NONE) {
    w_u64(w, 0);
    return 0;
  }
  u64 ns = u64_at(at);
  if (ns >> 63) {
    w_u64(w, 0x7fffffffffffffffull);
    return MAX_DATETIME64_DAY;
  }
  w_u64(w, ns);
  return (u32)(ns / 86400000000000ull);
}
