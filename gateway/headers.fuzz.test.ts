/**
 * Fuzzing the request headers the gateway reads before any body: Content-Type (the OTLP format),
 * Content-Encoding and X-Forwarded-For. Whatever a client sends, each answers one of its known
 * values or "none", and never throws. Settings and replay: test/fuzz.ts.
 */
import { isIP } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FUZZ_TEST_TIMEOUT_MS, fuzzParameters } from '../test/fuzz.ts';
import { parseContentEncoding } from '../pipeline/decompress.ts';
import { clientIpResolver } from './client-ip.ts';
import { formatOf } from './otlp-http.ts';

/** Names an object answers for through its prototype: a lookup table must not. */
const PROTOTYPE_KEYS = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__', 'isPrototypeOf'];

/** A header value: a known one in odd case and spacing, with parameters, a prototype key, or anything. */
function headerValue(known: string[]): fc.Arbitrary<string | undefined> {
  const spaced = fc.tuple(fc.constantFrom(...known), fc.constantFrom('', ' ', '\t'), fc.boolean()).map(([value, space, upper]) => `${space}${upper ? value.toUpperCase() : value}${space}`);
  return fc.oneof(
    spaced,
    fc.tuple(spaced, fc.string({ maxLength: 20 })).map(([value, parameters]) => `${value};${parameters}`),
    fc.constantFrom(...PROTOTYPE_KEYS),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.constant(undefined),
  );
}

const MEDIA_TYPES: Record<string, 'protobuf' | 'json'> = { 'application/x-protobuf': 'protobuf', 'application/protobuf': 'protobuf', 'application/json': 'json' };
const ENCODINGS: Record<string, 'identity' | 'gzip' | 'zstd'> = { '': 'identity', identity: 'identity', gzip: 'gzip', 'x-gzip': 'gzip', zstd: 'zstd' };

const ipv4 = fc.ipV4();
const address = fc.oneof(ipv4, fc.ipV6(), ipv4.map((ip) => `::ffff:${ip}`), fc.constantFrom('fe80::1%eth0', '::1', '10.0.0.1', '10.255.255.255'), fc.string({ maxLength: 20 }));
const forwardedFor = fc.oneof(
  fc.constant(undefined),
  fc.array(fc.tuple(address, fc.constantFrom('', ' ', '  ')).map(([hop, space]) => `${space}${hop}${space}`), { maxLength: 6 }).map((hops) => hops.join(',')),
  fc.string({ unit: 'binary', maxLength: 60 }),
);
const proxies = fc.array(fc.oneof(ipv4, fc.tuple(ipv4, fc.integer({ min: 0, max: 32 })).map(([ip, bits]) => `${ip}/${bits}`), fc.constantFrom('10.0.0.0/8', '::1', 'fe80::/10')), { maxLength: 3 });

const normalise = (address: string) => (address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address);

describe('request headers under fuzzing', () => {
  it('Content-Type names protobuf, JSON or nothing, and only for its media types', () => {
    fc.assert(fc.property(headerValue(Object.keys(MEDIA_TYPES)), (header) => {
      const mediaType = header?.split(';')[0]!.trim().toLowerCase();
      expect(formatOf(header)).toBe(mediaType && Object.hasOwn(MEDIA_TYPES, mediaType) ? MEDIA_TYPES[mediaType] : undefined);
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);

  it('Content-Encoding names identity, gzip, zstd or nothing, and only for its codings', () => {
    fc.assert(fc.property(headerValue(Object.keys(ENCODINGS).filter(Boolean)), (header) => {
      const coding = (header ?? '').trim().toLowerCase();
      expect(parseContentEncoding(header)).toBe(Object.hasOwn(ENCODINGS, coding) ? ENCODINGS[coding] : undefined);
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);

  it('X-Forwarded-For gives the peer, or an address the header holds when the peer is a trusted proxy', () => {
    fc.assert(fc.property(proxies, address, forwardedFor, (trusted, remote, header) => {
      const resolve = clientIpResolver(trusted);
      const client = resolve(remote, header);
      if (client === normalise(remote)) return;
      expect(trusted.length).toBeGreaterThan(0);
      expect(isIP(client)).not.toBe(0);
      expect(header!.split(',').map((hop) => normalise(hop.trim()))).toContain(client);
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);
});
