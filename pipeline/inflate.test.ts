import { gzipSync } from 'node:zlib';
import { compress as zstdCompress } from '@mongodb-js/zstd';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { decompressesSync, decompressSync, newInflaters, type Inflaters } from './decompress.ts';
import { Inflater } from './inflate.ts';

const KiB = 1024;
const MiB = 1024 * KiB;

/** Distinct, partly compressible bytes: `seed` makes each body different. */
function sample(length: number, seed: number): Buffer {
  const out = Buffer.alloc(length);
  let x = seed;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = i % 3 === 0 ? x >>> 24 : 0x41 + ((i + seed) % 26);
  }
  return out;
}

/** A gzip body whose trailer claims `isize` bytes (zlib refuses it, once it gets there). */
function withIsize(body: Buffer, isize: number): Buffer {
  const copy = Buffer.from(body);
  copy.writeUInt32LE(isize >>> 0, copy.length - 4);
  return copy;
}

function refusalCode(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SluiceError);
    return (err as SluiceError).code;
  }
  throw new Error('expected a refusal');
}

describe('Inflater: gzip', () => {
  it('inflates into one buffer, reused from body to body (the native handle is there on this Node)', () => {
    const inflater = new Inflater('gzip');
    const a = inflater.inflate(gzipSync(sample(10 * KiB, 1)), MiB)!;
    const b = inflater.inflate(gzipSync(sample(20 * KiB, 2)), MiB)!;
    // Same memory: had the gunzipSync fallback been taken, every body would have its own.
    expect(b.buffer).toBe(a.buffer);
    expect(Buffer.from(b).equals(sample(20 * KiB, 2))).toBe(true);
  });

  it('gives each body exactly its own bytes, small after large, and grows past a small size hint', () => {
    const inflater = new Inflater('gzip');
    const bodies = [sample(300 * KiB, 3), sample(5, 4), sample(0, 5), sample(70 * KiB, 6), sample(MiB, 7)];
    for (const data of bodies) expect(Buffer.from(inflater.inflate(gzipSync(data), 2 * MiB)!).equals(data)).toBe(true);
    // The size hint is the last member's (10 bytes), the body 210 KiB: the buffer grows as zlib fills it.
    const parts = [sample(200 * KiB, 8), sample(10, 9)];
    expect(Buffer.from(new Inflater('gzip').inflate(Buffer.concat(parts.map((part) => gzipSync(part))), 2 * MiB)!).equals(Buffer.concat(parts))).toBe(true);
  });

  it('inflates every member of a multi-member body', () => {
    const inflater = new Inflater('gzip');
    const parts = [sample(100 * KiB, 9), sample(3, 10), sample(200 * KiB, 11)];
    const out = inflater.inflate(Buffer.concat(parts.map((part) => gzipSync(part))), MiB)!;
    expect(Buffer.from(out).equals(Buffer.concat(parts))).toBe(true);
  });

  it('still refuses a bomb after a large legitimate body grew the buffer, then inflates the next body', () => {
    const inflater = new Inflater('gzip');
    const cap = 2 * MiB;
    expect(inflater.inflate(gzipSync(sample(cap, 12)), cap)!.byteLength).toBe(cap);
    // Zeros compress ~1000:1; whatever the trailer claims, one byte past the cap refuses.
    const bomb = gzipSync(Buffer.alloc(20 * MiB));
    for (const claimed of [0, 100, cap, 20 * MiB, 2 ** 32 - 1]) expect(inflater.inflate(withIsize(bomb, claimed), cap)).toBeUndefined();
    expect(inflater.inflate(gzipSync(Buffer.alloc(cap + 1)), cap)).toBeUndefined();
    expect(inflater.inflate(gzipSync(Buffer.alloc(cap)), cap)!.byteLength).toBe(cap);
    const data = sample(50 * KiB, 13);
    expect(Buffer.from(inflater.inflate(gzipSync(data), cap)!).equals(data)).toBe(true);
  });

  it('refuses bad data as bad_request, then works on with a fresh zlib stream', () => {
    const inflater = new Inflater('gzip');
    const good = sample(40 * KiB, 14);
    for (const bad of [gzipSync(good).subarray(0, 200), Buffer.from('not gzip at all'), Buffer.alloc(0), Buffer.concat([gzipSync('ok'), Buffer.from('junk')])]) {
      expect(refusalCode(() => decompressSync('gzip', bad, MiB, { ...newInflaters(), gzip: inflater }))).toBe('bad_request');
      expect(Buffer.from(inflater.inflate(gzipSync(good), MiB)!).equals(good)).toBe(true);
    }
  });

  it('refuses past the cap as payload_too_large through decompressSync', () => {
    expect(refusalCode(() => decompressSync('gzip', gzipSync(Buffer.alloc(MiB + 1)), MiB))).toBe('payload_too_large');
  });
});

