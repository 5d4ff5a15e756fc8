import { constants, deflateRawSync, gzipSync } from 'node:zlib';
import { compress as zstdCompress } from '@mongodb-js/zstd';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { decompress, parseContentEncoding, zstdCheckBounds } from './decompress.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const CAP = 10 * MiB;
/** A correctness bound on what a refusal may cost, not a timing assertion. */
const MEMORY_ALLOWANCE = CAP + 64 * MiB;

// ---- zstd frames built by hand (RFC 8878 §3.1.1) -------------------------------------------
// @mongodb-js/zstd's compress never writes Frame_Content_Size (it streams, window 2 MiB at
// level 3), so frames that declare a size, and bombs, are written byte by byte here.

interface FrameOptions {
  /** Single_Segment_flag: no Window_Descriptor, Window_Size = Frame_Content_Size. */
  singleSegment?: boolean;
  /** Window_Descriptor exponent: Window_Size = 2^windowLog (mantissa 0). */
  windowLog?: number;
  contentSize?: number;
  /** Frame_Content_Size field length: 1 (single segment only), 2, 4 or 8. */
  contentSizeBytes?: 1 | 2 | 4 | 8;
  dictionaryId?: number;
  checksum?: boolean;
}

function le(value: number, bytes: number): number[] {
  return Array.from({ length: bytes }, (_, i) => Math.floor(value / 256 ** i) % 256);
}

/** Magic number and Frame_Header (§3.1.1.1). */
function frameHeader(o: FrameOptions = {}): number[] {
  const fcsBytes = o.contentSize === undefined ? 0 : (o.contentSizeBytes ?? (o.singleSegment ? 1 : 4));
  const fcsFlag = { 0: 0, 1: 0, 2: 1, 4: 2, 8: 3 }[fcsBytes]!;
  const didFlag = o.dictionaryId === undefined ? 0 : 2;
  const descriptor = (fcsFlag << 6) | (o.singleSegment ? 0x20 : 0) | (o.checksum ? 0x04 : 0) | didFlag;
  return [
    ...le(0xfd2fb528, 4),
    descriptor,
    ...(o.singleSegment ? [] : [((o.windowLog ?? 17) - 10) << 3]),
    ...(o.dictionaryId === undefined ? [] : le(o.dictionaryId, 2)),
    ...(fcsBytes === 0 ? [] : le(o.contentSize! - (fcsBytes === 2 ? 256 : 0), fcsBytes)),
  ];
}

/** Block_Header (§3.1.1.2): Last_Block bit, Block_Type (0 raw, 1 RLE, 2 compressed), Block_Size. */
function blockHeader(type: number, size: number, last: boolean): number[] {
  return le(size * 8 + type * 2 + (last ? 1 : 0), 3);
}
const rawBlock = (content: number[], last = false) => [...blockHeader(0, content.length, last), ...content];
const rleBlock = (byte: number, size: number, last = false) => [...blockHeader(1, size, last), byte];
const compressedBlock = (content: number[], last = false) => [...blockHeader(2, content.length, last), ...content];

function frame(o: FrameOptions, blocks: number[][], checksum: number[] = []): Buffer {
  return Buffer.from([...frameHeader(o), ...blocks.flat(), ...checksum]);
}

/** A frame of n RLE blocks of `size` bytes each: 4 input bytes per block of output. */
function rleFrame(o: FrameOptions, n: number, size: number): Buffer {
  const header = frameHeader(o);
  const out = Buffer.alloc(header.length + 4 * n);
  out.set(header);
  out.fill(Buffer.from(rleBlock(0x61, size)), header.length);
  out.set(rleBlock(0x61, size, true), out.length - 4);
  return out;
}

/**
 * A Compressed_Block (§3.1.1.3) that expands to `sequences` × 65539 bytes, written by hand:
 * no literals (Raw_Literals_Block of size 0), then `sequences` sequences whose three codes
 * all use RLE_Mode (one symbol, zero-bit FSE states): Literals_Length code 0, Offset code 2
 * with extra bits 0 (Offset_Value 4 → offset 1), Match_Length code 52 with 16 extra bits 0
 * (length 65539). All extra bits are zero, so the backward bitstream is zero bytes and a
 * final byte holding the end marker bit. Needs one byte of history before it.
 */
