/**
 * A growable ClickHouse RowBinary writer. Numbers are little-endian; a String is a varint
 * length then its bytes; Array and Map are a varint count then their elements (a Map's as
 * key, value pairs); LowCardinality(T) is written as T. DateTime64(9) is an Int64 of
 * nanoseconds and DateTime a UInt32 of seconds.
 *
 * String bytes are copied straight from the protobuf request, in JS for all but long runs:
 * per string, a native call (Buffer.copy, set, or the subarray it needs) costs more than
 * copying a few dozen bytes (FINDINGS: Buffer.copy per string was 2x slower than a byte
 * loop; here, DataView word copies are ~1.7x a byte loop). UTF-8 is checked on the way:
 * only a run with a byte >= 0x80 needs the (native) validator.
 */
import { isUtf8 } from 'node:buffer';
import { badRequest } from '../core/errors.ts';

/** Strings up to this long are copied (and checked for non-ASCII) in JS; longer with set(). */
const SHORT_STRING = 256;
/** Other byte runs up to this long are copied with a byte loop; longer with set(). */
const SHORT_RAW = 48;

const TWO_32 = 4294967296;

const HEX_PAIRS = (() => {
  const digits = '0123456789abcdef';
  const pairs = new Uint16Array(256); // two ASCII digits, first digit in the low byte
  for (let i = 0; i < 256; i++) pairs[i] = digits.charCodeAt(i >> 4) | (digits.charCodeAt(i & 15) << 8);
  return pairs;
})();

const EMPTY_VIEW = new DataView(new ArrayBuffer(0));
/** The low 0-3 bytes of a little-endian word. */
const TAIL_MASKS = new Int32Array([0, 0xff, 0xffff, 0xffffff]);

export class RowBinaryWriter {
  buf: Buffer;
  pos = 0;
  private view: DataView;
  /** The buffer copyShort last read from, and a view of it (usually one request's bytes). */
  private source: Uint8Array | undefined;
  private sourceView: DataView<ArrayBufferLike> = EMPTY_VIEW;

  constructor(initialBytes = 64 * 1024) {
    this.buf = Buffer.allocUnsafeSlow(initialBytes);
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  }

  /** Makes room for `bytes` more bytes. */
  ensure(bytes: number): void {
    if (this.pos + bytes > this.buf.length) this.grow(bytes);
  }

  private grow(bytes: number): void {
    let size = this.buf.length * 2;
    while (size < this.pos + bytes) size *= 2;
    const next = Buffer.allocUnsafeSlow(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer, next.byteOffset, next.byteLength);
  }

  /** Drops everything after `pos` (used to roll back a refused row). */
  truncate(pos: number): void {
    this.pos = pos;
  }

  /** Empties the writer for reuse, letting go of the last request it read from. */
  reset(): void {
    this.pos = 0;
    this.source = undefined;
    this.sourceView = EMPTY_VIEW;
  }

  u8(value: number): void {
    this.ensure(1);
    this.buf[this.pos++] = value;
  }

  u32(value: number): void {
    this.ensure(4);
    this.view.setUint32(this.pos, value, true);
    this.pos += 4;
  }

  i32(value: number): void {
    this.ensure(4);
    this.view.setInt32(this.pos, value, true);
    this.pos += 4;
  }

  /** A 64-bit integer given as its low and high 32 bits. */
  u64(lo: number, hi: number): void {
    this.ensure(8);
    this.view.setUint32(this.pos, lo, true);
    this.view.setUint32(this.pos + 4, hi, true);
    this.pos += 8;
  }

  f64(value: number): void {
    this.ensure(8);
    this.view.setFloat64(this.pos, value, true);
    this.pos += 8;
  }

