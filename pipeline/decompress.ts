/**
 * Request-body decompression with a hard cap on the output, for gzip and zstd bodies.
 *
 * A compression bomb must be refused without allocating much more than the cap:
 * - gzip: inflated into a buffer of at most the cap plus one byte (inflate.ts), refused when
 *   it fills.
 * - zstd: we walk the frame and block headers first (RFC 8878) and refuse when a sound upper
 *   bound of the output exceeds the cap, before decompressing anything. Then, where Node has
 *   its own zstd (Node 22.15+, 23.8+), each frame is inflated into the same capped buffer as
 *   gzip, so the cap holds even if the walk were wrong; on older Node, @mongodb-js/zstd on
 *   libuv's pool, which has no output limit.
 *
 * Runs in a pipeline worker thread: the synchronous inflate blocks that thread, not the event
 * loop.
 */
import { decompress as zstdDecompress } from '@mongodb-js/zstd';
import { SluiceError, badRequest } from '../core/errors.ts';
import { Inflater, type FrameLayout } from './inflate.ts';

export type ContentEncoding = 'identity' | 'gzip' | 'zstd';

const ENCODINGS = new Map<string, ContentEncoding>([
  ['', 'identity'],
  ['identity', 'identity'],
  ['gzip', 'gzip'],
  // RFC 9110 §8.4.1.3: recipients SHOULD treat x-gzip as gzip.
  ['x-gzip', 'gzip'],
  ['zstd', 'zstd'],
]);

/** Parses a Content-Encoding header value; returns undefined for anything unsupported (case-insensitive; absent/empty/identity => 'identity'). */
export function parseContentEncoding(header: string | undefined): ContentEncoding | undefined {
  return ENCODINGS.get((header ?? '').trim().toLowerCase());
}

/** A thread's decoders, one per format: their buffers are reused from body to body (inflate.ts). */
export interface Inflaters {
  gzip: Inflater;
  zstd: Inflater;
}

export function newInflaters(): Inflaters {
  return { gzip: new Inflater('gzip'), zstd: new Inflater('zstd') };
}

/**
 * Whether decompressSync can take a body of this encoding on this Node: all of them but zstd
 * on a Node without its own zstd stream (Node 20), which decompress() does off the thread.
 */
export function decompressesSync(encoding: ContentEncoding, inflaters: Inflaters): boolean {
  return encoding !== 'zstd' || inflaters.zstd.native;
}

/**
 * Decompresses body, refusing with payload_too_large if the output would exceed maxBytes,
 * without allocating much past maxBytes. The result is a new buffer (zstd on a Node without
 * its own zstd) or, through decompressSync, a view that is only valid until the inflaters'
 * next use.
 */
export async function decompress(encoding: ContentEncoding, body: Uint8Array, maxBytes: number, inflaters = newInflaters()): Promise<Uint8Array> {
  return decompressesSync(encoding, inflaters) ? decompressSync(encoding, body, maxBytes, inflaters) : zstdOffThread(body, maxBytes);
}

/** decompress() on the calling thread, for the encodings decompressesSync() allows. */
export function decompressSync(encoding: ContentEncoding, body: Uint8Array, maxBytes: number, inflaters = newInflaters()): Uint8Array {
  if (encoding === 'identity') {
    if (body.byteLength > maxBytes) throw tooLarge('decompressed body', maxBytes);
    return body;
  }
  let out: Uint8Array | undefined;
  if (encoding === 'gzip') out = inflaters.gzip.inflate(body, maxBytes);
  else {
    out = inflaters.zstd.inflate(body, maxBytes, zstdCheckBounds(body, maxBytes));
  }
  if (!out) throw tooLarge('decompressed body', maxBytes);
  return out;
}