function expandingBlock(sequences: number): number[] {
  const bits = 18 * sequences;
  return [
    0x00,
    ...(sequences < 128 ? [sequences] : [(sequences >> 8) + 128, sequences & 255]),
    0x54, 0, 2, 52, // modes (LL, OF, ML all RLE_Mode), then the three RLE symbols
    ...new Array<number>(Math.floor(bits / 8)).fill(0),
    1 << (bits % 8),
  ];
}

// ---- gzip bombs --------------------------------------------------------------------------

/**
 * One gzip member whose deflate stream repeats the compression of 1 MiB of zeros, ended by a
 * full flush so every copy is byte-identical and independent: `compressedBytes` of it inflate
 * to about 1000× as much. The CRC/ISIZE trailer is left zero: inflation is expected to stop
 * at the cap long before reaching it.
 */
function singleMemberGzipBomb(compressedBytes: number): Buffer {
  const chunk = deflateRawSync(Buffer.alloc(MiB), { level: 9, finishFlush: constants.Z_FULL_FLUSH });
  const copies = Math.floor(compressedBytes / chunk.length);
  const header = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
  const finalBlock = Buffer.from([0x03, 0x00]); // an empty fixed-Huffman block with BFINAL set
  return Buffer.concat([header, ...new Array<Buffer>(copies).fill(chunk), finalBlock, Buffer.alloc(8)]);
}

/** Valid gzip throughout: copies of a member holding 1 MiB of zeros (RFC 1952 §2.2 allows many). */
function multiMemberGzipBomb(compressedBytes: number): Buffer {
  const member = gzipSync(Buffer.alloc(MiB), { level: 9 });
  return Buffer.concat(new Array<Buffer>(Math.floor(compressedBytes / member.length)).fill(member));
}

// ---- helpers ------------------------------------------------------------------------------

/**
 * Runs fn and returns how far the process's RSS rose above the RSS before it, at its peak.
 * When the kernel's high-water mark (maxRSS) rose during fn, that is the peak — an upper bound
 * on what fn cost even when it runs on another thread (libzstd runs on the libuv pool). When it
 * did not (an earlier peak, e.g. building the bomb, was higher), the peak of RSS sampled every
 * few milliseconds while fn runs stands in: that earlier peak is not fn's.
 */
async function peakGrowth(fn: () => Promise<unknown>): Promise<number> {
  const before = process.memoryUsage.rss();
  const highWaterBefore = process.resourceUsage().maxRSS * 1024;
  let sampled = before;
  const sampler = setInterval(() => (sampled = Math.max(sampled, process.memoryUsage.rss())), 2);
  try {
    await fn().catch(() => undefined);
  } finally {
    clearInterval(sampler);
  }
  const highWaterAfter = process.resourceUsage().maxRSS * 1024;
  const peak = highWaterAfter > highWaterBefore ? highWaterAfter : Math.max(sampled, process.memoryUsage.rss());
  return peak - before;
}

async function refusal(promise: Promise<unknown>): Promise<SluiceError> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(SluiceError);
  return err as SluiceError;
}

/** Mixed, partly compressible bytes. */
function sample(length: number): Buffer {
  const out = Buffer.alloc(length);
  let x = 12345;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = i % 3 === 0 ? x >>> 24 : 0x41 + (i % 26);
  }
  return out;
}