/** Node 22.15+ and 24 have their own zstd stream; Node 20 decompresses zstd off the thread (decompress.ts). */
const nativeZstd = new Inflater('zstd').native;

const zstd = (data: Uint8Array, level = 3) => zstdCompress(Buffer.from(data), level);
/** A skippable frame (RFC 8878 §3.1.2) holding `bytes`. */
function skippable(bytes: number): Buffer {
  const frame = Buffer.alloc(8 + bytes, 7);
  frame.writeUInt32LE(0x184d2a5a, 0);
  frame.writeUInt32LE(bytes, 4);
  return frame;
}

describe.runIf(nativeZstd)('Inflater: zstd, on a Node with its own zstd stream', () => {
  it('is taken synchronously and inflates into one buffer, reused from body to body', async () => {
    const inflaters = newInflaters();
    expect(decompressesSync('zstd', inflaters)).toBe(true);
    const a = decompressSync('zstd', await zstd(sample(10 * KiB, 1)), MiB, inflaters);
    const b = decompressSync('zstd', await zstd(sample(300 * KiB, 2)), MiB, inflaters);
    const c = decompressSync('zstd', await zstd(sample(20 * KiB, 3)), MiB, inflaters);
    // The second grew the buffer past the first's; the third reuses the second's.
    expect(c.buffer).toBe(b.buffer);
    expect(a.byteLength).toBe(10 * KiB);
    expect(Buffer.from(c).equals(sample(20 * KiB, 3))).toBe(true);
  });

  it('inflates every frame, skipping skippable ones, into one output', async () => {
    const parts = [sample(200 * KiB, 4), sample(3, 5), sample(70 * KiB, 6)];
    const body = Buffer.concat([skippable(5), await zstd(parts[0]!), skippable(0), await zstd(parts[1]!, 19), await zstd(parts[2]!, 1), skippable(9)]);
    expect(Buffer.from(decompressSync('zstd', body, MiB, newInflaters())).equals(Buffer.concat(parts))).toBe(true);
  });

  it('accepts exactly the cap and refuses one byte more, over several frames', async () => {
    const inflaters = newInflaters();
    const half = await zstd(Buffer.alloc(MiB / 2, 1));
    expect(decompressSync('zstd', Buffer.concat([half, half]), MiB, inflaters).byteLength).toBe(MiB);
    const one = await zstd(Buffer.alloc(1));
    expect(refusalCode(() => decompressSync('zstd', Buffer.concat([half, half, one]), MiB, inflaters))).toBe('payload_too_large');
    expect(Buffer.from(decompressSync('zstd', await zstd(sample(50 * KiB, 7)), MiB, inflaters)).equals(sample(50 * KiB, 7))).toBe(true);
  });

  it('refuses corrupt data as bad_request, then works on with a fresh stream', async () => {
    const inflaters: Inflaters = newInflaters();
    const good = sample(40 * KiB, 8);
    // With the frame's checksum: a byte changed in a raw block is found by nothing else.
    const zlib = await import('node:zlib') as unknown as { zstdCompressSync(data: Uint8Array, options: object): Buffer; constants: Record<string, number> };
    const body = zlib.zstdCompressSync(good, { params: { [zlib.constants.ZSTD_c_checksumFlag!]: 1 } });
    const corrupt = Buffer.from(body);
    corrupt[Math.floor(corrupt.length / 2)]! ^= 0xff;
    const checksumWrong = Buffer.from(body);
    checksumWrong[checksumWrong.length - 1]! ^= 0xff;
    for (const bad of [corrupt, checksumWrong, Buffer.from('\x28\xb5\x2f\xfd not zstd past the magic')]) {
      expect(refusalCode(() => decompressSync('zstd', bad, MiB, inflaters))).toBe('bad_request');
      expect(Buffer.from(decompressSync('zstd', body, MiB, inflaters)).equals(good)).toBe(true);
    }
  });
});
