/*
 * A measuring prototype, not part of Sluice: pipeline/otlp/traces.ts (protobuf
 * ExportTraceServiceRequest -> otel_traces RowBinary) written in C, to see what a native
 * transcoder would gain over the JavaScript one. It writes the same bytes for the requests
 * the bench sends: string, int, bool and double attributes, events, links. Anything else
 * (bytes, array and kvlist values, refused spans, malformed input) returns -1, where a
 * product would fall back to the JavaScript path.
 *
 * Built as a Node-API addon with gcc alone (bench/native/build.sh) and as WebAssembly with
 * clang alone (bench/native/build-wasm.sh); bench/native/bench.ts runs both against the
 * JavaScript transcoder on the same requests and compares the bytes.
 */
#include <stddef.h>
#include <stdint.h>
#ifdef __wasm__
/*
 * WebAssembly (bench/native/build-wasm.sh: clang --target=wasm32, no libc): the few libc and
 * libm functions used here, on wasm's own instructions. fma has no wasm instruction: the
 * product's rounding error comes from Dekker's split, as pipeline/otlp/go-format.ts does.
 */
/* Copies here are short (strings of a few dozen bytes): a loop, where memory.copy is a call out of wasm. */
static inline void *copy_bytes(void *to, const void *from, size_t n) {
  uint8_t *d = to;
  const uint8_t *f = from;
  for (; n >= 8; n -= 8, d += 8, f += 8) { uint64_t w; __builtin_memcpy(&w, f, 8); __builtin_memcpy(d, &w, 8); }
  while (n--) *d++ = *f++;
  return to;
}
#define memcpy copy_bytes
#define floor __builtin_floor
#define fabs __builtin_fabs
#define nearbyint __builtin_nearbyint
static size_t strlen(const char *s) { size_t n = 0; while (s[n]) n++; return n; }
static int memcmp(const void *a, const void *b, size_t n) {
  const uint8_t *x = a, *y = b;
  for (size_t i = 0; i < n; i++) if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}
/* m = f * 2^e with 0.5 <= f < 1, for a positive normal m. */
static double frexp(double m, int *e) {
  uint64_t bits;
  memcpy(&bits, &m, 8);
  *e = (int)((bits >> 52) & 0x7ff) - 1022;
  bits = (bits & 0x800fffffffffffffULL) | (1022ULL << 52);
  memcpy(&m, &bits, 8);
  return m;
}
/* x * 2^e for x = 1.0 and a normal result. */
static double ldexp(double x, int e) {
  uint64_t bits = (uint64_t)(e + 1023) << 52;
  double p;
  memcpy(&p, &bits, 8);
  return x * p;
}
/* fmod(f, 2) for an integral f: 0 or 1. */
static double fmod(double f, double two) { return f - two * floor(f / two); }
/* a * b + c exactly for c = -(a * b rounded): the product's error, by Dekker's split. */
static double fma(double a, double b, double c) {
  const double split = 134217729.0;
  double t = split * a, ah = t - (t - a), al = a - ah;
  t = split * b;
  double bh = t - (t - b), bl = b - bh;
  return ((ah * bh + c) + ah * bl + al * bh) + al * bl;
}
#else
#include <node_api.h>
#include <math.h>
#include <string.h>
#endif

typedef struct {
  uint8_t *buf;
  size_t pos, cap;
  int fail;
} Out;

#define LEN(n) (((n) << 3) | 2)
#define I64(n) (((n) << 3) | 1)
#define VAR(n) ((n) << 3)

static int room(Out *w, size_t n) {
  if (w->pos + n > w->cap) w->fail = 1;
  return !w->fail;
}
static void put(Out *w, const uint8_t *p, size_t n) {
  if (room(w, n)) { memcpy(w->buf + w->pos, p, n); w->pos += n; }
}
static void put_varuint(Out *w, uint64_t v) {
  if (!room(w, 10)) return;
  while (v >= 0x80) { w->buf[w->pos++] = (uint8_t)(v | 0x80); v >>= 7; }
  w->buf[w->pos++] = (uint8_t)v;
}
static void put_u64(Out *w, uint64_t v) {
  if (room(w, 8)) { memcpy(w->buf + w->pos, &v, 8); w->pos += 8; } /* x86-64: little-endian */
}

