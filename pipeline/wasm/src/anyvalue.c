/*
 * Attributes and AnyValues as strings (pipeline/otlp/anyvalue.ts), and array and kvlist values
 * as JSON (anyvalue-json.ts): string as is, int in decimal, double as Go's float64AsString,
 * bool true/false, bytes in base64, arrays and kvlists as Go's encoding/json writes them
 * (keys sorted by their bytes, the last of a repeated key kept, a NaN or ±Inf anywhere making
 * the whole value ""), and an unset value "".
 */
#include "sluice.h"

#define KEY_VALUE_KEY TAG(1, LEN)
#define KEY_VALUE_VALUE TAG(2, LEN)
#define LIST_VALUES TAG(1, LEN)
#define ANY_STRING TAG(1, LEN)
#define ANY_BOOL TAG(2, VARINT)
#define ANY_INT TAG(3, VARINT)
#define ANY_DOUBLE TAG(4, I64)
#define ANY_ARRAY TAG(5, LEN)
#define ANY_KVLIST TAG(6, LEN)
#define ANY_BYTES TAG(7, LEN)

/* How deep array and kvlist values may nest (anyvalue-json.ts#MAX_ANYVALUE_DEPTH). */
#define MAX_ANYVALUE_DEPTH 100

static int is_any_value_tag(u32 tag) {
  return tag == ANY_STRING || tag == ANY_BOOL || tag == ANY_INT || tag == ANY_DOUBLE || tag == ANY_ARRAY || tag == ANY_KVLIST || tag == ANY_BYTES;
}

static double double_at(u32 at) {
  double v;
  __builtin_memcpy(&v, R + at, 8);
  return v;
}

/* ---- JSON of arrays and kvlists ---- */

/*
 * The JSON under construction (one value at a time), the kvlist entries of every level being
 * walked (a stack: each level's above the enclosing one's), and a sort's work space. Made once
 * per call, grown as needed; reused by every value.
 */
static Buf json, entries, order;
static int json_ready;

typedef struct {
  u32 key_start, key_end; /* in the request */
  u32 value_at, value_length; /* in `json`; value_at NONE: null */
} Entry;

void anyvalue_reset(void) {
  json_ready = 0;
}

static void json_init(void) {
  if (json_ready) return;
  buf_init(&json, 1024);
  buf_init(&entries, 64 * sizeof(Entry));
  buf_init(&order, 256);
  json_ready = 1;
}

static void put_char(Buf *b, u8 c) {
  buf_reserve(b, 1);
  b->data[b->pos++] = c;
}

static int value_json(u32 start, u32 end, u32 depth);

/* The values of an ArrayValue: [a,b,...]. Returns 0 when a NaN or ±Inf was met. */
static int array_json(u32 start, u32 end, u32 depth) {
  put_char(&json, '[');
  u32 next = start;
  int first = 1;
  for (;;) {
    u32 item_end = rd_seek(next, end, LIST_VALUES);
    if (item_end == NONE) break;
    if (!first) put_char(&json, ',');
    first = 0;
    if (!value_json(P, item_end, depth + 1)) return 0;
    next = item_end;
  }
  put_char(&json, ']');
  return 1;
}

static u32 utf8_key(u32 start, u32 end) {
  if (!utf8_valid(R + start, end - start)) refuse_text("invalid UTF-8 in a protobuf string field");
  return end;
}

/* Byte order of two keys; ties by their place, so the last of equal keys sorts last. */
static int entry_before(const Entry *list, u32 a, u32 b) {
  const Entry *x = list + a, *y = list + b;
  u32 n = x->key_end - x->key_start, m = y->key_end - y->key_start;
  u32 common = n < m ? n : m;
  for (u32 i = 0; i < common; i++) {
    u8 p = R[x->key_start + i], q = R[y->key_start + i];
    if (p != q) return p < q;
  }
  if (n != m) return n < m;
  return a < b;
}

static int same_key(const Entry *x, const Entry *y) {
  u32 n = x->key_end - x->key_start;
  if (n != y->key_end - y->key_start) return 0;
  for (u32 i = 0; i < n; i++)
    if (R[x->key_start + i] != R[y->key_start + i]) return 0;
  return 1;
}

