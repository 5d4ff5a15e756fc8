/**
 * Go's text forms of values, so what Sluice stores matches what the Collector's ClickHouse
 * exporter (written in Go) stores for the same data.
 */
import type { RowBinaryWriter } from './rowbinary.ts';

/**
 * pdata's float64AsString: the ES6 number-to-string rule for finite numbers (which is what
 * JS String(n) implements, -0 aside), Go's error text for NaN and ±Inf.
 */
export function float64AsString(value: number): string {
  if (Number.isFinite(value)) return Object.is(value, -0) ? '-0' : String(value);
  return 'json: unsupported value: ' + (Number.isNaN(value) ? 'NaN' : value > 0 ? '+Inf' : '-Inf');
}

const POWERS_OF_TEN = [1, 10, 100, 1000, 1e4, 1e5, 1e6];

/**
 * Writes float64AsString(value) as a String column. Most doubles in telemetry have a few
 * decimals (latencies, ratios); those are written digit by digit, as String() would write
 * them, without building a string (String(double) costs ~200 ns). The rest use String().
 */
export function writeGoFloat(w: RowBinaryWriter, value: number): void {
  const magnitude = Math.abs(value);
  // Plain notation only between 1e-6 and 1e21 (ES and Go agree); -0 prints as "-0" in Go.
  if (magnitude >= 1e-6 && magnitude < 1e15) {
    for (let scale = 0; scale < POWERS_OF_TEN.length; scale++) {
      const digits = magnitude * POWERS_OF_TEN[scale]!;
      // At most 15 significant digits, and exactly `value` when read back: then this is the
      // shortest form too (distinct decimals of <= 15 digits are distinct doubles).
      if (digits < 1e15 && Number.isInteger(digits) && digits / POWERS_OF_TEN[scale]! === magnitude) {
        w.fixedPoint(value < 0, digits, scale);
        return;
      }
    }
  }
  w.ascii(float64AsString(value));
}

/** Go's encoding/json string form (HTML escaping off): JSON.stringify's, plus U+2028/U+2029. */
export function goQuote(value: string): string {
  return JSON.stringify(value).replace(/[\u2028\u2029]/g, (c) => (c === '\u2028' ? '\\u2028' : '\\u2029'));
}

/** Go sorts map keys by their bytes; UTF-16 order differs above U+D7FF, so compare UTF-8. */
export function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