/* ---- protobuf reading: every read bounded by `end`; *bad set on any malformation ---- */

static uint64_t varint(const uint8_t *b, size_t *p, size_t end, int *bad) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*p >= end) { *bad = 1; return 0; }
    uint8_t byte = b[(*p)++];
    v |= (uint64_t)(byte & 0x7f) << shift;
    if (byte < 0x80) return v;
  }
  *bad = 1;
  return 0;
}

/* Steps over the field whose tag was read; for LEN fields sets [*s, *e). */
static int field(const uint8_t *b, size_t *p, size_t end, uint32_t tag, size_t *s, size_t *e) {
  int bad = 0;
  switch (tag & 7) {
    case 0: varint(b, p, end, &bad); return !bad;
    case 1: if (*p + 8 > end) return 0; *s = *p; *p += 8; return 1;
    case 5: if (*p + 4 > end) return 0; *p += 4; return 1;
    case 2: {
      uint64_t n = varint(b, p, end, &bad);
      if (bad || n > end - *p) return 0;
      *s = *p; *e = *p + n; *p = *e;
      return 1;
    }
    default: return 0;
  }
}

/* ---- column encodings ---- */

static int utf8_valid(const uint8_t *s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) { /* ASCII eight bytes at a time */
    uint64_t word;
    memcpy(&word, s + i, 8);
    if (word & 0x8080808080808080ULL) break;
  }
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) { i++; continue; }
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (len == 0 || c > 0xf4 || i + len > n) return 0;
    for (size_t k = 1; k < len; k++) if ((s[i + k] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && s[i + 1] < 0xa0) return 0;
    if (c == 0xed && s[i + 1] > 0x9f) return 0;
    if (c == 0xf0 && s[i + 1] < 0x90) return 0;
    if (c == 0xf4 && s[i + 1] > 0x8f) return 0;
    i += len;
  }
  return 1;
}

static void put_string(Out *w, const uint8_t *s, size_t n) {
  if (!utf8_valid(s, n)) { w->fail = 1; return; }
  put_varuint(w, n);
  put(w, s, n);
}

static void put_hex_id(Out *w, const uint8_t *s, size_t n) {
  static const char digits[] = "0123456789abcdef";
  int zero = 1;
  for (size_t i = 0; i < n; i++) if (s[i]) { zero = 0; break; }
  if (zero) { put_varuint(w, 0); return; }
  put_varuint(w, n * 2);
  if (!room(w, n * 2)) return;
  for (size_t i = 0; i < n; i++) {
    w->buf[w->pos++] = digits[s[i] >> 4];
    w->buf[w->pos++] = digits[s[i] & 15];
  }
}

static void put_decimal_text(Out *w, int64_t v) {
  char tmp[24];
  int n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do { tmp[n++] = (char)('0' + u % 10); u /= 10; } while (u);
  if (v < 0) tmp[n++] = '-';
  put_varuint(w, (uint64_t)n);
  if (!room(w, (size_t)n)) return;
  while (n) w->buf[w->pos++] = (uint8_t)tmp[--n];
}

/*
 * The shortest decimal that reads back as m (1e-6 <= m < 1e15), as go-format.ts finds it:
 * up to 15 digits by an exact division test, else the nearest 16-digit decimal if within half
 * an ulp, else the nearest 17-digit one (fma gives the product's exact error). Returns the
 * digit count (digits in d[]) and the point position, or 0 when not decided (product: String()).
 */
static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int digits_of(uint64_t v, int count, char *d) {
  for (int i = count - 1; i >= 0; i--) { d[i] = (char)('0' + v % 10); v /= 10; }
  while (count > 1 && d[count - 1] == '0') count--;
  return count;
}