/* Sorts index[0, n) by entry_before (a merge sort, tmp holds n more); returns where the sorted indexes are. */
static const u32 *sort_entries(const Entry *list, u32 *index, u32 *tmp, u32 n) {
  for (u32 width = 1; width < n; width *= 2) {
    for (u32 lo = 0; lo < n; lo += 2 * width) {
      u32 mid = lo + width < n ? lo + width : n;
      u32 hi = lo + 2 * width < n ? lo + 2 * width : n;
      u32 i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = entry_before(list, index[j], index[i]) ? index[j++] : index[i++];
      while (i < mid) tmp[k++] = index[i++];
      while (j < hi) tmp[k++] = index[j++];
    }
    u32 *swap = index;
    index = tmp;
    tmp = swap;
  }
  return index;
}

/* The entries of a KeyValueList: {"key":value,...}, keys in byte order, the last of a repeated key kept. */
static int kvlist_json(u32 start, u32 end, u32 depth) {
  u32 base = json.pos;
  u32 first_entry = entries.pos;
  u32 next = start;
  for (;;) {
    u32 entry_end = rd_seek(next, end, LIST_VALUES);
    if (entry_end == NONE) break;
    Entry e = {0, 0, NONE, 0};
    while (P < entry_end) {
      u32 tag = rd_tag(entry_end);
      if (tag == KEY_VALUE_KEY || tag == KEY_VALUE_VALUE) {
        u32 part_end = rd_len(entry_end);
        if (tag == KEY_VALUE_KEY) {
          e.key_start = P;
          e.key_end = utf8_key(P, part_end);
        } else {
          e.value_at = json.pos;
          if (!value_json(P, part_end, depth + 1)) return 0;
          e.value_length = json.pos - e.value_at;
        }
        P = part_end;
      } else {
        rd_skip(tag, entry_end);
      }
    }
    put_bytes(&entries, (const u8 *)&e, sizeof e);
    next = entry_end;
  }
  u32 count = (entries.pos - first_entry) / sizeof(Entry);
  const Entry *list = (const Entry *)(entries.data + first_entry);
  order.pos = 0;
  buf_reserve(&order, count * 2 * sizeof(u32));
  u32 *index = (u32 *)order.data, *tmp = index + count;
  for (u32 i = 0; i < count; i++) index[i] = i;
  const u32 *sorted = sort_entries(list, index, tmp, count);
  /* The object after the values written so far, then moved down to where this value starts. */
  u32 at = json.pos;
  put_char(&json, '{');
  int first = 1;
  for (u32 i = 0; i < count; i++) {
    const Entry *e = list + sorted[i];
    if (i + 1 < count && same_key(e, list + sorted[i + 1])) continue; /* a later one wins */
    if (!first) put_char(&json, ',');
    first = 0;
    put_json_quoted(&json, R + e->key_start, e->key_end - e->key_start, 1);
    put_char(&json, ':');
    if (e->value_at == NONE) put_text(&json, "null");
    else {
      buf_reserve(&json, e->value_length);
      copy_bytes(json.data + json.pos, json.data + e->value_at, e->value_length);
      json.pos += e->value_length;
    }
  }
  put_char(&json, '}');
  u32 length = json.pos - at;
  __builtin_memmove(json.data + base, json.data + at, length);
  json.pos = base + length;
  entries.pos = first_entry;
  return 1;
}

/* The JSON of one AnyValue in [start, end); 0 for a NaN or ±Inf. */
static int value_json(u32 start, u32 end, u32 depth) {
  if (depth > MAX_ANYVALUE_DEPTH) refuse_text("an attribute value is nested deeper than 100 levels");
  u32 tag = 0, at = 0;
  P = start;
  while (P < end) {
    u32 t = rd_tag(end);
    if (is_any_value_tag(t)) {
      tag = t;
      at = P;
    }
    rd_skip(t, end);
  }
  P = at;
  switch (tag) {
    case ANY_STRING: {
      u32 string_end = rd_len(end);
      utf8_key(P, string_end);
      put_json_quoted(&json, R + P, string_end - P, 1);
      return 1;
    }
    case ANY_BOOL:
      rd_varint64(end);
      put_text(&json, V ? "true" : "false");
      return 1;
    case ANY_INT:
      rd_varint64(end);
      put_i64_text(&json, (i64)V);
      return 1;
    case ANY_DOUBLE: {
      double value = double_at(rd_fixed64(end));
      if (value - value != 0) return 0; /* NaN or ±Inf: Go's encoder refuses them */
      u8 text[32];
      put_bytes(&json, text, format_double(value, text));
      return 1;
    }
    case ANY_BYTES: {
      u32 bytes_end = rd_len(end);
      put_char(&json, '"');
      put_base64(&json, P, bytes_end);
      put_char(&json, '"');
      return 1;
    }
    case ANY_ARRAY:
    case ANY_KVLIST: {
      u32 list_end = rd_len(end);
      return tag == ANY_ARRAY ? array_json(P, list_end, depth) : kvlist_json(P, list_end, depth);
    }
    default:
      put_text(&json, "null"); /* unset, or only unknown fields */
      return 1;
  }
}

