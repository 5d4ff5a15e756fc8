/*
 * Doubles as text, as the JavaScript transcoder writes them (pipeline/otlp/go-format.ts): the
 * shortest decimal that reads back as the value, in ECMAScript's Number::toString layout (Go's
 * float64AsString agrees with it for finite values), with Go's error text for NaN and ±Inf.
 *
 * Plain notation, 1e-6 <= |value| < 1e15, is decided by go-format.ts's method, ported step for
 * step (Dekker's product instead of fma, which WebAssembly lacks); the rest, and the cases that
 * method leaves undecided, go through an exact digit generation on big integers (Steele and
 * White's free-format algorithm as Burger and Dybvig state it): the fewest digits inside the
 * value's rounding interval, the nearer of the two last digits when both are inside, the even
 * one on a tie — what ECMAScript asks for.
 */
#include "sluice.h"

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
/* Veltkamp's splitter, 2^27 + 1: cuts a double into two halves whose products are exact. */
#define SPLITTER 134217729.0

static u64 bits_of(double v) {
  u64 b;
  __builtin_memcpy(&b, &v, 8);
  return b;
}

static double of_bits(u64 b) {
  double v;
  __builtin_memcpy(&v, &b, 8);
  return v;
}

/* Math.round: the nearest integer, ties toward +Infinity. */
static double js_round(double x) {
  double f = __builtin_floor(x);
  return x - f >= 0.5 ? f + 1 : f;
}

/* ---- go-format.ts#shortestDigits, for 1e-6 <= m < 1e15 ---- */

static u8 digit_bytes[17];
static int point_at;

static void fill_digits(int start, i32 v, int count) {
  for (int i = start + count - 1; i >= start; i--) {
    i32 rest = v / 10;
    digit_bytes[i] = (u8)(48 + v - rest * 10);
    v = rest;
  }
}

static int digits_of(double base, double offset, int count) {
  double high = __builtin_floor(base / 1e8);
  double low = base - high * 1e8 + offset;
  while (low < 0) { low += 1e8; high--; }
  while (low >= 1e8) { low -= 1e8; high++; }
  if (high < POW10[count - 9] || high >= POW10[count - 8]) return 0;
  int last = low == 0 ? count - 8 : count;
  if (low != 0) fill_digits(count - 8, (i32)low, 8);
  fill_digits(0, (i32)high, count - 8);
  while (last > 1 && digit_bytes[last - 1] == 48) last--;
  return last;
}

static double product_error(double a, double b, double p) {
  double c = SPLITTER * a;
  double a_high = c - (c - a);
  double a_low = a - a_high;
  c = SPLITTER * b;
  double b_high = c - (c - b);
  double b_low = b - b_high;
  return ((a_high * b_high - p) + a_high * b_low + a_low * b_high) + a_low * b_low;
}

static int shortest_plain(double m) {
  u64 bits = bits_of(m);
  int exponent = (int)(bits >> 52) - 1023;
  int scale = 14 - (int)__builtin_floor(exponent * 0.30102999566398114);
  if (scale < 0 || scale > 22) return 0;
  double d15 = js_round(m * POW10[scale]);
  if (d15 >= 1e15) {
    if (--scale < 0) return 0;
    d15 = js_round(m * POW10[scale]);
  } else if (d15 < 1e14) {
    if (++scale > 22) return 0;
    d15 = js_round(m * POW10[scale]);
  }
  if (scale < 0 || scale > 20 || d15 < 1e14 || d15 >= 1e15) return 0;
  point_at = 15 - scale;
  if (d15 / POW10[scale] == m) return digits_of(d15, 0, 15);

  if ((bits & 0xfffffffffffffull) == 0) return 0; /* a power of two */
  double half_ulp = of_bits((u64)(exponent - 53 + 1023) << 52);

  double p16 = m * POW10[scale + 1];
  double err16 = product_error(m, POW10[scale + 1], p16);
  double floor16 = __builtin_floor(p16);
  double frac = p16 - floor16;
  int even16 = floor16 - 2 * __builtin_floor(floor16 / 2) == 0;
  int offset = 0;
  if (frac - 0.5 > -err16) offset = 1;
  else if (frac + 0.5 < -err16) offset = -1;
  else if (frac - 0.5 == -err16) offset = even16 ? 0 : 1;
  else if (frac + 0.5 == -err16) offset = even16 ? 0 : -1;
  double distance = __builtin_fabs((double)offset - frac - err16);
  double half_gap = half_ulp * POW10[scale + 1];
  if (distance < half_gap * (1 - 1e-12)) return digits_of(floor16, offset, 16);
  if (distance <= half_gap * (1 + 1e-12)) return 0;

  double p17 = m * POW10[scale + 2];
  double err17 = product_error(m, POW10[scale + 2], p17);
  double offset17 = js_round(err17);
  if (offset17 - err17 == 0.5 && ((i32)offset17 & 1) != 0) offset17--;
  return digits_of(p17, offset17, 17);
}