static int shortest(double m, char *d, int *point) {
  int e2;
  frexp(m, &e2);
  int scale = 14 - (int)floor((e2 - 1) * 0.30102999566398114);
  double d15 = nearbyint(m * POW10[scale]);
  if (d15 >= 1e15) d15 = nearbyint(m * POW10[--scale]);
  else if (d15 < 1e14) d15 = nearbyint(m * POW10[++scale]);
  if (scale < 0 || scale > 20) return 0;
  *point = 15 - scale;
  if (d15 / POW10[scale] == m) return digits_of((uint64_t)d15, 15, d);
  uint64_t bits;
  memcpy(&bits, &m, 8);
  if ((bits & 0xfffffffffffffULL) == 0) return 0; /* a power of two */
  double half_ulp = ldexp(1.0, e2 - 54);
  double p16 = m * POW10[scale + 1], err16 = fma(m, POW10[scale + 1], -p16);
  double f = floor(p16), frac = p16 - f;
  int off = 0;
  if (frac - 0.5 > -err16) off = 1;
  else if (frac + 0.5 < -err16) off = -1;
  else if (frac - 0.5 == -err16) off = fmod(f, 2) == 0 ? 0 : 1;
  else if (frac + 0.5 == -err16) off = fmod(f, 2) == 0 ? 0 : -1;
  double dist = fabs(off - frac - err16), gap = half_ulp * POW10[scale + 1];
  if (dist < gap * (1 - 1e-12)) return digits_of((uint64_t)f + off, 16, d);
  if (dist <= gap * (1 + 1e-12)) return 0;
  double p17 = m * POW10[scale + 2], err17 = fma(m, POW10[scale + 2], -p17);
  double r = nearbyint(err17); /* ties to even; p17 is even */
  return digits_of((uint64_t)p17 + (int64_t)r, 17, d);
}

static int put_double(Out *w, double v) {
  double m = fabs(v);
  char d[17];
  int point, n;
  if (!(m >= 1e-6 && m < 1e15) || (n = shortest(m, d, &point)) == 0) return 0;
  uint8_t text[32];
  size_t k = 0;
  if (v < 0) text[k++] = '-';
  if (point <= 0) {
    text[k++] = '0'; text[k++] = '.';
    for (int i = point; i < 0; i++) text[k++] = '0';
    for (int i = 0; i < n; i++) text[k++] = (uint8_t)d[i];
  } else {
    for (int i = 0; i < n; i++) { if (i == point) text[k++] = '.'; text[k++] = (uint8_t)d[i]; }
    for (int i = n; i < point; i++) text[k++] = '0';
  }
  put_varuint(w, k);
  put(w, text, k);
  return 1;
}

/* An AnyValue as its string: string, int, bool, double; 0 for the kinds left to JavaScript. */
static int put_any_value(Out *w, const uint8_t *b, size_t s, size_t e) {
  size_t p = s, vs = 0, ve = 0;
  uint32_t tag = 0;
  int bad = 0;
  while (p < e) { /* a oneof: the last value field wins */
    uint32_t t = (uint32_t)varint(b, &p, e, &bad);
    size_t at = p, fs = 0, fe = 0;
    if (bad || !field(b, &p, e, t, &fs, &fe)) return 0;
    if (t == LEN(1) || t == VAR(2) || t == VAR(3) || t == I64(4)) { tag = t; vs = (t & 7) == 2 ? fs : at; ve = (t & 7) == 2 ? fe : p; }
    else if (t == LEN(5) || t == LEN(6) || t == LEN(7)) return 0;
  }
  if (tag == 0) { put_varuint(w, 0); return 1; }
  if (tag == LEN(1)) { put_string(w, b + vs, ve - vs); return 1; }
  if (tag == I64(4)) { double v; memcpy(&v, b + vs, 8); return put_double(w, v); }
  size_t q = vs;
  uint64_t v = varint(b, &q, ve, &bad);
  if (tag == VAR(2)) { if (v) put(w, (const uint8_t *)"\4true", 5); else put(w, (const uint8_t *)"\5false", 6); return 1; }
  put_decimal_text(w, (int64_t)v);
  return 1;
}