/* An array or kvlist value as a String column: its JSON, or "" if it holds a NaN or ±Inf. */
static void write_list_json(Buf *w, int is_array, u32 start, u32 end) {
  json_init();
  json.pos = 0;
  entries.pos = 0;
  int ok = is_array ? array_json(start, end, 0) : kvlist_json(start, end, 0);
  if (ok) w_encoded(w, json.data, json.pos);
  else w_empty_string(w);
}

/* ---- values as String columns ---- */

/* Writes one AnyValue field whose tag was read; P is at its payload. */
static void write_value_field(Buf *w, u32 tag, u32 end) {
  switch (tag) {
    case ANY_STRING: {
      u32 string_end = rd_len(end);
      w_utf8(w, P, string_end);
      return;
    }
    case ANY_INT:
      rd_varint64(end);
      w_i64_decimal(w, (i64)V);
      return;
    case ANY_BOOL:
      rd_varint64(end);
      if (V) w_encoded(w, (const u8 *)"true", 4);
      else w_encoded(w, (const u8 *)"false", 5);
      return;
    case ANY_DOUBLE:
      w_go_float(w, double_at(rd_fixed64(end)));
      return;
    case ANY_BYTES: {
      u32 bytes_end = rd_len(end);
      w_base64(w, P, bytes_end);
      return;
    }
    case ANY_ARRAY:
    case ANY_KVLIST: {
      u32 value_end = rd_len(end);
      write_list_json(w, tag == ANY_ARRAY, P, value_end);
      return;
    }
    default:
      w_empty_string(w); /* no value set */
  }
}

void write_any_value(Buf *w, u32 start, u32 end) {
  if (start == end) {
    w_empty_string(w);
    P = end;
    return;
  }
  /* Fast path: a lone string value with a one-byte length, the common attribute. */
  if ((u64)start + 2 <= end && R[start] == ANY_STRING && R[start + 1] < 0x80 && start + 2 + R[start + 1] == end) {
    w_utf8(w, start + 2, end);
    P = end;
    return;
  }
  /* A oneof on the wire: the last value field wins. */
  u32 tag = 0, at = 0;
  P = start;
  while (P < end) {
    u32 t = rd_tag(end);
    if (is_any_value_tag(t)) {
      tag = t;
      at = P;
    }
    rd_skip(t, end);
  }
  rd_expect_end(end);
  P = at;
  write_value_field(w, tag, end);
  P = end;
}

/* One KeyValue as a Map entry: the key, then the value as a string ("" for either when absent). */
static void write_key_value(Buf *w, u32 start, u32 end) {
  /* Fast path: key then value, each with a one-byte length, as SDKs write them. */
  if ((u64)start + 2 <= end && R[start] == KEY_VALUE_KEY && R[start + 1] < 0x80) {
    u32 key_end = start + 2 + R[start + 1];
    if ((u64)key_end + 2 <= end && R[key_end] == KEY_VALUE_VALUE && R[key_end + 1] < 0x80 && key_end + 2 + R[key_end + 1] == end) {
      w_utf8(w, start + 2, key_end);
      write_any_value(w, key_end + 2, end);
      return;
    }
  }
  P = start;
  u32 key_start = start, key_end = start, value_start = end, value_end = end;
  while (P < end) {
    u32 tag = rd_tag(end);
    if (tag == KEY_VALUE_KEY) {
      key_end = rd_len(end);
      key_start = P;
      P = key_end;
    } else if (tag == KEY_VALUE_VALUE) {
      value_end = rd_len(end);
      value_start = P;
      P = value_end;
    } else {
      rd_skip(tag, end);
    }
  }
  rd_expect_end(end);
  w_utf8(w, key_start, key_end);
  write_any_value(w, value_start, value_end);
}