/* ---- exact shortest digits ---- */

#define LIMBS 40 /* 1280 bits: the largest numbers here are about 2^1140 */

typedef struct {
  u32 n;
  u32 limb[LIMBS];
} Big;

static void big_set(Big *a, u64 v) {
  a->n = 0;
  while (v) {
    a->limb[a->n++] = (u32)v;
    v >>= 32;
  }
}

static void big_mul_small(Big *a, u32 m) {
  u64 carry = 0;
  for (u32 i = 0; i < a->n; i++) {
    u64 t = (u64)a->limb[i] * m + carry;
    a->limb[i] = (u32)t;
    carry = t >> 32;
  }
  if (carry) a->limb[a->n++] = (u32)carry;
}

static void big_mul_pow10(Big *a, int k) {
  for (; k >= 9; k -= 9) big_mul_small(a, 1000000000u);
  static const u32 SMALL[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
  if (k > 0) big_mul_small(a, SMALL[k]);
}

static void big_shift_left(Big *a, u32 bits) {
  if (a->n == 0) return;
  u32 words = bits / 32;
  if (words) {
    for (u32 i = a->n; i-- > 0;) a->limb[i + words] = a->limb[i];
    for (u32 i = 0; i < words; i++) a->limb[i] = 0;
    a->n += words;
  }
  if (bits % 32) big_mul_small(a, 1u << (bits % 32));
}

static int big_compare(const Big *a, const Big *b) {
  if (a->n != b->n) return a->n < b->n ? -1 : 1;
  for (u32 i = a->n; i-- > 0;)
    if (a->limb[i] != b->limb[i]) return a->limb[i] < b->limb[i] ? -1 : 1;
  return 0;
}

static void big_add(Big *out, const Big *a, const Big *b) {
  u32 n = a->n > b->n ? a->n : b->n;
  u64 carry = 0;
  for (u32 i = 0; i < n; i++) {
    u64 t = carry + (i < a->n ? a->limb[i] : 0) + (i < b->n ? b->limb[i] : 0);
    out->limb[i] = (u32)t;
    carry = t >> 32;
  }
  out->n = n;
  if (carry) out->limb[out->n++] = (u32)carry;
}

/* a -= b, for a >= b. */
static void big_subtract(Big *a, const Big *b) {
  i64 borrow = 0;
  for (u32 i = 0; i < a->n; i++) {
    i64 t = (i64)a->limb[i] - (i < b->n ? b->limb[i] : 0) - borrow;
    borrow = t < 0;
    a->limb[i] = (u32)(t + (borrow << 32));
  }
  while (a->n && a->limb[a->n - 1] == 0) a->n--;
}

/* Sets digits[0, count) and *point (the value is 0.d1d2... x 10^point) for a finite v > 0. */
static int shortest_exact(double v, u8 *digits, int *point) {
  u64 bits = bits_of(v);
  int biased = (int)(bits >> 52);
  u64 f = bits & 0xfffffffffffffull;
  int e;
  if (biased == 0) e = -1074;
  else {
    f |= 1ull << 52;
    e = biased - 1075;
  }
  /* The lower neighbour is closer when f is a power of two above the smallest exponent. */
  int closer = (f == 1ull << 52) && biased > 1;
  int inclusive = (f & 1) == 0; /* round-half-even reads a boundary back as v when f is even */
  Big r, s, plus, minus, t;
  big_set(&r, f);
  if (e >= 0) {
    big_shift_left(&r, (u32)e + (closer ? 2 : 1));
    big_set(&s, closer ? 4 : 2);
    big_set(&plus, 1);
    big_shift_left(&plus, (u32)e + (closer ? 1 : 0));
    big_set(&minus, 1);
    big_shift_left(&minus, (u32)e);
  } else {
    big_shift_left(&r, closer ? 2 : 1);
    big_set(&s, 1);
    big_shift_left(&s, (u32)(-e) + (closer ? 2 : 1));
    big_set(&plus, closer ? 2 : 1);
    big_set(&minus, 1);
  }
  /* k, about log10(v), then made exact: the smallest k with the interval's top below 10^k. */
  int bit_length = 64 - __builtin_clzll(f);
  int k = (int)__builtin_ceil((e + bit_length - 1) * 0.30102999566398114 - 1e-9);
  if (k >= 0) big_mul_pow10(&s, k);
  else {
    big_mul_pow10(&r, -k);
    big_mul_pow10(&plus, -k);
    big_mul_pow10(&minus, -k);
  }
  for (;;) {
    big_add(&t, &r, &plus);
    int c = big_compare(&t, &s);
    if (inclusive ? c < 0 : c <= 0) break;
    big_mul_small(&s, 10);
    k++;
  }
  for (;;) {
    big_add(&t, &r, &plus);
    big_mul_small(&t, 10);
    int c = big_compare(&t, &s);
    if (inclusive ? c >= 0 : c > 0) break;
    big_mul_small(&r, 10);
    big_mul_small(&plus, 10);
    big_mul_small(&minus, 10);
    k--;
  }
  *point = k;
  int count = 0;
  for (;;) {
    big_mul_small(&r, 10);
    big_mul_small(&plus, 10);
    big_mul_small(&minus, 10);
    int d = 0;
    while (big_compare(&r, &s) >= 0) {
      big_subtract(&r, &s);
      d++;
    }
    int low = inclusive ? big_compare(&r, &minus) <= 0 : big_compare(&r, &minus) < 0;
    big_add(&t, &r, &plus);
    int high = inclusive ? big_compare(&t, &s) >= 0 : big_compare(&t, &s) > 0;
    if (!low && !high) {
      digits[count++] = (u8)('0' + d);
      continue;
    }
    if (low && high) {
      big_add(&t, &r, &r);
      int c = big_compare(&t, &s);
      if (c > 0 || (c == 0 && (d & 1))) d++;
    } else if (high) {
      d++;
    }
    digits[count++] = (u8)('0' + d);
    break;
  }
  /* A last digit rounded up to 10 carries (not expected, kept for safety). */
  while (count > 1 && digits[count - 1] > '9') {
    count--;
    digits[count - 1]++;
  }
  if (digits[0] > '9') {
    digits[0] = '1';
    count = 1;
    (*point)++;
  }
  return count;
}

/* ECMAScript's Number::toString layout of the digits (0.d1d2... x 10^point), after `sign`. */
static u32 layout(u8 *out, int negative, const u8 *digits, int count, int point) {
  u32 n = 0;
  if (negative) out[n++] = '-';
  if (count <= point && point <= 21) {
    for (int i = 0; i < count; i++) out[n++] = digits[i];
    for (int i = count; i < point; i++) out[n++] = '0';
  } else if (0 < point && point <= 21) {
    for (int i = 0; i < count; i++) {
      if (i == point) out[n++] = '.';
      out[n++] = digits[i];
    }
  } else if (-6 < point && point <= 0) {
    out[n++] = '0';
    out[n++] = '.';
    for (int i = point; i < 0; i++) out[n++] = '0';
    for (int i = 0; i < count; i++) out[n++] = digits[i];
  } else {
    int exponent = point - 1;
    out[n++] = digits[0];
    if (count > 1) {
      out[n++] = '.';
      for (int i = 1; i < count; i++) out[n++] = digits[i];
    }
    out[n++] = 'e';
    out[n++] = exponent < 0 ? '-' : '+';
    u32 magnitude = (u32)(exponent < 0 ? -exponent : exponent);
    if (magnitude >= 100) out[n++] = (u8)('0' + magnitude / 100);
    if (magnitude >= 10) out[n++] = (u8)('0' + magnitude / 10 % 10);
    out[n++] = (u8)('0' + magnitude % 10);
  }
  return n;
}

u32 format_double(double value, u8 *out) {
  if (value == 0) {
    if (bits_of(value) >> 63) {
      out[0] = '-';
      out[1] = '0';
      return 2;
    }
    out[0] = '0';
    return 1;
  }
  u8 digits[20];
  int point;
  int count = shortest_exact(__builtin_fabs(value), digits, &point);
  return layout(out, value < 0, digits, count, point);
}

void w_go_float(Buf *w, double value) {
  double magnitude = __builtin_fabs(value);
  u8 text[40];
  if (magnitude >= 1e-6 && magnitude < 1e15) {
    int count = shortest_plain(magnitude);
    if (count > 0) {
      w_encoded(w, text, layout(text, value < 0, digit_bytes, count, point_at));
      return;
    }
  }
  if (value != value) w_encoded(w, (const u8 *)"json: unsupported value: NaN", 28);
  else if (value - value != 0) {
    if (value > 0) w_encoded(w, (const u8 *)"json: unsupported value: +Inf", 29);
    else w_encoded(w, (const u8 *)"json: unsupported value: -Inf", 29);
  } else {
    w_encoded(w, text, format_double(value, text));
  }
}