/* Map(String, String) from the KeyValues with `tag` in [s, e); count < 0: count them first. */
static int put_attributes_counted(Out *w, const uint8_t *b, size_t s, size_t e, uint32_t tag, long count) {
  size_t p = s, fs, fe;
  int bad = 0;
  if (count < 0) {
    count = 0;
    while (p < e) {
      uint32_t t = (uint32_t)varint(b, &p, e, &bad);
      if (bad || !field(b, &p, e, t, &fs, &fe)) return 0;
      if (t == tag) count++;
    }
    p = s;
  }
  put_varuint(w, (uint64_t)count);
  for (long done = 0; p < e && done < count;) {
    uint32_t t = (uint32_t)varint(b, &p, e, &bad);
    if (!field(b, &p, e, t, &fs, &fe)) return 0;
    if (t != tag) continue;
    done++;
    size_t q = fs, ks = fs, ke = fs, vs = fe, ve = fe, s2, e2;
    while (q < fe) {
      uint32_t t2 = (uint32_t)varint(b, &q, fe, &bad);
      if (bad || !field(b, &q, fe, t2, &s2, &e2)) return 0;
      if (t2 == LEN(1)) { ks = s2; ke = e2; } else if (t2 == LEN(2)) { vs = s2; ve = e2; }
    }
    put_string(w, b + ks, ke - ks);
    if (vs == ve) put_varuint(w, 0);
    else if (!put_any_value(w, b, vs, ve)) return 0;
  }
  return !w->fail;
}

static int put_attributes(Out *w, const uint8_t *b, size_t s, size_t e, uint32_t tag) {
  return put_attributes_counted(w, b, s, e, tag, -1);
}

static const char *KINDS[] = {"Unspecified", "Internal", "Server", "Client", "Producer", "Consumer"};
static const char *CODES[] = {"Unset", "Ok", "Error"};

static void put_text(Out *w, const char *s) {
  size_t n = strlen(s);
  put_varuint(w, n);
  put(w, (const uint8_t *)s, n);
}

