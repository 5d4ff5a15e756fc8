import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { fieldTag, I64, LEN, VARINT, WireReader } from './wire.ts';

/** Encodes an unsigned or two's-complement 64-bit value as a protobuf varint. */
function varint(value: bigint): number[] {
  let v = BigInt.asUintN(64, value);
  const out: number[] = [];
  do {
    const byte = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v > 0n ? byte | 0x80 : byte);
  } while (v > 0n);
  return out;
}

const reader = (bytes: number[]) => new WireReader(Uint8Array.from(bytes));

function refusal(read: () => unknown): string {
  try {
    read();
  } catch (err) {
    expect(err).toBeInstanceOf(SluiceError);
    expect((err as SluiceError).code).toBe('bad_request');
    return (err as SluiceError).message;
  }
  throw new Error('expected a refusal');
}

describe('WireReader', () => {
  it('reads varints of every width as 64-bit halves and as int64 decimals', () => {
    const values = [0n, 1n, 127n, 128n, 300n, 2n ** 31n, 2n ** 32n + 5n, 2n ** 53n + 1n, 2n ** 63n - 1n, -1n, -42n, -(2n ** 63n)];
    for (const value of values) {
      const bytes = varint(value);
      const r = reader(bytes);
      r.varint64(bytes.length);
      expect(r.pos).toBe(bytes.length);
      const unsigned = BigInt.asUintN(64, value);
      expect([r.lo, r.hi], String(value)).toEqual([Number(unsigned & 0xffffffffn), Number(unsigned >> 32n)]);
      expect(r.int64Decimal()).toBe(value.toString());
      expect(reader(bytes).uint32(bytes.length)).toBe(Number(unsigned & 0xffffffffn));
    }
  });

  it('reads tags, lengths, fixed-width fields and skips unknown fields', () => {
    const bytes = [
      fieldTag(1, VARINT), 5,
      fieldTag(2, LEN), 3, 0x61, 0x62, 0x63,
      fieldTag(3, I64), 1, 0, 0, 0, 0, 0, 0, 0,
      fieldTag(4, 5), 2, 0, 0, 0,
      fieldTag(5, LEN), 0,
    ];
    const r = reader(bytes);
    const end = bytes.length;
    expect(r.tag(end)).toBe(fieldTag(1, VARINT));
    expect(r.uint32(end)).toBe(5);
    expect(r.tag(end)).toBe(fieldTag(2, LEN));
    expect(r.len(end)).toBe(7);
    r.pos = 7;
    expect(r.tag(end)).toBe(fieldTag(3, I64));
    expect(r.fixed64(end)).toBe(8);
    for (const tag of [fieldTag(4, 5), fieldTag(5, LEN)]) {
      expect(r.tag(end)).toBe(tag);
      r.skip(tag, end);
    }
    expect(r.pos).toBe(end);
    expect(r.seek(0, end, fieldTag(2, LEN))).toBe(7);
    expect(r.pos).toBe(4);
    expect(r.seek(0, end, fieldTag(9, LEN))).toBe(-1);
  });

  it('refuses truncated input with a bad request', () => {
    expect(refusal(() => reader([0x80, 0x80]).uint32(2))).toBe('malformed protobuf: truncated at byte 2');
    expect(refusal(() => reader([fieldTag(1, LEN), 10, 1, 2]).seek(0, 4, fieldTag(1, LEN)))).toBe(
      'malformed protobuf: a 10-byte field at byte 2 runs past the end of its message',
    );
    expect(refusal(() => reader([1, 2, 3]).fixed64(3))).toMatch(/truncated at byte 0/);
    expect(refusal(() => reader([1, 2]).fixed32(2))).toMatch(/truncated/);
    // A length that fits the buffer but not the enclosing message is refused too.
    expect(refusal(() => reader([fieldTag(1, LEN), 3, 1, 2, 3]).len(3))).toMatch(/runs past the end of its message/);
  });

  it('refuses garbage: bad wire types, field 0, overlong varints', () => {
    expect(refusal(() => reader([fieldTag(1, 3)]).tag(1))).toMatch(/invalid tag 11/);
    expect(refusal(() => reader([fieldTag(1, 7)]).tag(1))).toMatch(/invalid tag/);
    expect(refusal(() => reader([0x02]).tag(1))).toMatch(/invalid tag 2/);
    const overlong = Array(11).fill(0x80);
    expect(refusal(() => reader(overlong).varint64(11))).toMatch(/varint longer than 10 bytes/);
    expect(refusal(() => reader(overlong).uint32(11))).toMatch(/varint longer than 10 bytes/);
  });

  it('decodes zigzag sint32 and reads doubles', () => {
    for (const [encoded, value] of [[0, 0], [1, -1], [2, 1], [3, -2], [4294967295, -2147483648]] as const) {
      const bytes = varint(BigInt(encoded));
      expect(reader(bytes).sint32(bytes.length)).toBe(value);
    }
    const double = new Uint8Array(new Float64Array([-12.75]).buffer);
    expect(new WireReader(double).double(8)).toBe(-12.75);
  });
});
