/*
 * The protobuf wire-format reader (pipeline/otlp/wire.ts): one request at a time, so its state
 * is global. Every read is bounded by `end`, the end of the enclosing message; whatever runs
 * past it, a cut varint or an unknown wire type refuses the request with wire.ts's message.
 */
#include "sluice.h"

const u8 *R;
u32 R_LENGTH;
u32 P;
u64 V;

static _Noreturn void malformed(Buf *m) {
  refuse(m);
}

static Buf *malformed_message(const char *text) {
  Buf *m = message();
  put_text(m, "malformed protobuf: ");
  put_text(m, text);
  return m;
}

static _Noreturn void truncated(u32 at) {
  Buf *m = malformed_message("truncated at byte ");
  put_u32_text(m, at);
  malformed(m);
}

static _Noreturn void too_long_varint(u32 at) {
  Buf *m = malformed_message("varint longer than 10 bytes at byte ");
  put_u32_text(m, at);
  malformed(m);
}

_Noreturn void malformed_packed(u32 bytes, u32 at) {
  Buf *m = malformed_message("a packed 64-bit field of ");
  put_u32_text(m, bytes);
  put_text(m, " bytes at byte ");
  put_u32_text(m, at);
  malformed(m);
}

u32 rd_uint32(u32 end) {
  u32 pos = P;
  if (pos >= end) truncated(pos);
  u8 byte = R[pos++];
  if (byte < 0x80) {
    P = pos;
    return byte;
  }
  u32 value = byte & 0x7f;
  for (u32 shift = 7; shift < 70; shift += 7) {
    if (pos >= end) truncated(pos);
    byte = R[pos++];
    /* Bits past 32 are dropped: protobuf truncates a uint64 varint read as uint32. */
    if (shift < 32) value |= (u32)(byte & 0x7f) << shift;
    if (byte < 0x80) {
      P = pos;
      return value;
    }
  }
  too_long_varint(P);
}

u32 rd_tag(u32 end) {
  u32 tag = rd_uint32(end);
  u32 wire_type = tag & 7;
  if ((tag >> 3) == 0 || (wire_type != VARINT && wire_type != I64 && wire_type != LEN && wire_type != I32)) {
    Buf *m = malformed_message("invalid tag ");
    put_u32_text(m, tag);
    put_text(m, " at byte ");
    put_u32_text(m, P);
    malformed(m);
  }
  return tag;
}

void rd_varint64(u32 end) {
  u32 pos = P;
  u64 value = 0;
  for (u32 i = 0; i < 10; i++) {
    if (pos >= end) truncated(pos);
    u8 byte = R[pos++];
    value |= (u64)(byte & 0x7f) << (7 * i);
    if (byte < 0x80) {
      P = pos;
      V = value;
      return;
    }
  }
  too_long_varint(P);
}

u32 rd_len(u32 end) {
  u32 length = rd_uint32(end);
  u64 field_end = (u64)P + length;
  if (field_end > end) {
    Buf *m = malformed_message("a ");
    put_u32_text(m, length);
    put_text(m, "-byte field at byte ");
    put_u32_text(m, P);
    put_text(m, " runs past the end of its message");
    malformed(m);
  }
  return (u32)field_end;
}

u32 rd_fixed64(u32 end) {
  u32 at = P;
  if ((u64)at + 8 > end) truncated(at);
  P = at + 8;
  return at;
}

u32 rd_fixed32(u32 end) {
  u32 at = P;
  if ((u64)at + 4 > end) truncated(at);
  P = at + 4;
  return u32_at(at);
}

i32 rd_sint32(u32 end) {
  u32 n = rd_uint32(end);
  return (i32)((n >> 1) ^ (0u - (n & 1)));
}

void rd_skip(u32 tag, u32 end) {
  switch (tag & 7) {
    case VARINT: rd_uint32(end); return;
    case I64: rd_fixed64(end); return;
    case LEN: P = rd_len(end); return;
    default: rd_fixed32(end);
  }
}

void rd_expect_end(u32 end) {
  if (P != end) {
    Buf *m = malformed_message("a field runs past the end of its message at byte ");
    put_u32_text(m, end);
    malformed(m);
  }
}

u32 rd_seek(u32 from, u32 end, u32 tag) {
  /* Fast path: the field is right here with a one-byte length (tags here are one byte). */
  if ((u64)from + 2 <= end && R[from] == tag && R[from + 1] < 0x80 && (u64)from + 2 + R[from + 1] <= end) {
    P = from + 2;
    return from + 2 + R[from + 1];
  }
  P = from;
  while (P < end) {
    u32 t = rd_tag(end);
    if (t == tag) return rd_len(end);
    rd_skip(t, end);
  }
  return NONE;
}

int rd_is_zero(u32 at, u32 n) {
  for (u32 i = at; i < at + n; i++)
    if (R[i]) return 0;
  return 1;
}