/* One span's row after the prefix; 0 to leave the request to JavaScript. */
static int put_span(Out *w, const uint8_t *b, size_t s, size_t e, const uint8_t *prefix, size_t prefix_len) {
  size_t tid_s = s, tid_e = s, sid_s = s, sid_e = s, par_s = s, par_e = s, st_s = s, st_e = s;
  size_t name_s = s, name_e = s, stat_s = s, stat_e = s, start_at = 0, end_at = 0, fs, fe;
  int kind = 0, has_start = 0, has_end = 0, bad = 0, events = 0, links = 0;
  long attributes = 0;
  size_t p = s, attributes_at = s, events_at = s, links_at = s;
  while (p < e) {
    size_t at = p;
    uint32_t t = (uint32_t)varint(b, &p, e, &bad);
    if (t == VAR(6)) { kind = (int)varint(b, &p, e, &bad); if (bad) return 0; continue; }
    if (bad || !field(b, &p, e, t, &fs, &fe)) return 0;
    switch (t) {
      case LEN(1): tid_s = fs; tid_e = fe; break;
      case LEN(2): sid_s = fs; sid_e = fe; break;
      case LEN(3): st_s = fs; st_e = fe; break;
      case LEN(4): par_s = fs; par_e = fe; break;
      case LEN(5): name_s = fs; name_e = fe; break;
      case I64(7): start_at = fs; has_start = 1; break;
      case I64(8): end_at = fs; has_end = 1; break;
      case LEN(9): if (attributes++ == 0) attributes_at = at; break;
      case LEN(11): if (events++ == 0) events_at = at; break;
      case LEN(13): if (links++ == 0) links_at = at; break;
      case LEN(15): stat_s = fs; stat_e = fe; break;
    }
  }
  if (tid_e - tid_s != 16 || sid_e - sid_s != 8 || (par_e - par_s != 0 && par_e - par_s != 8)) return 0;
  put(w, prefix, prefix_len);
  uint64_t start = 0, end = 0;
  if (has_start) memcpy(&start, b + start_at, 8);
  if (has_end) memcpy(&end, b + end_at, 8);
  put_u64(w, start);
  put_hex_id(w, b + tid_s, 16);
  put_hex_id(w, b + sid_s, 8);
  put_hex_id(w, b + par_s, par_e - par_s);
  put_string(w, b + st_s, st_e - st_s);
  put_string(w, b + name_s, name_e - name_s);
  if (kind >= 0 && kind < 6) put_text(w, KINDS[kind]); else put_varuint(w, 0);
  if (!put_attributes_counted(w, b, attributes_at, e, LEN(9), attributes)) return 0;
  put_u64(w, has_start && has_end && end >= start ? end - start : 0);
  /* Status: code, then message. */
  size_t q = stat_s, ms = stat_s, me = stat_s;
  uint64_t code = 0;
  while (q < stat_e) {
    uint32_t t = (uint32_t)varint(b, &q, stat_e, &bad);
    if (t == VAR(3)) { code = varint(b, &q, stat_e, &bad); if (bad) return 0; continue; }
    if (bad || !field(b, &q, stat_e, t, &fs, &fe)) return 0;
    if (t == LEN(2)) { ms = fs; me = fe; }
  }
  if (code < 3) put_text(w, CODES[code]); else put_varuint(w, 0);
  put_string(w, b + ms, me - ms);
  /* Events.Timestamp, Events.Name, Events.Attributes; then the four Links columns. */
  for (int column = 0; column < 7; column++) {
    uint32_t want = column < 3 ? LEN(11) : LEN(13);
    int count = column < 3 ? events : links;
    put_varuint(w, (uint64_t)count);
    p = column < 3 ? events_at : links_at;
    for (int done = 0; p < e && done < count;) {
      uint32_t t = (uint32_t)varint(b, &p, e, &bad);
      size_t is = 0, ie = 0;
      if (!field(b, &p, e, t, &is, &ie) || t != want) continue;
      done++;
      size_t r = is, found_s = is, found_e = is, at = 0;
      int has_time = 0;
      uint32_t target = column == 0 ? I64(1) : column == 1 ? LEN(2) : column == 3 ? LEN(1) : column == 4 ? LEN(2) : column == 5 ? LEN(3) : 0;
      while (target && r < ie) {
        uint32_t t2 = (uint32_t)varint(b, &r, ie, &bad);
        if (bad || !field(b, &r, ie, t2, &fs, &fe)) return 0;
        if (t2 == target) { found_s = fs; found_e = fe; at = fs; has_time = 1; }
      }
      switch (column) {
        case 0: { uint64_t ts = 0; if (has_time) memcpy(&ts, b + at, 8); put_u64(w, ts); break; }
        case 1: case 5: put_string(w, b + found_s, found_e - found_s); break;
        case 3: case 4: {
          size_t n = found_e - found_s;
          if (n != 0 && n != (column == 3 ? 16u : 8u)) return 0;
          put_hex_id(w, b + found_s, n);
          break;
        }
        default: if (!put_attributes(w, b, is, ie, column == 2 ? LEN(3) : LEN(4))) return 0;
      }
    }
  }
  return !w->fail;
}

/* The first LEN field `tag` in [s, e) as [*fs, *fe); 0 if none. */
static int find(const uint8_t *b, size_t s, size_t e, uint32_t tag, size_t *fs, size_t *fe) {
  size_t p = s, a, z;
  int bad = 0;
  while (p < e) {
    uint32_t t = (uint32_t)varint(b, &p, e, &bad);
    if (bad || !field(b, &p, e, t, &a, &z)) return 0;
    if (t == tag) { *fs = a; *fe = z; return 1; }
  }
  return 0;
}

/* ServiceName: the string value of the resource attribute service.name ("" if none). */
static int put_service_name(Out *w, const uint8_t *b, size_t s, size_t e) {
  size_t p = s, fs, fe, ks, ke, vs, ve;
  int bad = 0;
  while (p < e) {
    uint32_t t = (uint32_t)varint(b, &p, e, &bad);
    if (bad || !field(b, &p, e, t, &fs, &fe)) return 0;
    if (t != LEN(1) || !find(b, fs, fe, LEN(1), &ks, &ke)) continue;
    if (ke - ks == 12 && memcmp(b + ks, "service.name", 12) == 0) {
      if (!find(b, fs, fe, LEN(2), &vs, &ve)) { put_varuint(w, 0); return 1; }
      return put_any_value(w, b, vs, ve);
    }
  }
  put_varuint(w, 0);
  return 1;
}

