/**
 * Go's text forms of values, so what Sluice stores matches what the Collector's ClickHouse
 * exporter (written in Go) stores for the same data.
 */
import type { RowBinaryWriter } from '../../storage/rowbinary.ts';

/**
 * pdata's float64AsString: the ES6 number-to-string rule for finite numbers (which is what
 * JS String(n) implements, -0 aside), Go's error text for NaN and ±Inf.
 */
export function float64AsString(value: number): string {
  if (Number.isFinite(value)) return Object.is(value, -0) ? '-0' : String(value);
  return 'json: unsupported value: ' + (Number.isNaN(value) ? 'NaN' : value > 0 ? '+Inf' : '-Inf');
}

/** 10^0 .. 10^22: every one exact as a double (10^23 is not). */
const POW10 = Array.from({ length: 23 }, (_, i) => 10 ** i);
/** Veltkamp's splitter, 2^27 + 1: cuts a double into two halves whose products are exact. */
const SPLITTER = 134217729;

/** A double's bits (little-endian: the high word, with the exponent, is words[1]). */
const float = new Float64Array(1);
const words = new Uint32Array(float.buffer);
/** The significant digits of the number being written, as ASCII. */
const digitBytes = new Uint8Array(17);

/**
 * Writes float64AsString(value) as a String column: the shortest decimal that reads back as
 * `value`, as String() writes it, but without making a string (String(double) costs ~250 ns
 * for a value it has not seen). Plain notation, 10^-6 <= |value| < 10^15 (ES and Go agree
 * there), is written here; the rest (0, -0, exponents, NaN, ±Inf) and the rare undecided
 * case of shortestDigits() go through float64AsString.
 */
export function writeGoFloat(w: RowBinaryWriter, value: number): void {
  const magnitude = Math.abs(value);
  if (magnitude >= 1e-6 && magnitude < 1e15) {
    const digits = shortestDigits(magnitude);
    if (digits > 0) return writePlain(w, value < 0, digits, pointAt);
  }
  w.ascii(float64AsString(value));
}

/** Where shortestDigits() puts the decimal point: after this many of the digits (<= 0: "0.000ddd"). */
let pointAt = 0;

/**
 * The shortest decimal that reads back as `m` (10^-6 <= m < 10^15) into digitBytes; returns
 * how many digits, or 0 when undecided. ES picks the fewest digits, then the nearest to m,
 * then the even one; each count is tried in turn:
 * - up to 15 digits: at most one such decimal reads back as m (10^15 < 2^53), and the test
 *   is exact: an integer below 2^53 divided by an exact power of ten rounds as reading the
 *   decimal does;
 * - 16 digits: the nearest one, if it lies within half an ulp of m;
 * - 17 digits: the nearest one always does.
 * The nearest 16- and 17-digit decimals come from m * 10^k carried exactly as a double and
 * its rounding error (Dekker's product). The half-ulp test is decided with a margin far
 * above the rounding of one subtraction; inside it (a decimal on the boundary, about one
 * value in 10^14) the answer is 0 and the caller uses String(). Powers of two, whose
 * interval is lopsided, are left to String() too.
 */
function shortestDigits(m: number): number {
  float[0] = m;
  const exponent = (words[1]! >>> 20) - 1023; // m's binary exponent (m is positive and normal)
  // scale: m * 10^scale has 15 digits before the point. exponent * log10(2) is m's decimal
  // exponent or one less; the rounded digits say which.
  let scale = 14 - Math.floor(exponent * 0.30102999566398114);
  let d15 = Math.round(m * POW10[scale]!);
  if (d15 >= 1e15) d15 = Math.round(m * POW10[--scale]!);
  else if (d15 < 1e14) d15 = Math.round(m * POW10[++scale]!);
  if (scale < 0 || scale > 20 || d15 < 1e14 || d15 >= 1e15) return 0;
  pointAt = 15 - scale;
  if (d15 / POW10[scale]! === m) return digitsOf(d15, 0, 15);

  if ((words[1]! & 0xfffff) === 0 && words[0] === 0) return 0; // a power of two
  // Half an ulp of m: 2^(exponent - 53), made from its bits (Math.pow is a library call).
  words[1] = (exponent - 53 + 1023) << 20;
  words[0] = 0;
  const halfUlp = float[0]!;

  // 16 digits: the integer nearest to m * 10^k = p + err, as floor(p) + offset.
  const p16 = m * POW10[scale + 1]!;
  const err16 = productError(m, POW10[scale + 1]!, p16);
  const floor16 = Math.floor(p16);
  const frac = p16 - floor16; // exact, and so are frac ± 0.5 (p16 >= 10^15: a few fractional bits at most)
  let offset = 0;
  if (frac - 0.5 > -err16) offset = 1;
  else if (frac + 0.5 < -err16) offset = -1;
  else if (frac - 0.5 === -err16) offset = floor16 % 2 === 0 ? 0 : 1; // halfway: the even one
  else if (frac + 0.5 === -err16) offset = floor16 % 2 === 0 ? 0 : -1;
  // Its distance to m * 10^k against half an ulp of m, scaled alike.
  const distance = Math.abs(offset - frac - err16);
  const halfGap = halfUlp * POW10[scale + 1]!;
  if (distance < halfGap * (1 - 1e-12)) return digitsOf(floor16, offset, 16);
  if (distance <= halfGap * (1 + 1e-12)) return 0;

  // 17 digits: p17 >= 10^16 > 2^53 is an even integer, err17 the rest (|err17| <= 8).
  const p17 = m * POW10[scale + 2]!;
  const err17 = productError(m, POW10[scale + 2]!, p17);
  let offset17 = Math.round(err17);
  if (offset17 - err17 === 0.5 && (offset17 & 1) !== 0) offset17--; // halfway: the even one
  return digitsOf(p17, offset17, 17);
}

