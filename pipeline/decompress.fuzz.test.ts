/**
 * Fuzzing bounded decompression (decompress.ts, inflate.ts) with one reused pair of inflaters, as a worker
 * thread has: a valid gzip or zstd body comes back exactly when it fits the cap and is refused
 * with 413 when it does not; corrupted, truncated or random bodies and bombs are refused with a
 * 4xx or give bytes within the cap, and never leave the inflaters unable to serve the next body.
 * Settings and replay: test/fuzz.ts.
 */
import { gzipSync } from 'node:zlib';
import { compress as zstdCompress } from '@mongodb-js/zstd';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodesOrRefusesAsync, FUZZ_TEST_TIMEOUT_MS, fuzzParameters } from '../test/fuzz.ts';
import { decompress, newInflaters, zstdCheckBounds, type ContentEncoding } from './decompress.ts';

const inflaters = newInflaters();
const ENCODINGS: Array<Exclude<ContentEncoding, 'identity'>> = ['gzip', 'zstd'];

/** Data that compresses a little (random bytes) or a lot (a short run repeated). */
const data = fc.oneof(
  fc.uint8Array({ maxLength: 4096 }),
  fc.tuple(fc.uint8Array({ minLength: 1, maxLength: 16 }), fc.nat({ max: 200_000 })).map(([run, times]) => Buffer.concat(Array.from({ length: Math.max(1, Math.floor(times / run.length)) }, () => Buffer.from(run)))),
);

async function compress(encoding: 'gzip' | 'zstd', bytes: Uint8Array, level: number): Promise<Uint8Array> {
  return encoding === 'gzip' ? gzipSync(bytes, { level }) : zstdCompress(Buffer.from(bytes), level);
}

/** A body `encoding` compressed, as one gzip member or two, and the data it holds. */
const compressed = (encoding: 'gzip' | 'zstd') =>
  fc.tuple(data, data, fc.boolean(), fc.integer({ min: 1, max: 9 })).map(([a, b, two, level]) => ({ encoding, parts: two ? [a, b] : [a], level }));

async function bodyOf({ encoding, parts, level }: { encoding: 'gzip' | 'zstd'; parts: Uint8Array[]; level: number }): Promise<{ body: Uint8Array; plain: Buffer }> {
  const bodies = await Promise.all(parts.map((part) => compress(encoding, part, level)));
  return { body: Buffer.concat(bodies), plain: Buffer.concat(parts) };
}

function zstdFits(body: Uint8Array, cap: number): boolean {
  try {
    zstdCheckBounds(body, cap);
    return true;
  } catch {
    return false;
  }
}

/** The inflaters still inflate a known body right after whatever came before. */
async function inflatersStillWork(): Promise<void> {
  for (const encoding of ENCODINGS) {
    const out = await decompress(encoding, await compress(encoding, Buffer.from('still working'), 3), 1024, inflaters);
    expect(Buffer.from(out).toString()).toBe('still working');
  }
}

describe('bounded decompression under fuzzing', () => {
  for (const encoding of ENCODINGS) {
    it(`${encoding}: a valid body comes back exactly within the cap, and is refused with 413 over it`, async () => {
      await fc.assert(fc.asyncProperty(compressed(encoding), fc.nat({ max: 300_000 }), async (input, cap) => {
        const { body, plain } = await bodyOf(input);
        // zstd is refused before decompressing when a sound bound of its output passes the cap
        // (zstdCheckBounds: a block of unknown size counts as the most a block holds).
        const fits = plain.length <= cap && (encoding === 'gzip' || zstdFits(body, cap));
        const out = await decodesOrRefusesAsync(() => decompress(encoding, body, cap, inflaters));
        if (fits) expect(Buffer.from(out as Uint8Array).equals(plain)).toBe(true);
        else expect(out).toMatchObject({ code: 'payload_too_large' });
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${encoding}: a corrupted or truncated body gives bytes within the cap or a 4xx`, async () => {
      // zstd compresses asynchronously: the body is made and broken inside the property.
      await fc.assert(fc.asyncProperty(compressed(encoding), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }), fc.option(fc.nat()), fc.nat({ max: 300_000 }), async (input, edits, cut, cap) => {
        const { body } = await bodyOf(input);
        const broken = Buffer.from(body);
        for (const [at, byte] of edits) broken[at % broken.length] = byte;
        const sent = cut === null ? broken : broken.subarray(0, cut % (broken.length + 1));
        const out = await decodesOrRefusesAsync(() => decompress(encoding, sent, cap, inflaters));
        if (out instanceof Uint8Array) expect(out.byteLength).toBeLessThanOrEqual(cap);
        await inflatersStillWork();
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${encoding}: random bytes, and random bytes after the format's magic number, give bytes within the cap or a 4xx`, async () => {
      const magic = encoding === 'gzip' ? [0x1f, 0x8b, 0x08] : [0x28, 0xb5, 0x2f, 0xfd];
      const bodies = fc.oneof(fc.uint8Array({ maxLength: 512 }), fc.uint8Array({ maxLength: 512 }).map((rest) => Uint8Array.from([...magic, ...rest])));
      await fc.assert(fc.asyncProperty(bodies, fc.nat({ max: 1 << 20 }), async (body, cap) => {
        const out = await decodesOrRefusesAsync(() => decompress(encoding, body, cap, inflaters));
        if (out instanceof Uint8Array) expect(out.byteLength).toBeLessThanOrEqual(cap);
        await inflatersStillWork();
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${encoding}: a bomb is refused with 413, and the inflaters serve the next body`, async () => {
      const bombs = fc.tuple(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 0, max: 255 }), fc.integer({ min: 1, max: 64 }));
      await fc.assert(fc.asyncProperty(bombs, async ([mebibytes, fill, capKiB]) => {
        const body = await compress(encoding, Buffer.alloc(mebibytes << 20, fill), 9);
        const out = await decodesOrRefusesAsync(() => decompress(encoding, body, capKiB << 10, inflaters));
        expect(out).toMatchObject({ code: 'payload_too_large' });
        await inflatersStillWork();
      }), { ...fuzzParameters(), numRuns: Math.min(fuzzParameters().numRuns!, 40) });
    }, FUZZ_TEST_TIMEOUT_MS);
  }

  it('identity: a body within the cap comes back as sent, one over it is refused with 413', async () => {
    await fc.assert(fc.asyncProperty(fc.uint8Array({ maxLength: 2048 }), fc.nat({ max: 4096 }), async (body, cap) => {
      const out = await decodesOrRefusesAsync(() => decompress('identity', body, cap, inflaters));
      if (body.byteLength <= cap) expect(out).toBe(body);
      else expect(out).toMatchObject({ code: 'payload_too_large' });
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);
});