// Memory first: maxRSS is a process-wide high-water mark, so later, larger tests would blur it.
describe('bombs stay near the cap', () => {
  it('a 10 MiB single-member gzip bomb (~10 GiB inflated) is refused', async () => {
    const bomb = singleMemberGzipBomb(CAP);
    let err: unknown;
    const growth = await peakGrowth(() => decompress('gzip', bomb, CAP).catch((e: unknown) => { err = e; }));
    expect(err).toMatchObject({ code: 'payload_too_large', message: 'decompressed body exceeds 10 MiB' });
    expect(growth).toBeLessThan(MEMORY_ALLOWANCE);
  });

  it('a 10 MiB multi-member gzip bomb is refused: the cap counts all members', async () => {
    const bomb = multiMemberGzipBomb(CAP);
    let err: unknown;
    const growth = await peakGrowth(() => decompress('gzip', bomb, CAP).catch((e: unknown) => { err = e; }));
    expect(err).toMatchObject({ code: 'payload_too_large' });
    expect(growth).toBeLessThan(MEMORY_ALLOWANCE);
  });

  it('a 10 MiB zstd bomb without content size (320 GiB of RLE blocks) is refused before decoding', async () => {
    const bomb = rleFrame({ windowLog: 17 }, Math.floor(CAP / 4) - 2, 128 * KiB);
    let err: unknown;
    const growth = await peakGrowth(() => decompress('zstd', bomb, CAP).catch((e: unknown) => { err = e; }));
    expect(err).toMatchObject({ code: 'payload_too_large', message: 'decompressed body exceeds 10 MiB' });
    expect(growth).toBeLessThan(MEMORY_ALLOWANCE);
  });

  it('a zstd block that regenerates more than Block_Maximum_Size costs at most the window', async () => {
    // Passes the header walk (one compressed block counts 128 KiB); libzstd decodes it into
    // its window-sized buffer before noticing. Window 8 MiB, the block asks for 13 MB.
    const bomb = frame({ windowLog: 23 }, [rawBlock([0x61]), compressedBlock(expandingBlock(200), true)]);
    let err: unknown;
    const growth = await peakGrowth(() => decompress('zstd', bomb, CAP).catch((e: unknown) => { err = e; }));
    expect(err).toMatchObject({ code: 'bad_request', message: 'invalid zstd data' });
    expect(growth).toBeLessThan(MEMORY_ALLOWANCE);
  });

  it.each([
    ['single segment (window = content size)', { singleSegment: true, contentSize: 128 * KiB, contentSizeBytes: 4 } as const],
    ['content size under the window', { windowLog: 20, contentSize: 512 * KiB } as const],
  ])('libzstd stops at a declared content size its compressed blocks outgrow: %s', async (_name, options) => {
    // 2000 compressed blocks of 65539 bytes each (131 MB): the walk trusts the declared size
    // because it is <= the window, and libzstd's buffer for the frame is that size.
    const blocks = [rawBlock([0x61]), ...new Array<number[]>(1999).fill(compressedBlock(expandingBlock(1))), compressedBlock(expandingBlock(1), true)];
    const bomb = frame(options, blocks);
    expect(zstdCheckBounds(bomb, CAP).output).toBe(options.contentSize);
    let err: unknown;
    const growth = await peakGrowth(() => decompress('zstd', bomb, CAP).catch((e: unknown) => { err = e; }));
    expect(err).toMatchObject({ code: 'bad_request', message: 'invalid zstd data' });
    expect(growth).toBeLessThan(MEMORY_ALLOWANCE);
  });
});

describe('parseContentEncoding', () => {
  it.each([
    [undefined, 'identity'], ['', 'identity'], ['identity', 'identity'], ['IDENTITY', 'identity'],
    ['gzip', 'gzip'], [' GZip ', 'gzip'], ['x-gzip', 'gzip'], ['zstd', 'zstd'], ['ZSTD', 'zstd'],
  ])('%j → %s', (header, expected) => {
    expect(parseContentEncoding(header)).toBe(expected);
  });

  it.each(['br', 'deflate', 'compress', 'gzip, zstd', 'gzip;q=1', 'toString', '__proto__'])('%j is unsupported', (header) => {
    expect(parseContentEncoding(header)).toBeUndefined();
  });
});

describe('identity', () => {
  it('returns the body itself, up to exactly the cap', async () => {
    const body = new Uint8Array(CAP);
    expect(await decompress('identity', body, CAP)).toBe(body);
  });

  it('refuses cap + 1 bytes', async () => {
    expect(await refusal(decompress('identity', new Uint8Array(CAP + 1), CAP))).toMatchObject({
      code: 'payload_too_large', message: 'decompressed body exceeds 10 MiB',
    });
  });
});

