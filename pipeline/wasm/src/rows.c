/*
 * RowBinary columns (storage/rowbinary.ts) and the text of messages. A String column is a
 * LEB128 length then its bytes; string bytes are copied straight from the request, and checked
 * for valid UTF-8 as Node's isUtf8 checks them.
 */
#include "sluice.h"

void put_bytes(Buf *b, const u8 *s, u32 n) {
  buf_reserve(b, n);
  copy_bytes(b->data + b->pos, s, n);
  b->pos += n;
}

void put_text(Buf *b, const char *s) {
  u32 n = 0;
  while (s[n]) n++;
  put_bytes(b, (const u8 *)s, n);
}

void put_u64_text(Buf *b, u64 v) {
  u8 digits[20];
  u32 n = 0;
  do {
    digits[19 - n++] = (u8)('0' + v % 10);
    v /= 10;
  } while (v);
  put_bytes(b, digits + 20 - n, n);
}

void put_u32_text(Buf *b, u32 v) { put_u64_text(b, v); }

void put_i64_text(Buf *b, i64 v) {
  if (v < 0) {
    put_bytes(b, (const u8 *)"-", 1);
    put_u64_text(b, (u64)0 - (u64)v);
  } else {
    put_u64_text(b, (u64)v);
  }
}

void put_json_quoted(Buf *b, const u8 *s, u32 n, int go) {
  static const char HEX[] = "0123456789abcdef";
  buf_reserve(b, n + 2);
  b->data[b->pos++] = '"';
  u32 run = 0; /* bytes copied as they are, not yet written */
  for (u32 i = 0; i < n; i++) {
    u8 c = s[i];
    const char *escape = 0;
    u8 u[6];
    if (c == '"') escape = "\\\"";
    else if (c == '\\') escape = "\\\\";
    else if (c < 0x20) {
      switch (c) {
        case '\b': escape = "\\b"; break;
        case '\t': escape = "\\t"; break;
        case '\n': escape = "\\n"; break;
        case '\f': escape = "\\f"; break;
        case '\r': escape = "\\r"; break;
        default:
          u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0'; u[4] = (u8)HEX[c >> 4]; u[5] = (u8)HEX[c & 15];
      }
    } else if (go && c == 0xe2 && i + 2 < n && s[i + 1] == 0x80 && (s[i + 2] == 0xa8 || s[i + 2] == 0xa9)) {
      escape = s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029";
    } else {
      run++;
      continue;
    }
    put_bytes(b, s + i - run, run);
    run = 0;
    if (escape) put_text(b, escape);
    else put_bytes(b, u, 6);
    if (go && c == 0xe2) i += 2; /* the rest of U+2028 or U+2029 */
  }
  put_bytes(b, s + n - run, run);
  buf_reserve(b, 1);
  b->data[b->pos++] = '"';
}

/* Whether s[0, n) is valid UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
int utf8_valid(const u8 *s, u32 n) {
  u32 i = 0;
  while (i < n) {
    /* ASCII eight bytes at a time */
    while (i + 8 <= n) {
      u64 word;
      __builtin_memcpy(&word, s + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    u8 c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c < 0xc2 || c > 0xf4) return 0;
    u32 length = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    if (i + length > n) return 0;
    u8 second = s[i + 1];
    u8 low = 0x80, high = 0xbf;
    if (c == 0xe0) low = 0xa0;
    else if (c == 0xed) high = 0x9f;
    else if (c == 0xf0) low = 0x90;
    else if (c == 0xf4) high = 0x8f;
    if (second < low || second > high) return 0;
    for (u32 k = 2; k < length; k++)
      if ((s[i + k] & 0xc0) != 0x80) return 0;
    i += length;
  }
  return 1;
}

void w_raw(Buf *w, const u8 *src, u32 n) {
  put_bytes(w, src, n);
}

void w_utf8(Buf *w, u32 start, u32 end) {
  u32 n = end - start;
  const u8 *s = R + start;
  buf_reserve(w, n + 5);
  u8 *d = w->data;
  u32 pos = w->pos;
  if (n < 0x80) {
    d[pos++] = (u8)n;
    /* Copy and look for a byte >= 0x80 at once, eight bytes at a time. */
    u64 high = 0;
    u32 i = 0;
    for (; i + 8 <= n; i += 8) {
      u64 word;
      __builtin_memcpy(&word, s + i, 8);
      high |= word;
      __builtin_memcpy(d + pos + i, &word, 8);
    }
    for (; i < n; i++) {
      high |= s[i];
      d[pos + i] = s[i];
    }
    w->pos = pos + n;
    if ((high & 0x8080808080808080ull) && !utf8_valid(s, n)) refuse_text("invalid UTF-8 in a protobuf string field");
    return;
  }
  w->pos = pos;
  w_var_uint(w, n);
  if (!utf8_valid(s, n)) refuse_text("invalid UTF-8 in a protobuf string field");
  copy_bytes(w->data + w->pos, s, n);
  w->pos += n;
}

void w_encoded(Buf *w, const u8 *s, u32 n) {
  w_var_uint(w, n);
  put_bytes(w, s, n);
}

void w_hex(Buf *w, u32 start, u32 end) {
  static const char DIGITS[] = "0123456789abcdef";
  u32 n = (end - start) * 2;
  w_var_uint(w, n);
  buf_reserve(w, n);
  u8 *d = w->data + w->pos;
  for (u32 i = start; i < end; i++) {
    *d++ = (u8)DIGITS[R[i] >> 4];
    *d++ = (u8)DIGITS[R[i] & 15];
  }
  w->pos += n;
}

void w_i64_decimal(Buf *w, i64 v) {
  u8 text[21];
  u32 n = 0;
  u64 u = v < 0 ? (u64)0 - (u64)v : (u64)v;
  do {
    text[20 - n++] = (u8)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) text[20 - n++] = '-';
  w_encoded(w, text + 21 - n, n);
}

static u32 base64_length(u32 n) {
  u64 length = ((u64)n + 2) / 3 * 4;
  if (length > 0xfffffff0ull) out_of_memory();
  return (u32)length;
}

void w_base64(Buf *w, u32 start, u32 end) {
  w_var_uint(w, base64_length(end - start));
  put_base64(w, start, end);
}

void put_base64(Buf *w, u32 start, u32 end) {
  static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  u32 n = end - start;
  u32 length = base64_length(n);
  buf_reserve(w, length);
  u8 *d = w->data + w->pos;
  const u8 *s = R + start;
  u32 i = 0;
  for (; i + 3 <= n; i += 3) {
    u32 bits = (u32)s[i] << 16 | (u32)s[i + 1] << 8 | s[i + 2];
    *d++ = (u8)ALPHABET[bits >> 18];
    *d++ = (u8)ALPHABET[(bits >> 12) & 63];
    *d++ = (u8)ALPHABET[(bits >> 6) & 63];
    *d++ = (u8)ALPHABET[bits & 63];
  }
  if (n - i == 1) {
    u32 bits = (u32)s[i] << 16;
    *d++ = (u8)ALPHABET[bits >> 18];
    *d++ = (u8)ALPHABET[(bits >> 12) & 63];
    *d++ = '=';
    *d++ = '=';
  } else if (n - i == 2) {
    u32 bits = (u32)s[i] << 16 | (u32)s[i + 1] << 8;
    *d++ = (u8)ALPHABET[bits >> 18];
    *d++ = (u8)ALPHABET[(bits >> 12) & 63];
    *d++ = (u8)ALPHABET[(bits >> 6) & 63];
    *d++ = '=';
  }
  w->pos += length;
}