/* Returns bytes written to out, or -1 (leave the request to the JavaScript transcoder). */
static long transcode(const uint8_t *b, size_t n, const uint8_t *source, size_t source_len, uint8_t *out, size_t cap, long *spans) {
  Out w = {out, 0, cap, 0};
  uint8_t prefix_buf[8192];
  size_t p = 0, rs, re, fs, fe;
  int bad = 0;
  while (p < n) {
    uint32_t t = (uint32_t)varint(b, &p, n, &bad);
    if (bad || !field(b, &p, n, t, &rs, &re)) return -1;
    if (t != LEN(1)) continue;
    Out pre = {prefix_buf, 0, sizeof prefix_buf, 0};
    put_varuint(&pre, source_len);
    put(&pre, source, source_len);
    size_t res_s = rs, res_e = rs;
    find(b, rs, re, LEN(1), &res_s, &res_e);
    if (!put_service_name(&pre, b, res_s, res_e) || !put_attributes(&pre, b, res_s, res_e, LEN(1))) return -1;
    size_t resource_end = pre.pos, q = rs;
    while (q < re) {
      uint32_t t2 = (uint32_t)varint(b, &q, re, &bad);
      size_t ss, se;
      if (bad || !field(b, &q, re, t2, &ss, &se)) return -1;
      if (t2 != LEN(2)) continue;
      pre.pos = resource_end;
      size_t sc_s = ss, sc_e = ss, nm_s = ss, nm_e = ss, vr_s = ss, vr_e = ss;
      find(b, ss, se, LEN(1), &sc_s, &sc_e);
      find(b, sc_s, sc_e, LEN(1), &nm_s, &nm_e);
      find(b, sc_s, sc_e, LEN(2), &vr_s, &vr_e);
      put_string(&pre, b + nm_s, nm_e - nm_s);
      put_string(&pre, b + vr_s, vr_e - vr_s);
      if (pre.fail) return -1;
      size_t r = ss;
      while (r < se) {
        uint32_t t3 = (uint32_t)varint(b, &r, se, &bad);
        if (bad || !field(b, &r, se, t3, &fs, &fe)) return -1;
        if (t3 != LEN(2)) continue;
        if (!put_span(&w, b, fs, fe, prefix_buf, pre.pos)) return -1;
        (*spans)++;
      }
    }
  }
  return w.fail ? -1 : (long)w.pos;
}

#ifdef __wasm__
/*
 * The module's memory holds the request at `request`, the source id at `source` and the rows
 * at `out` (the caller places them; see bench/native/bench.ts). Returns the bytes written, or -1.
 */
__attribute__((export_name("transcode")))
long wasm_transcode(const uint8_t *request, size_t n, const uint8_t *source, size_t source_len, uint8_t *out, size_t cap) {
  long spans = 0;
  return transcode(request, n, source, source_len, out, cap, &spans);
}
#else
/* transcode(request: Uint8Array, sourceId: Uint8Array, out: Uint8Array) -> bytes written or -1 */
static napi_value Transcode(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3], result;
  napi_get_cb_info(env, info, &argc, args, NULL, NULL);
  void *data[3];
  size_t length[3];
  for (int i = 0; i < 3; i++) {
    napi_typedarray_type type;
    napi_value buffer;
    size_t offset;
    napi_get_typedarray_info(env, args[i], &type, &length[i], &data[i], &buffer, &offset);
  }
  long spans = 0;
  napi_create_int64(env, transcode(data[0], length[0], data[1], length[1], data[2], length[2], &spans), &result);
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "transcode", NAPI_AUTO_LENGTH, Transcode, NULL, &fn);
  napi_set_named_property(env, exports, "transcode", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
#endif