/** zstd through @mongodb-js/zstd, on libuv's pool, for a Node without its own zstd. */
async function zstdOffThread(body: Uint8Array, maxBytes: number): Promise<Uint8Array> {
  zstdCheckBounds(body, maxBytes);
  let out: Uint8Array;
  try {
    // A view on the same memory: the binding wants a Buffer.
    out = await zstdDecompress(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
  } catch (err) {
    // Everything libzstd reports here is about the data (corruption, size mismatch, checksum).
    throw badRequest('invalid zstd data', err);
  }
  // The bound makes this impossible; kept so a mistake in the walk cannot pass silently.
  if (out.byteLength > maxBytes) throw tooLarge('decompressed body', maxBytes);
  return out;
}

// ---- zstd frame walk (RFC 8878 §3.1) -------------------------------------------------------

const ZSTD_MAGIC = 0xfd2fb528;
/** Skippable frames: magic 0x184D2A50..0x184D2A5F (RFC 8878 §3.1.2). */
const SKIPPABLE_MAGIC = 0x184d2a50;
/** RFC 8878 §3.1.1.2.3: no block regenerates more than 128 KiB. */
const MAX_BLOCK_SIZE = 128 * 1024;
/**
 * RFC 9659 (updating RFC 8878 for HTTP): with the `zstd` content coding, encoders MUST NOT
 * need a window over 8 MB, so refusing larger windows (when also over the cap) refuses
 * nothing a conforming client sends.
 */
const MAX_HTTP_WINDOW = 8 * 1024 * 1024;

/**
 * What the walk of a zstd body found: the frames that hold data (skippable ones left out), a
 * bound of their output, and the largest decoder buffer any frame asks libzstd for (min of
 * content size and window).
 */
export type ZstdBounds = FrameLayout;

/**
 * Walks every frame and block header of a zstd body without decompressing. Throws
 * bad_request on malformed or truncated headers and payload_too_large as soon as the output
 * or the decoder's buffer could exceed the cap; returns the bounds otherwise.
 */
export function zstdCheckBounds(body: Uint8Array, maxBytes: number): ZstdBounds {
  // RFC 8878 §3.1: zstd data is one or more frames; libzstd also refuses an empty body.
  if (body.byteLength === 0) throw invalidZstd('empty body');
  const reader = new HeaderReader(body);
  const maxWindow = Math.max(maxBytes, MAX_HTTP_WINDOW);
  const bounds: ZstdBounds = { output: 0, window: 0, frames: [] };
  while (!reader.done()) {
    const start = reader.position();
    const magic = reader.u32();
    if ((magic & 0xfffffff0) >>> 0 === SKIPPABLE_MAGIC) {
      reader.skip(reader.u32()); // Frame_Size, then that many user bytes
      continue;
    }
    if (magic !== ZSTD_MAGIC) throw invalidZstd('bad frame magic');
    const header = readFrameHeader(reader);
    const budget = maxBytes - bounds.output;
    // A frame decodes to exactly its Frame_Content_Size or fails (libzstd compares at the end
    // of the frame), so a larger declared size is too large either way.
    if (header.contentSize !== undefined && header.contentSize > budget) throw tooLarge('decompressed body', maxBytes);
    // libzstd's streaming decoder allocates about min(content size, window) for the frame,
    // and a malicious compressed block can fill it before libzstd notices the block
    // regenerates too much (measured), so without a declared size the window must stay
    // near the cap too.
    const window = Math.min(header.contentSize ?? Infinity, header.windowSize);
    if (window > maxWindow) throw tooLarge('zstd window', maxWindow);
    bounds.window = Math.max(bounds.window, window);
    bounds.output += walkBlocks(reader, header, budget, maxBytes);
    bounds.frames.push({ start, end: reader.position() });
  }
  return bounds;
}

interface FrameHeader {
  windowSize: number;
  contentSize: number | undefined;
  hasChecksum: boolean;
}

/** Frame_Header after the magic number (RFC 8878 §3.1.1.1). */
function readFrameHeader(reader: HeaderReader): FrameHeader {
  // Frame_Header_Descriptor (§3.1.1.1.1).
  const descriptor = reader.u8();
  const fcsFlag = descriptor >> 6;
  const singleSegment = (descriptor & 0x20) !== 0;
  if (descriptor & 0x08) throw invalidZstd('reserved bit set');

  // Window_Descriptor (§3.1.1.1.2): absent in single-segment frames.
  let windowSize = 0;
  if (!singleSegment) {
    const wd = reader.u8();
    const windowBase = 2 ** (10 + (wd >> 3));
    windowSize = windowBase + (windowBase / 8) * (wd & 7);
  }

  // Dictionary_ID (§3.1.1.1.3): we hold no dictionaries, so a frame that needs one cannot
  // be decoded. 0 means "no dictionary".
  if (reader.uintLE([0, 1, 2, 4][descriptor & 3]!) !== 0) throw invalidZstd('dictionary required');

  // Frame_Content_Size (§3.1.1.1.4): the 2-byte form is offset by 256; in a single-segment
  // frame it is always present and is also the window size.
  const fcsBytes = [singleSegment ? 1 : 0, 2, 4, 8][fcsFlag]!;
  const contentSize = fcsBytes === 0 ? undefined : reader.uintLE(fcsBytes) + (fcsBytes === 2 ? 256 : 0);
  if (singleSegment) windowSize = contentSize!;
  return { windowSize, contentSize, hasChecksum: (descriptor & 0x04) !== 0 };
}

/**
 * Walks a frame's blocks (RFC 8878 §3.1.1.2) and returns a bound of what they regenerate;
 * refuses as soon as that bound passes the budget, so a bomb costs a walk of about
 * cap / 128 KiB blocks, not of the whole body.
 */
function walkBlocks(reader: HeaderReader, frame: FrameHeader, budget: number, maxBytes: number): number {
  // A declared content size is only a bound if the decoder enforces it as it goes. libzstd
  // 1.5.2 streaming sizes its output buffer to min(Frame_Content_Size, window + 2 blocks) and
  // never wraps that buffer when it holds the whole frame, so with FCS <= Window_Size it
  // stops at FCS ("Destination buffer is too small"). With a larger FCS the buffer wraps and
  // the size is only compared at the end of the frame, after decoding everything
  // (measured: 250 MiB for a frame declaring 4 MiB). So FCS counts only in the first case.
  const limit = frame.contentSize !== undefined && frame.contentSize <= frame.windowSize ? frame.contentSize : Infinity;
  // Block_Maximum_Size (§3.1.1.2.3) caps both the Block_Size field and what a compressed
  // block regenerates; libzstd rejects a block that regenerates more.
  const blockMax = Math.min(frame.windowSize, MAX_BLOCK_SIZE);
  let bound = 0; // the most all blocks so far can regenerate
  let exact = 0; // what the raw and RLE blocks among them regenerate, exactly
  let last = false;
  while (!last) {
    const header = reader.uintLE(3);
    last = (header & 1) === 1;
    const type = (header >> 1) & 3;
    const size = header >>> 3;
    if (size > blockMax) throw invalidZstd('block larger than Block_Maximum_Size');
    if (type === 0) {
      reader.skip(size); // Raw_Block: Block_Size bytes, copied as is
      bound += size;
      exact += size;
    } else if (type === 1) {
      reader.skip(1); // RLE_Block: one byte repeated Block_Size times
      bound += size;
      exact += size;
    } else if (type === 2) {
      reader.skip(size); // Compressed_Block: Block_Size is the compressed size
      bound += blockMax;
    } else {
      throw invalidZstd('reserved block type');
    }
    if (exact > (frame.contentSize ?? Infinity)) throw invalidZstd('blocks exceed Frame_Content_Size');
    if (Math.min(bound, limit) > budget) throw tooLarge('decompressed body', maxBytes);
  }
  if (frame.hasChecksum) reader.skip(4); // Content_Checksum (§3.1.1): low 32 bits of XXH64
  return Math.min(bound, limit);
}

/** Little-endian reads that refuse to run past the end of the body (truncation). */
class HeaderReader {
  private pos = 0;
  constructor(private readonly bytes: Uint8Array) {}

  done(): boolean {
    return this.pos >= this.bytes.byteLength;
  }

  position(): number {
    return this.pos;
  }

  u8(): number {
    return this.uintLE(1);
  }

  u32(): number {
    return this.uintLE(4);
  }

  /** Up to 8 bytes; beyond 2^53 precision is lost, which only matters far above any cap. */
  uintLE(length: number): number {
    this.need(length);
    let value = 0;
    for (let i = length - 1; i >= 0; i--) value = value * 256 + this.bytes[this.pos + i]!;
    this.pos += length;
    return value;
  }

  skip(length: number): void {
    this.need(length);
    this.pos += length;
  }

  private need(length: number): void {
    if (this.pos + length > this.bytes.byteLength) throw invalidZstd('truncated');
  }
}

function invalidZstd(reason: string): SluiceError {
  // The client sees the fixed message; the reason goes to logs through the cause.
  return badRequest('invalid zstd data', new Error(reason));
}

function tooLarge(what: string, maxBytes: number): SluiceError {
  return new SluiceError('payload_too_large', `${what} exceeds ${formatBytes(maxBytes)}`);
}

/** 10485760 → "10 MiB", 1536 → "1.5 KiB", 1000 → "1000 bytes". */
function formatBytes(bytes: number): string {
  for (const [unit, size] of [['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]] as const) {
    if (bytes >= size) return `${Number((bytes / size).toFixed(2))} ${unit}`;
  }
  return `${bytes} bytes`;
}
