/**
 * A minimal protobuf wire-format reader for walking OTLP requests in place. It never builds
 * objects: callers read a tag, switch on it, and either read a scalar or note where a
 * length-delimited field lies (its bytes stay in the request buffer and are copied straight
 * into RowBinary later).
 *
 * Every read is bounded by `end`, the end of the enclosing message, so a length that runs
 * past its parent, a varint cut short or an unknown wire type is reported as a bad request
 * rather than read from the neighbouring bytes.
 */
import { badRequest } from '../../core/errors.ts';

export const VARINT = 0;
export const I64 = 1;
export const LEN = 2;
export const I32 = 5;

/** The tag value of a field as it appears on the wire: (number << 3) | wire type. */
export function fieldTag(fieldNumber: number, wireType: number): number {
  return (fieldNumber << 3) | wireType;
}

const TWO_32 = 4294967296;

export class WireReader {
  readonly buf: Uint8Array;
  private readonly view: DataView;
  pos = 0;
  /** The low and high 32 bits of the last varint64() or int64 fixed read, unsigned. */
  lo = 0;
  hi = 0;

  constructor(buf: Uint8Array) {
    // A plain Uint8Array even if given a Buffer: its subarray() is much cheaper.
    this.buf = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  /** Reads a field tag; refuses field number 0 and the group wire types (3, 4) and 6, 7. */
  tag(end: number): number {
    const tag = this.uint32(end);
    const wireType = tag & 7;
    if (tag >>> 3 === 0 || (wireType !== VARINT && wireType !== I64 && wireType !== LEN && wireType !== I32)) {
      throw malformed(`invalid tag ${tag} at byte ${this.pos}`);
    }
    return tag;
  }

  /** A varint truncated to its low 32 bits (tags, lengths, enums, uint32, bool). */
  uint32(end: number): number {
    const buf = this.buf;
    let pos = this.pos;
    if (pos >= end) throw truncated(pos);
    let byte = buf[pos++]!;
    if (byte < 0x80) {
      this.pos = pos;
      return byte;
    }
    let value = byte & 0x7f;
    for (let shift = 7; shift < 70; shift += 7) {
      if (pos >= end) throw truncated(pos);
      byte = buf[pos++]!;
      // Bits past 32 are dropped: protobuf truncates a uint64 varint read as uint32.
      if (shift < 32) value |= (byte & 0x7f) << shift;
      if (byte < 0x80) {
        this.pos = pos;
        return value >>> 0;
      }
    }
    throw malformed(`varint longer than 10 bytes at byte ${this.pos}`);
  }

  /** A full 64-bit varint, left in `lo` and `hi`. */
  varint64(end: number): void {
    const buf = this.buf;
    let pos = this.pos;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) throw truncated(pos);
      const byte = buf[pos++]!;
      const bits = byte & 0x7f;
      if (i < 4) lo |= bits << (7 * i);
      else if (i === 4) {
        lo |= bits << 28; // the low 4 bits land in lo, the next 3 in hi
        hi = bits >>> 4;
      } else hi |= bits << (7 * i - 32);
      if (byte < 0x80) {
        this.pos = pos;
        this.lo = lo >>> 0;
        this.hi = hi >>> 0;
        return;
      }
    }
    throw malformed(`varint longer than 10 bytes at byte ${this.pos}`);
  }

  /** The last 64-bit value read (varint64 or fixed64Value), as a signed int64 decimal string. */
  int64Decimal(): string {
    const { lo, hi } = this;
    if (hi === 0) return String(lo);
    if (hi < 0x200000) return String(hi * TWO_32 + lo); // below 2^53: exact as a double
    return BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)).toString();
  }

  /** The last 64-bit value read, as a signed int64 converted to the nearest double. */
  int64Number(): number {
    return (this.hi | 0) * TWO_32 + this.lo;
  }

  /** Reads a length prefix and returns where the field's bytes end; pos is at their start. */
  len(end: number): number {
    const length = this.uint32(end);
    const fieldEnd = this.pos + length;
    if (fieldEnd > end) throw malformed(`a ${length}-byte field at byte ${this.pos} runs past the end of its message`);
    return fieldEnd;
  }

  /** Returns the position of an 8-byte little-endian field and steps over it. */
  fixed64(end: number): number {
    const at = this.pos;
    if (at + 8 > end) throw truncated(at);
    this.pos = at + 8;
    return at;
  }

  /** Reads an 8-byte field into `lo` and `hi`. */
  fixed64Value(end: number): void {
    const at = this.fixed64(end);
    this.lo = this.view.getUint32(at, true);
    this.hi = this.view.getUint32(at + 4, true);
  }

  fixed32(end: number): number {
    const at = this.pos;
    if (at + 4 > end) throw truncated(at);
    this.pos = at + 4;
    return this.view.getUint32(at, true);
  }

  double(end: number): number {
    return this.view.getFloat64(this.fixed64(end), true);
  }

  /** The double stored at a position returned by fixed64(). */
  doubleAt(at: number): number {
    return this.view.getFloat64(at, true);
  }

  /** The little-endian uint32 at a position (half of a fixed64 returned by fixed64()). */
  uint32At(at: number): number {
    return this.view.getUint32(at, true);
  }

  /** Whether the `length` bytes at a position are all zero (an unset id or timestamp). */
  isZero(at: number, length: number): boolean {
    const buf = this.buf;
    for (let i = at; i < at + length; i++) if (buf[i] !== 0) return false;
    return true;
  }

  /**
   * Finds the next length-delimited field with `tag` in [from, end): leaves pos at its first
   * byte and returns where it ends, or returns -1 if there is none. Used to walk a repeated
   * field again after a first pass counted it.
   */
  seek(from: number, end: number, tag: number): number {
    // Fast path: the field is right here with a one-byte length (tags here are one byte).
    const length = this.buf[from + 1]!;
    if (this.buf[from] === tag && length < 0x80 && from + 2 + length <= end) {
      this.pos = from + 2;
      return from + 2 + length;
    }
    this.pos = from;
    while (this.pos < end) {
      const t = this.tag(end);
      if (t === tag) return this.len(end);
      this.skip(t, end);
    }
    return -1;
  }

  /** A zigzag-encoded sint32. */
  sint32(end: number): number {
    const n = this.uint32(end);
    return (n >>> 1) ^ -(n & 1);
  }

  /** Steps over a field whose tag was just read. */
  skip(tag: number, end: number): void {
    switch (tag & 7) {
      case VARINT:
        this.uint32(end);
        return;
      case I64:
        this.fixed64(end);
        return;
      case LEN:
        this.pos = this.len(end);
        return;
      default:
        this.fixed32(end);
    }
  }

  /** Checks that a message walk stopped exactly at its end (a varint may overrun it). */
  expectEnd(end: number): void {
    if (this.pos !== end) throw malformed(`a field runs past the end of its message at byte ${end}`);
  }
}

function truncated(at: number) {
  return malformed(`truncated at byte ${at}`);
}

function malformed(detail: string) {
  return badRequest(`malformed protobuf: ${detail}`);
}