describe('gzip', () => {
  it('round-trips', async () => {
    const data = sample(MiB);
    expect(Buffer.from(await decompress('gzip', gzipSync(data), CAP)).equals(data)).toBe(true);
  });

  it('inflates every member of a multi-member body', async () => {
    const body = Buffer.concat([gzipSync('hello, '), gzipSync('world')]);
    expect(Buffer.from(await decompress('gzip', body, CAP)).toString()).toBe('hello, world');
  });

  it('accepts a body that inflates to exactly the cap and refuses one byte more', async () => {
    expect((await decompress('gzip', gzipSync(Buffer.alloc(CAP)), CAP)).byteLength).toBe(CAP);
    expect(await refusal(decompress('gzip', gzipSync(Buffer.alloc(CAP + 1)), CAP))).toMatchObject({ code: 'payload_too_large' });
  });

  it('reports the configured cap in the message', async () => {
    expect(await refusal(decompress('gzip', gzipSync(Buffer.alloc(2 * MiB)), 1.5 * MiB))).toMatchObject({
      message: 'decompressed body exceeds 1.5 MiB',
    });
  });

  it.each([
    ['truncated', gzipSync(sample(10 * KiB)).subarray(0, 100)],
    ['missing its trailer', gzipSync(sample(10 * KiB)).subarray(0, -4)],
    ['garbage', Buffer.from('definitely not gzip')],
    ['followed by garbage', Buffer.concat([gzipSync('ok'), Buffer.from('junk')])],
    ['empty', Buffer.alloc(0)],
  ])('refuses a body that is %s as bad_request', async (_name, body) => {
    expect(await refusal(decompress('gzip', body, CAP))).toMatchObject({ code: 'bad_request', message: 'invalid gzip data' });
  });
});