/** The rounding error of p = a * b: a * b - p exactly (Dekker; no overflow here). */
function productError(a: number, b: number, p: number): number {
  let c = SPLITTER * a;
  const aHigh = c - (c - a);
  const aLow = a - aHigh;
  c = SPLITTER * b;
  const bHigh = c - (c - b);
  const bLow = b - bHigh;
  return ((aHigh * bHigh - p) + aHigh * bLow + aLow * bHigh) + aLow * bLow;
}

/**
 * Puts the `count` digits of base + offset (an integer of that many digits; base a double
 * integer, maybe past 2^53, offset small) into digitBytes, drops trailing zeros and returns
 * how many are left; 0 if base + offset does not have `count` digits.
 */
function digitsOf(base: number, offset: number, count: number): number {
  // Eight low digits and the rest, each exact: high * 10^8 has at most 49 significant bits.
  let high = Math.floor(base / 1e8);
  let low = base - high * 1e8 + offset;
  while (low < 0) { low += 1e8; high--; }
  while (low >= 1e8) { low -= 1e8; high++; }
  if (high < POW10[count - 9]! || high >= POW10[count - 8]!) return 0;
  // Trailing zeros are dropped as they are met; eight at once when the low half is 0 (few
  // decimals: 123.456 is 123456000000000 at 15 digits). Both halves are below 2^31.
  let last = low === 0 ? count - 8 : count;
  if (low !== 0) fillDigits(count - 8, low | 0, 8);
  fillDigits(0, high | 0, count - 8);
  while (last > 1 && digitBytes[last - 1] === 48) last--;
  return last;
}

/** Writes the `count` decimal digits of v (zero-padded) into digitBytes from `start`. */
function fillDigits(start: number, v: number, count: number): void {
  for (let i = start + count - 1; i >= start; i--) {
    const rest = (v / 10) | 0;
    digitBytes[i] = 48 + v - rest * 10;
    v = rest;
  }
}

/** A String column: the digits with the point after `point` of them (ES plain notation). */
function writePlain(w: RowBinaryWriter, negative: boolean, count: number, point: number): void {
  // "d.ddd", "ddd" followed by zeros, or "0.000ddd".
  const length = (negative ? 1 : 0) + (point >= count ? point : point > 0 ? count + 1 : 2 - point + count);
  w.ensure(length + 1);
  const buf = w.buf;
  let pos = w.pos;
  buf[pos++] = length;
  if (negative) buf[pos++] = 45; // '-'
  if (point <= 0) {
    buf[pos++] = 48; // '0'
    buf[pos++] = 46; // '.'
    for (let i = point; i < 0; i++) buf[pos++] = 48;
  }
  for (let i = 0; i < count; i++) {
    if (i === point && point > 0) buf[pos++] = 46;
    buf[pos++] = digitBytes[i]!;
  }
  for (let i = count; i < point; i++) buf[pos++] = 48;
  w.pos = pos;
}

/** Go's encoding/json string form (HTML escaping off): JSON.stringify's, plus U+2028/U+2029. */
export function goQuote(value: string): string {
  return JSON.stringify(value).replace(/[\u2028\u2029]/g, (c) => (c === '\u2028' ? '\\u2028' : '\\u2029'));
}

/** Go sorts map keys by their bytes; UTF-16 order differs above U+D7FF, so compare UTF-8. */
export function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