u32 count_fields(u32 start, u32 end, u32 tag) {
  u32 count = 0;
  P = start;
  while (P < end) {
    u32 t = rd_tag(end);
    if (t == tag) count++;
    rd_skip(t, end);
  }
  rd_expect_end(end);
  return count;
}

/*
 * The fast path's second half: writes the key [key_start, key_end) and the value whose AnyValue
 * runs from key_end + 2 to end, if it is one string, int (up to 4 bytes), bool or double field;
 * returns 0 (having written nothing) for anything else.
 */
static int write_scalar_attribute(Buf *w, u32 key_start, u32 key_end, u32 end) {
  if (key_end + 3 > end) return 0;
  u32 value_at = key_end + 3; /* the value field's payload, after the AnyValue's tag */
  switch (R[key_end + 2]) {
    case ANY_STRING:
      if (value_at >= end || R[value_at] >= 0x80 || value_at + 1 + R[value_at] != end) return 0;
      w_utf8(w, key_start, key_end);
      w_utf8(w, value_at + 1, end);
      return 1;
    case ANY_INT: {
      u32 bytes = end - value_at;
      if (bytes < 1 || bytes > 4 || R[end - 1] >= 0x80) return 0;
      u32 value = 0;
      for (u32 at = end; at-- > value_at;) {
        if (at < end - 1 && R[at] < 0x80) return 0; /* a varint ends at its first byte < 0x80 */
        value = value << 7 | (R[at] & 0x7f);
      }
      w_utf8(w, key_start, key_end);
      w_i64_decimal(w, value);
      return 1;
    }
    case ANY_BOOL:
      if (end != value_at + 1 || R[value_at] > 1) return 0;
      w_utf8(w, key_start, key_end);
      if (R[value_at]) w_encoded(w, (const u8 *)"true", 4);
      else w_encoded(w, (const u8 *)"false", 5);
      return 1;
    case ANY_DOUBLE:
      if (end != value_at + 8) return 0;
      w_utf8(w, key_start, key_end);
      w_go_float(w, double_at(value_at));
      return 1;
    default:
      return 0;
  }
}

void write_attributes(Buf *w, u32 first, u32 end, u32 tag, u32 count) {
  w_var_uint(w, count);
  u32 next = first;
  for (u32 i = 0; i < count; i++) {
    /*
     * Fast path, the layout SDKs write, all lengths below 128:
     *   tag len { 0x0a keyLen key 0x12 valueLen { one scalar value field } }
     */
    if ((u64)next + 4 <= end && R[next] == tag && R[next + 2] == KEY_VALUE_KEY && (R[next + 1] | R[next + 3]) < 0x80) {
      u32 field_end = next + 2 + R[next + 1];
      u32 key_end = next + 4 + R[next + 3];
      if (field_end <= end && key_end + 2 <= field_end && R[key_end] == KEY_VALUE_VALUE && R[key_end + 1] < 0x80
          && key_end + 2 + R[key_end + 1] == field_end && write_scalar_attribute(w, next + 4, key_end, field_end)) {
        next = field_end;
        continue;
      }
    }
    u32 kv_end = rd_seek(next, end, tag);
    write_key_value(w, P, kv_end);
    next = kv_end;
  }
}

void write_all_attributes(Buf *w, u32 start, u32 end, u32 tag) {
  write_attributes(w, start, end, tag, count_fields(start, end, tag));
}

int find_attribute(u32 start, u32 end, u32 tag, const u8 *key, u32 key_length, u32 *value_start, u32 *value_end) {
  u32 next = start;
  for (;;) {
    u32 field_end = rd_seek(next, end, tag);
    if (field_end == NONE) return 0;
    int key_matches = 0;
    u32 vs = field_end, ve = field_end;
    while (P < field_end) {
      u32 t = rd_tag(field_end);
      if (t == KEY_VALUE_KEY || t == KEY_VALUE_VALUE) {
        u32 part_end = rd_len(field_end);
        if (t == KEY_VALUE_KEY) {
          key_matches = part_end - P == key_length;
          for (u32 i = 0; key_matches && i < key_length; i++) key_matches = R[P + i] == key[i];
        } else {
          vs = P;
          ve = part_end;
        }
        P = part_end;
      } else {
        rd_skip(t, field_end);
      }
    }
    if (key_matches) {
      *value_start = vs;
      *value_end = ve;
      return 1;
    }
    next = field_end;
  }
}