describe('zstd', () => {
  it('round-trips what the library compresses (no content size, 2 MiB window)', async () => {
    const data = sample(3 * MiB);
    const body = await zstdCompress(data, 3);
    expect(Buffer.from(await decompress('zstd', body, CAP)).equals(data)).toBe(true);
    // The bound is tight for a normal encoder: full 128 KiB blocks, at most one block over.
    const { output } = zstdCheckBounds(body, CAP);
    expect(output).toBeGreaterThanOrEqual(data.length);
    expect(output).toBeLessThan(data.length + 128 * KiB);
  });

  it('decodes hand-built raw and RLE blocks with a declared content size', async () => {
    const body = frame({ contentSize: 305, contentSizeBytes: 2, windowLog: 10 }, [rawBlock([0x68, 0x69]), rleBlock(0x21, 303, true)]);
    expect(zstdCheckBounds(body, CAP).output).toBe(305);
    expect(Buffer.from(await decompress('zstd', body, CAP)).toString()).toBe('hi' + '!'.repeat(303));
  });

  it('concatenates the output of several frames and skips skippable frames', async () => {
    const skippable = Buffer.from([...le(0x184d2a5f, 4), ...le(3, 4), 1, 2, 3]);
    const body = Buffer.concat([skippable, await zstdCompress(Buffer.from('hello, ')), skippable, await zstdCompress(Buffer.from('world')), skippable]);
    expect(Buffer.from(await decompress('zstd', body, CAP)).toString()).toBe('hello, world');
  });

  it('accepts blocks adding up to exactly the cap and refuses one byte more, before decoding', async () => {
    const atCap = rleFrame({ windowLog: 20 }, 80, 128 * KiB);
    expect((await decompress('zstd', atCap, CAP)).byteLength).toBe(CAP);
    const overCap = Buffer.concat([atCap, frame({ windowLog: 10 }, [rleBlock(0, 1, true)])]);
    expect(await refusal(decompress('zstd', overCap, CAP))).toMatchObject({ code: 'payload_too_large' });
  });

  it('accepts what the library makes of exactly the cap', async () => {
    const body = await zstdCompress(sample(CAP), 3);
    expect((await decompress('zstd', body, CAP)).byteLength).toBe(CAP);
  });

  it('refuses a declared content size over the cap without walking the blocks', async () => {
    const body = frame({ windowLog: 20, contentSize: CAP + 1 }, [rleBlock(0, 1, true)]);
    expect(await refusal(decompress('zstd', body, CAP))).toMatchObject({ code: 'payload_too_large', message: 'decompressed body exceeds 10 MiB' });
  });

  it('does not trust a declared content size larger than the window', async () => {
    // 200 compressed blocks regenerating 65539 bytes each (13 MB), declaring 4 MiB. libzstd
    // would decode them all (its ring buffer wraps) before comparing with the declared size,
    // so the bound counts the blocks: 200 × 128 KiB.
    const blocks = [rawBlock([0x61]), ...new Array<number[]>(199).fill(compressedBlock(expandingBlock(1))), compressedBlock(expandingBlock(1), true)];
    const body = frame({ windowLog: 20, contentSize: 4 * MiB }, blocks);
    expect(await refusal(decompress('zstd', body, CAP))).toMatchObject({ code: 'payload_too_large' });
  });

  it('refuses raw and RLE blocks that regenerate more than the declared size, without decoding', () => {
    const body = rleFrame({ singleSegment: true, contentSize: 1000, contentSizeBytes: 2 }, 10_000, 1000);
    expect(() => zstdCheckBounds(body, CAP)).toThrow(expect.objectContaining({ code: 'bad_request' }));
  });

  it('counts a compressed block as Block_Maximum_Size: min(window, 128 KiB)', () => {
    const small = frame({ windowLog: 12 }, [compressedBlock([0, 0], true)]);
    expect(zstdCheckBounds(small, CAP).output).toBe(4 * KiB);
    const large = frame({ windowLog: 20 }, [compressedBlock([0, 0], true)]);
    expect(zstdCheckBounds(large, CAP).output).toBe(128 * KiB);
  });

  it('refuses a window over the cap and RFC 9659\'s 8 MB unless a smaller content size is declared', async () => {
    const noSize = frame({ windowLog: 24 }, [rawBlock([0x61], true)]);
    expect(await refusal(decompress('zstd', noSize, CAP))).toMatchObject({ code: 'payload_too_large', message: 'zstd window exceeds 10 MiB' });
    const sized = frame({ windowLog: 24, contentSize: 1, contentSizeBytes: 8 }, [rawBlock([0x61], true)]);
    expect(Buffer.from(await decompress('zstd', sized, CAP)).toString()).toBe('a');
    // Under a small cap, 8 MiB windows (common encoder defaults) are still accepted.
    expect(zstdCheckBounds(frame({ windowLog: 23 }, [rawBlock([0x61], true)]), 64 * KiB).window).toBe(8 * MiB);
  });

  it('reads the 8-byte content size and the checksum field', () => {
    const body = frame({ windowLog: 10, contentSize: 3, contentSizeBytes: 8, checksum: true }, [rawBlock([1, 2, 3], true)], [9, 9, 9, 9]);
    expect(zstdCheckBounds(body, CAP)).toEqual({ output: 3, window: 3, frames: [{ start: 0, end: body.length }] });
    expect(() => zstdCheckBounds(body.subarray(0, -1), CAP)).toThrow('invalid zstd data');
  });

  it('refuses every truncation of a frame as bad_request', async () => {
    const body = Buffer.concat([await zstdCompress(sample(200 * KiB)), Buffer.from([...le(0x184d2a50, 4), ...le(4, 4), 1, 2, 3, 4])]);
    for (const cut of [1, 3, 4, 5, 6, 8, 9, 100, body.length - 20, body.length - 13, body.length - 1]) {
      expect(await refusal(decompress('zstd', body.subarray(0, cut), CAP)), `cut at ${cut}`).toMatchObject({ code: 'bad_request' });
    }
  });

  it.each([
    ['garbage', Buffer.from('definitely not zstd')],
    ['empty', Buffer.alloc(0)],
    ['followed by zero padding', Buffer.concat([frame({ windowLog: 10 }, [rawBlock([1], true)]), Buffer.alloc(4)])],
    ['a reserved header bit', Buffer.from([...le(0xfd2fb528, 4), 0x08, 0, ...rawBlock([1], true)])],
    ['a reserved block type', frame({ windowLog: 10 }, [[...blockHeader(3, 1, true), 0]])],
    ['a dictionary it needs', frame({ windowLog: 10, dictionaryId: 7 }, [rawBlock([1], true)])],
    ['a block over Block_Maximum_Size', frame({ windowLog: 10 }, [rleBlock(0, 2 * KiB, true)])],
    ['a corrupt compressed block', frame({ windowLog: 17 }, [compressedBlock([0xff, 0xff, 0xff, 0xff], true)])],
  ])('refuses %s as bad_request', async (_name, body) => {
    expect(await refusal(decompress('zstd', body, CAP))).toMatchObject({ code: 'bad_request', message: 'invalid zstd data' });
  });

  it('decodes the hand-built expanding block when it stays within Block_Maximum_Size', async () => {
    // Keeps expandingBlock honest: the memory test above relies on it being valid zstd.
    const body = frame({ windowLog: 17 }, [rawBlock([0x61]), compressedBlock(expandingBlock(1), true)]);
    const out = Buffer.from(await decompress('zstd', body, CAP));
    expect(out.length).toBe(1 + 65539);
    expect(out.every((b) => b === 0x61)).toBe(true);
  });
});