  /** A LEB128 unsigned varint (lengths, array and map sizes). */
  varUInt(value: number): void {
    this.ensure(5);
    const buf = this.buf;
    while (value >= 0x80) {
      buf[this.pos++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    buf[this.pos++] = value;
  }

  /** Copies src[start, end) as is: a fixed-width value already little-endian on the wire. */
  raw(src: Uint8Array, start: number, end: number): void {
    const length = end - start;
    this.ensure(length);
    if (length <= SHORT_RAW) {
      // A byte loop: raw() reads from several buffers (constants, the row prefix), which
      // would keep replacing copyShort's source view.
      const buf = this.buf;
      let pos = this.pos;
      for (let i = start; i < end; i++) buf[pos++] = src[i]!;
      this.pos = pos;
    } else {
      this.buf.set(src.subarray(start, end), this.pos);
      this.pos += length;
    }
  }

  /** Appends all of `bytes` as is. */
  bytes(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  /** A String column from a protobuf string field's bytes; refuses invalid UTF-8. */
  utf8(src: Uint8Array, start: number, end: number): void {
    const length = end - start;
    if (this.pos + length + 5 > this.buf.length) this.grow(length + 5);
    if (length >= 0x80) this.varUInt(length);
    else this.buf[this.pos++] = length;
    if (length > SHORT_STRING) {
      const run = src.subarray(start, end);
      if (!isUtf8(run)) throw invalidUtf8();
      this.buf.set(run, this.pos);
      this.pos += length;
    } else if (this.copyShort(src, start, end) >= 0x80 && !isUtf8(src.subarray(start, end))) {
      throw invalidUtf8();
    }
  }

  /**
   * Two String columns from two runs shorter than 128 bytes (a map entry's key and value),
   * in one go: one room check, one-byte lengths, one UTF-8 verdict for both.
   */
  shortUtf8Pair(src: Uint8Array, aStart: number, aEnd: number, bStart: number, bEnd: number): void {
    if (this.pos + (aEnd - aStart) + (bEnd - bStart) + 5 > this.buf.length) this.grow((aEnd - aStart) + (bEnd - bStart) + 5);
    this.buf[this.pos++] = aEnd - aStart;
    let high = this.copyShort(src, aStart, aEnd);
    this.buf[this.pos++] = bEnd - bStart;
    high |= this.copyShort(src, bStart, bEnd);
    if (high >= 0x80 && !(isUtf8(src.subarray(aStart, aEnd)) && isUtf8(src.subarray(bStart, bEnd)))) throw invalidUtf8();
  }

  /**
   * Copies a short run four bytes at a time through DataViews (about 1.7x a byte loop
   * here); returns the OR of its bytes, so >= 0x80 means it is not plain ASCII. Room must
   * have been ensured.
   */
  private copyShort(src: Uint8Array, start: number, end: number): number {
    if (src !== this.source) {
      this.source = src;
      this.sourceView = new DataView(src.buffer, src.byteOffset, src.byteLength);
    }
    const from = this.sourceView;
    const to = this.view;
    let pos = this.pos;
    let high = 0;
    let i = start;
    for (; i + 4 <= end; i += 4, pos += 4) {
      const word = from.getUint32(i, true);
      high |= word;
      to.setUint32(pos, word, true);
    }
    const rest = end - i;
    if (rest > 0) {
      if (i + 4 <= src.length) {
        // The last 1-3 bytes as one word, the bytes past the run masked off: the zeros written
        // past it (callers leave room for them) are overwritten by what comes next.
        const word = from.getUint32(i, true) & TAIL_MASKS[rest]!;
        high |= word;
        to.setUint32(pos, word, true);
        pos += rest;
      } else {
        const buf = this.buf;
        for (; i < end; i++) {
          const byte = src[i]!;
          high |= byte;
          buf[pos++] = byte;
        }
      }
    }
    this.pos = pos;
    return (high | (high >>> 8) | (high >>> 16) | (high >>> 24)) & 0xff;
  }

  /** An empty String. */
  emptyString(): void {
    this.u8(0);
  }

  /** A String column from a JS string (parsed JSON: agent payloads, attribute JSON). */
  string(value: string): void {
    const length = value.length;
    this.ensure(length + 5);
    if (length <= SHORT_STRING) {
      // Short text is usually ASCII: copied in JS, as many bytes as characters, it costs a
      // third of the native encoder's two calls (byteLength, then write). The first
      // non-ASCII character sends it to the encoder instead.
      const buf = this.buf;
      let pos = this.pos + (length < 0x80 ? 1 : 2);
      let i = 0;
      for (; i < length; i++) {
        const c = value.charCodeAt(i);
        if (c >= 0x80) break;
        buf[pos++] = c;
      }
      if (i === length) {
        this.varUInt(length); // room was ensured above: the copied bytes stay where they are
        this.pos = pos;
        return;
      }
    }
    const bytes = Buffer.byteLength(value);
    this.ensure(bytes + 5);
    this.varUInt(bytes);
    this.pos += this.buf.write(value, this.pos, bytes, 'utf8');
  }

  /** A String column from bytes already encoded (pre-encoded constants). */
  encoded(bytes: Uint8Array): void {
    this.ensure(bytes.length + 5);
    this.varUInt(bytes.length);
    this.raw(bytes, 0, bytes.length);
  }

  /** A String column holding the lowercase hex of src[start, end) (trace and span ids). */
  hex(src: Uint8Array, start: number, end: number): void {
    const length = (end - start) * 2;
    this.ensure(length + 5);
    this.varUInt(length);
    const view = this.view;
    let pos = this.pos;
    for (let i = start; i < end; i++, pos += 2) view.setUint16(pos, HEX_PAIRS[src[i]!]!, true);
    this.pos = pos;
  }

  /** A String column holding a non-negative safe integer in decimal, without a JS string. */
  decimal(value: number): void {
    const digits = decimalDigits(value);
    this.ensure(digits + 1);
    this.buf[this.pos++] = digits;
    this.pos += digits;
    writeDigitsBackwards(this.buf, this.pos, value, digits);
  }

  /** A String column from a JS string known to be ASCII (number text): no encoder call. */
  ascii(value: string): void {
    const length = value.length;
    this.ensure(length + 5);
    this.varUInt(length);
    const buf = this.buf;
    let pos = this.pos;
    for (let i = 0; i < length; i++) buf[pos++] = value.charCodeAt(i);
    this.pos = pos;
  }

  /** A DateTime64(9) from nanoseconds since the epoch. */
  dateTime64(nanos: bigint): void {
    this.u64(Number(nanos & 0xffffffffn), Number(nanos >> 32n));
  }

  /**
   * A DateTime64(9) from whole seconds since the epoch (0 to 2^34) and the nanoseconds past
   * them, without a bigint: seconds * 10^9 + nanos is cut into pieces that stay exact as
   * doubles (below 2^53), then into the two 32-bit halves.
   */
  dateTime64Parts(seconds: number, nanos: number): void {
    const secondsLow = seconds % 65536;
    const low = secondsLow * 1e9 + nanos; // < 2^46
    const high = (seconds - secondsLow) / 65536 * 1e9; // counts units of 2^16; < 2^48
    const highLow = high % 65536;
    const belowHi = highLow * 65536 + low; // < 2^47: the part under 2^32 of everything, and a carry
    const lo = belowHi % TWO_32;
    this.u64(lo, (high - highLow) / 65536 + (belowHi - lo) / TWO_32);
  }

  /** A UUID (`xxxxxxxx-xxxx-...`): its two 64-bit halves, each little-endian, high half first. */
  uuid(id: string): void {
    const bytes = Buffer.from(id.replaceAll('-', ''), 'hex');
    this.bytes(bytes.subarray(0, 8).reverse());
    this.bytes(bytes.subarray(8, 16).reverse());
  }

  /**
   * The rows written so far in a buffer of their own: byteOffset 0 and byteLength equal to
   * its ArrayBuffer's, so it can be transferred to another thread without a copy.
   * (allocUnsafeSlow: not from Node's shared pool, and not zero-filled first.)
   */
  finish(): Uint8Array {
    const out = Buffer.allocUnsafeSlow(this.pos);
    out.set(this.buf.subarray(0, this.pos));
    return out;
  }
}

/** How many decimal digits a non-negative safe integer has. */
function decimalDigits(value: number): number {
  let digits = 1;
  if (value < 2147483648) {
    for (let v = value | 0; v >= 10; v = (v / 10) | 0) digits++;
  } else {
    for (let v = value; v >= 10; v = Math.floor(v / 10)) digits++;
  }
  return digits;
}

/** Writes the last `count` decimal digits of `value` ending just before buf[end] (zero-padded). */
function writeDigitsBackwards(buf: Uint8Array, end: number, value: number, count: number): void {
  let pos = end;
  // Int32 arithmetic while it fits: a double's % is a library call.
  while (value >= 2147483648 && pos > end - count) {
    const rest = Math.floor(value / 10);
    buf[--pos] = 48 + (value - rest * 10);
    value = rest;
  }
  let v = value | 0;
  while (pos > end - count) {
    const rest = (v / 10) | 0;
    buf[--pos] = 48 + (v - rest * 10);
    v = rest;
  }
}

function invalidUtf8() {
  return badRequest('invalid UTF-8 in a protobuf string field');
}
