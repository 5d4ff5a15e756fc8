import { describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { float64AsString, writeGoFloat } from '../pipeline/otlp/go-format.ts';
import { RowBinaryWriter } from './rowbinary.ts';

/** Reads back a String column written at the start of `w`. */
function stringAt(w: RowBinaryWriter, at = 0): string {
  let length = 0;
  let shift = 0;
  let pos = at;
  for (;;) {
    const byte = w.buf[pos++]!;
    length |= (byte & 0x7f) << shift;
    shift += 7;
    if (byte < 0x80) break;
  }
  return w.buf.subarray(pos, pos + length).toString('utf8');
}

describe('RowBinaryWriter', () => {
  it('writes fixed-width numbers little-endian and varint lengths', () => {
    const w = new RowBinaryWriter(8); // small: exercises growth
    w.u8(0xab);
    w.u32(0x01020304);
    w.i32(-2);
    w.u64(0x05060708, 0x01020304);
    w.f64(1.5);
    w.varUInt(300);
    expect([...w.finish()]).toEqual([
      0xab, 4, 3, 2, 1, 0xfe, 0xff, 0xff, 0xff, 8, 7, 6, 5, 4, 3, 2, 1,
      ...new Uint8Array(new Float64Array([1.5]).buffer), 0xac, 0x02,
    ]);
  });

  it('copies UTF-8 strings of any length and refuses invalid ones', () => {
    const w = new RowBinaryWriter(16);
    for (const text of ['', 'a', 'short ascii', 'ünïcödé ✓', 'x'.repeat(47), 'y'.repeat(49), 'z'.repeat(200), 'z'.repeat(300), '🎉'.repeat(40), 'é'.repeat(200)]) {
      w.truncate(0);
      const src = Buffer.from(`--${text}--`);
      w.utf8(src, 2, src.length - 2);
      expect(stringAt(w)).toBe(text);
    }
    for (const bad of [[0xff], [0x61, 0xc3], [0xe2, 0x28, 0xa1], [...Buffer.from('a'.repeat(60)), 0xc0, 0x80]]) {
      expect(() => w.utf8(Uint8Array.from(bad), 0, bad.length)).toThrow(SluiceError);
    }
  });

  it('copies a short run\'s last bytes exactly, at its source\'s end or before other bytes, and sees non-ASCII there', () => {
    // Runs of 0..11 bytes: whole words, then 1-3 bytes copied as one masked word when the source
    // has 4 bytes there, byte by byte when it ends sooner; what is written next lands right after.
    for (let length = 0; length < 12; length++) {
      const text = 'abcdefghijkl'.slice(0, length);
      for (const src of [Buffer.from(text), Buffer.from(`${text}\u00ff\u00ff\u00ff\u00ff`)]) {
        const w = new RowBinaryWriter(8);
        w.utf8(src, 0, length);
        w.shortUtf8Pair(src, 0, length, 0, length);
        w.u8(0x7e);
        expect([...w.finish()]).toEqual([length, ...Buffer.from(text), length, ...Buffer.from(text), length, ...Buffer.from(text), 0x7e]);
      }
      if (length === 0) continue;
      // A bad byte in the tail is seen; bytes after the run (0xff) are not.
      const bad = Buffer.from(`${'a'.repeat(length - 1)}\u0000`);
      bad[length - 1] = 0xff;
      const w = new RowBinaryWriter(8);
      expect(() => w.utf8(bad, 0, length)).toThrow(SluiceError);
      expect(() => w.shortUtf8Pair(bad, 0, length - 1, 0, length)).toThrow(SluiceError);
      const good = Buffer.concat([Buffer.from('a'.repeat(length)), Buffer.from([0xff, 0xff, 0xff])]);
      expect(() => w.utf8(good, 0, length)).not.toThrow();
    }
  });

  it('writes ids as lowercase hex and integers as decimal text', () => {
    const w = new RowBinaryWriter();
    w.hex(Uint8Array.from([0x00, 0x0f, 0xab, 0xff]), 0, 4);
    expect(stringAt(w)).toBe('000fabff');
    for (const value of [0, 7, 10, 99, 2 ** 31 - 1, 2 ** 31, 2 ** 32, Number.MAX_SAFE_INTEGER]) {
      w.truncate(0);
      w.decimal(value);
      expect(stringAt(w)).toBe(String(value));
    }
  });

  it('hands out rows in a right-sized buffer of their own', () => {
    const w = new RowBinaryWriter(1024);
    w.u32(1);
    const data = w.finish();
    expect(data.byteOffset).toBe(0);
    expect(data.byteLength).toBe(4);
    expect(data.buffer.byteLength).toBe(4);
  });
});

describe('doubles as Go writes them', () => {
  it('matches float64AsString (the ES6 rule) digit for digit, written here or by String()', () => {
    const w = new RowBinaryWriter();
    const values = [0, -0, 1, -1, 0.5, 0.1, 0.25, 12.345, -99.999, 1e-6, 1.5e-6, 1e-7, 123456.789, 1e14 + 0.5, 999999999999999, 1e15, 1e20, 1e21,
      0.1 + 0.2, Math.PI, Number.MAX_VALUE, Number.MIN_VALUE, 5e-324, NaN, Infinity, -Infinity];
    let seed = 7;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    for (let i = 0; i < 5000; i++) {
      values.push(random(), Math.round(random() * 1e6) / 1000, Math.round(random() * 100) / 100 - 50, random() * 1e-3, random() * 1e18);
    }
    // Every digit count from 1 to 17 across the plain range: random bits, short decimals and
    // their neighbours one ulp away, near powers of ten and two.
    const bits = new Float64Array(1);
    const words = new Uint32Array(bits.buffer);
    for (let i = 0; i < 40_000; i++) {
      words[0] = Math.floor(random() * 2 ** 32);
      words[1] = Math.floor(random() * 2 ** 20) | ((1000 + Math.floor(random() * 52)) << 20);
      values.push(bits[0]!, -bits[0]!);
      const short = Math.round(random() * 1e6) / 10 ** Math.floor(random() * 12);
      bits[0] = short;
      words[0] = words[0]! + 1;
      values.push(short, bits[0]!);
      bits[0] = short;
      words[0] = words[0]! - 1;
      values.push(bits[0]!);
    }
    for (let e = -7; e <= 16; e++) {
      for (const m of [1, 5, 2.5, 9.999999999999999, 1.0000000000000002, 1.2345678901234567]) values.push(m * 10 ** e, 10 ** e);
    }
    for (let k = -22; k <= 52; k++) values.push(2 ** k, 2 ** k * (1 + 2 ** -52), 2 ** k * (1 - 2 ** -53));
    const mismatches = values.flatMap((value) => {
      w.truncate(0);
      writeGoFloat(w, value);
      const written = stringAt(w);
      return written === float64AsString(value) ? [] : [`${value} written as ${written}`];
    });
    expect(mismatches.slice(0, 5)).toEqual([]);
    expect(float64AsString(-0)).toBe('-0');
    expect(float64AsString(NaN)).toBe('json: unsupported value: NaN');
    expect(float64AsString(Infinity)).toBe('json: unsupported value: +Inf');
    expect(float64AsString(1e21)).toBe('1e+21');
    expect(float64AsString(1e-7)).toBe('1e-7');
  });
});
