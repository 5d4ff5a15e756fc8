/**
 * Hostile OTLP protobuf requests, for fuzzing the two transcoders against each other
 * (pipeline/wasm/transcoder.fuzz.test.ts). The valid requests of otlp-arbitraries.ts are encoded
 * again by a protobuf writer of our own, guided by the message types of proto/, which can at
 * random: pad varints (non-minimal encodings, up to ten bytes and past them), give a field the
 * wrong wire type, put invalid UTF-8 into a string, get a length wrong, write repeated numbers
 * packed or one by one; the result may then be cut short. And requests hostile by their shape:
 * attribute values nested around the depth limit, more than 10,000 attributes, doubles of every
 * bit pattern (NaNs with payloads, subnormals, infinities).
 */
import fc from 'fast-check';
import type protobuf from 'protobufjs';
import { MAX_ANYVALUE_DEPTH } from '../pipeline/otlp/anyvalue-json.ts';
import { validRequest } from './otlp-arbitraries.ts';
import type { Signal } from '../pipeline/otlp/index.ts';
import { requestType } from './otlp-requests.ts';

/** A double given by its bits, where the request object has a number (any NaN, not only JavaScript's). */
export class DoubleBits {
  constructor(readonly bits: bigint) {}
}

/** How often each kind of damage is done, per occasion (0: never). */
export interface Damage {
  /** Extra bytes on a varint (non-minimal; past ten bytes, the reader refuses it). */
  padVarint: number;
  /** A tag with another wire type than its field's. */
  wrongWireType: number;
  /** Invalid UTF-8 spliced into a string. */
  invalidUtf8: number;
  /** A length a few bytes off. */
  wrongLength: number;
}

export const NO_DAMAGE: Damage = { padVarint: 0, wrongWireType: 0, invalidUtf8: 0, wrongLength: 0 };

const INVALID_UTF8 = [[0xff], [0x80], [0xc0, 0x80], [0xc3], [0xed, 0xa0, 0x80], [0xe0, 0x80, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf0, 0x80, 0x80, 0x80], [0xe2, 0x82]];
const VARINT_TYPES = new Set(['int32', 'int64', 'uint32', 'uint64', 'bool', 'sint32', 'sint64']);
const FIXED64_TYPES = new Set(['fixed64', 'sfixed64', 'double']);
const FIXED32_TYPES = new Set(['fixed32', 'sfixed32', 'float']);

/** A protobuf writer that damages what it writes as `damage` says, drawing from `random`. */
class DamagingWriter {
  readonly bytes: number[] = [];

  constructor(readonly damage: Damage, readonly random: () => number) {}

  private chance(p: number): boolean {
    return p > 0 && this.random() < p;
  }

  varint(value: bigint): void {
    let v = BigInt.asUintN(64, value);
    const out: number[] = [];
    do {
      out.push(Number(v & 0x7fn));
      v >>= 7n;
    } while (v > 0n);
    if (this.chance(this.damage.padVarint)) {
      // Continuation bytes of zeros: the same value, written longer (past 10 bytes: refused).
      const extra = 1 + Math.floor(this.random() * (this.random() < 0.01 ? 12 : 10 - out.length));
      for (let i = 0; i < extra; i++) out.push(0);
    }
    for (let i = 0; i < out.length; i++) this.bytes.push(i < out.length - 1 ? out[i]! | 0x80 : out[i]!);
  }

  tag(field: number, wireType: number): void {
    let type = wireType;
    if (this.chance(this.damage.wrongWireType)) type = (wireType + 1 + Math.floor(this.random() * 7)) % 8;
    this.varint(BigInt((field << 3) | type));
  }

  fixed(value: bigint, bytes: number): void {
    for (let i = 0; i < bytes; i++) this.bytes.push(Number((BigInt.asUintN(64, value) >> BigInt(8 * i)) & 0xffn));
  }

  /** A length-delimited payload, its length maybe a few bytes off. */
  lengthDelimited(payload: number[]): void {
    let length = payload.length;
    if (this.chance(this.damage.wrongLength)) length = Math.max(0, length + Math.floor(this.random() * 7) - 3);
    this.varint(BigInt(length));
    for (const byte of payload) this.bytes.push(byte);
  }

  utf8(text: string): number[] {
    const bytes = [...Buffer.from(text, 'utf8')];
    if (this.chance(this.damage.invalidUtf8)) {
      const bad = INVALID_UTF8[Math.floor(this.random() * INVALID_UTF8.length)]!;
      bytes.splice(Math.floor(this.random() * (bytes.length + 1)), 0, ...bad);
    }
    return bytes;
  }
}

function doubleBits(value: unknown): bigint {
  if (value instanceof DoubleBits) return value.bits;
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Number(value), true);
  return view.getBigUint64(0, true);
}

function scalar(w: DamagingWriter, type: string, value: unknown): void {
  if (type === 'double' || FIXED64_TYPES.has(type)) w.fixed(type === 'double' ? doubleBits(value) : BigInt(value as string), 8);
  else if (type === 'float') w.fixed(BigInt(new Uint32Array(new Float32Array([Number(value)]).buffer)[0]!), 4);
  else if (FIXED32_TYPES.has(type)) w.fixed(BigInt.asUintN(32, BigInt(value as number)), 4);
  else if (type === 'sint32' || type === 'sint64') {
    const v = BigInt(value as string);
    w.varint(v >= 0n ? v * 2n : -v * 2n - 1n);
  } else if (type === 'bool') w.varint(value ? 1n : 0n);
  else w.varint(BigInt(value as string)); // int32, int64, uint32, uint64, enums
}

function wireTypeOf(type: string): number {
  if (FIXED64_TYPES.has(type)) return 1;
  if (FIXED32_TYPES.has(type)) return 5;
  if (VARINT_TYPES.has(type)) return 0;
  return 2;
}

/** Writes `message` (shaped as protobufjs takes it: camelCase names, numbers or decimal strings, Uint8Arrays) as a `type`. */
function writeMessage(w: DamagingWriter, type: protobuf.Type, message: Record<string, unknown>): void {
  for (const field of type.fieldsArray) {
    const value = message[field.name];
    if (value === undefined || value === null) continue;
    const values = field.repeated ? (value as unknown[]) : [value];
    const resolved = field.resolvedType as protobuf.Type | protobuf.Enum | null;
    const isMessage = resolved !== null && 'fieldsArray' in resolved;
    if (field.repeated && !isMessage && field.type !== 'string' && field.type !== 'bytes' && values.length > 0 && w.random() < 0.7) {
      // Packed, as proto3 writes repeated numbers by default.
      const packed = new DamagingWriter(w.damage, w.random);
      for (const item of values) scalar(packed, field.type, item);
      w.tag(field.id, 2);
      w.lengthDelimited(packed.bytes);
      continue;
    }
    for (const item of values) {
      if (isMessage) {
        const inner = new DamagingWriter(w.damage, w.random);
        writeMessage(inner, resolved as protobuf.Type, item as Record<string, unknown>);
        w.tag(field.id, 2);
        w.lengthDelimited(inner.bytes);
      } else if (field.type === 'string') {
        w.tag(field.id, 2);
        w.lengthDelimited(w.utf8(item as string));
      } else if (field.type === 'bytes') {
        w.tag(field.id, 2);
        w.lengthDelimited([...(item as Uint8Array)]);
      } else {
        w.tag(field.id, wireTypeOf(resolved ? 'int32' : field.type));
        scalar(w, resolved ? 'int32' : field.type, item);
      }
    }
  }
}

/** A small seeded PRNG (a failure replays from the fast-check seed). */
function prng(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
}

/** `request` of `signal` encoded with `damage` done at random (from `seed`). */
export function encodeDamaged(signal: Signal, request: object, damage: Damage, seed: number): Uint8Array {
  const w = new DamagingWriter(damage, prng(seed));
  writeMessage(w, requestType(signal), request as Record<string, unknown>);
  return Uint8Array.from(w.bytes);
}

// One kind of damage per request, mostly, and rarely: a request is refused at its first fault
// and nothing after it is read, so a request with many faults tests little.
const rare = fc.constantFrom(0.0005, 0.002, 0.01);
const damage: fc.Arbitrary<Damage> = fc.oneof(
  fc.constant(NO_DAMAGE),
  fc.constantFrom(0.05, 0.3, 1).map((padVarint) => ({ ...NO_DAMAGE, padVarint })),
  rare.map((wrongWireType) => ({ ...NO_DAMAGE, wrongWireType })),
  rare.map((invalidUtf8) => ({ ...NO_DAMAGE, invalidUtf8 })),
  rare.map((wrongLength) => ({ ...NO_DAMAGE, wrongLength })),
  fc.record({ padVarint: rare, wrongWireType: rare, invalidUtf8: rare, wrongLength: rare }),
);

/** A valid request of `signal` written with damage (or none), maybe cut short. */
export function damagedRequest(signal: Signal): fc.Arbitrary<Uint8Array> {
  return fc.tuple(validRequest(signal), damage, fc.integer(), fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.nat() })).map(([{ request }, d, seed, cut]) => {
    const body = encodeDamaged(signal, request, d, seed);
    return cut === undefined ? body : body.subarray(0, cut % (body.length + 1));
  });
}

/** One span with `attributes`, in a request. */
export function spanRequest(attributes: object[], extra: object = {}): object {
  return {
    resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'hostile' } }] }, scopeSpans: [{ spans: [{
      traceId: new Uint8Array(16).fill(1), spanId: new Uint8Array(8).fill(2), name: 's', startTimeUnixNano: '1700000000000000000', attributes, ...extra,
    }] }] }],
  };
}

/** A request of `signal` carrying `value` in each place an AnyValue goes: attributes at every level, a log's body. */
function carrying(signal: Signal, value: object): object {
  const attributes = [{ key: 'v', value }];
  if (signal === 'traces') return spanRequest(attributes, { events: [{ name: 'e', attributes }], links: [{ attributes }] });
  const resource = { attributes: [{ key: 'service.name', value }, ...attributes] };
  const scope = { name: 'hostile', attributes };
  if (signal === 'logs') return { resourceLogs: [{ resource, scopeLogs: [{ scope, logRecords: [{ timeUnixNano: '1700000000000000000', body: value, attributes }] }] }] };
  const point = { timeUnixNano: '1700000000000000000', asDouble: 1, attributes, exemplars: [{ filteredAttributes: attributes }] };
  return { resourceMetrics: [{ resource, scopeMetrics: [{ scope, metrics: [{ name: 'm', gauge: { dataPoints: [point] } }] }] }] };
}

/** A signal's request carrying each of the values of `values`, written without damage. */
function requestsCarrying(signals: readonly Signal[], values: fc.Arbitrary<object>): fc.Arbitrary<{ signal: Signal; body: Uint8Array }> {
  return fc.tuple(fc.constantFrom(...signals), values).map(([signal, value]) => ({ signal, body: encodeDamaged(signal, carrying(signal, value), NO_DAMAGE, 1) }));
}

/** An attribute value `depth` levels of arrays and kvlists deep (alternating as `kinds` says), with a string at the bottom. */
export function nestedValue(depth: number, kinds: boolean[]): object {
  let value: object = { stringValue: 'bottom' };
  for (let level = depth - 1; level >= 0; level--) {
    value = kinds[level % kinds.length] ? { arrayValue: { values: [value, { intValue: String(level) }] } } : { kvlistValue: { values: [{ key: `k${level}`, value }, { key: 'a', value: { boolValue: true } }] } };
  }
  return value;
}

/** Requests with values nested from 1 to 20 levels past the limit (attributes of every level, log bodies). */
export function deeplyNested(signals: readonly Signal[]): fc.Arbitrary<{ signal: Signal; body: Uint8Array }> {
  const values = fc.tuple(fc.integer({ min: 1, max: MAX_ANYVALUE_DEPTH + 20 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 4 })).map(([depth, kinds]) => nestedValue(depth, kinds));
  return requestsCarrying(signals, values);
}

/** A span with more than 10,000 attributes, one of them a kvlist of more than 10,000 entries (keys repeated). */
export const manyAttributes: fc.Arbitrary<Uint8Array> = fc.tuple(fc.integer({ min: 10_001, max: 12_000 }), fc.integer({ min: 10_001, max: 11_000 }), fc.integer({ min: 1, max: 5000 }))
  .map(([attributes, entries, keys]) => {
    const values = [(i: number) => ({ stringValue: `v${i}` }), (i: number) => ({ intValue: String(i * 7919) }), (i: number) => ({ doubleValue: i / 7 }), (i: number) => ({ boolValue: i % 2 === 0 })];
    const list = Array.from({ length: attributes }, (_, i) => ({ key: `attribute.${i}`, value: values[i % values.length]!(i) }));
    list.push({ key: 'map', value: { kvlistValue: { values: Array.from({ length: entries }, (_, i) => ({ key: `k${(i * 31) % keys}`, value: values[i % values.length]!(i) })) } } as never });
    return encodeDamaged('traces', spanRequest(list), NO_DAMAGE, 1);
  });

/** Any 64-bit pattern as a double, with the edges made likely. */
export const anyDoubleBits: fc.Arbitrary<DoubleBits> = fc.oneof(
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
  fc.constantFrom(0x7ff8000000000000n, 0x7ff0000000000001n, 0xfff4000000000abcn, 0x7ff0000000000000n, 0xfff0000000000000n, 0x8000000000000000n, 1n, 0x000fffffffffffffn, 0x0010000000000000n, 0x7fefffffffffffffn),
  fc.double().map((d) => doubleBits(d)),
).map((bits) => new DoubleBits(bits));

/** Requests whose values (and values inside arrays and kvlists) are doubles of any bits. */
export function doubleValues(signals: readonly Signal[]): fc.Arbitrary<{ signal: Signal; body: Uint8Array }> {
  const values = fc.oneof(
    anyDoubleBits.map((doubleValue) => ({ doubleValue })),
    fc.array(anyDoubleBits, { minLength: 1, maxLength: 20 }).map((doubles) => ({ arrayValue: { values: doubles.map((doubleValue) => ({ doubleValue })) } })),
    fc.array(anyDoubleBits, { minLength: 1, maxLength: 20 }).map((doubles) => ({ kvlistValue: { values: doubles.map((doubleValue, i) => ({ key: `d${i}`, value: { doubleValue } })) } })),
  );
  return requestsCarrying(signals, values);
}

/** A valid request of `signal` whose items are each, at random, made one the transcoder refuses on its own. */
export function refusedItems(signal: Signal): fc.Arbitrary<Uint8Array> {
  return fc.tuple(validRequest(signal), fc.integer()).map(([{ request }, seed]) => {
    const random = prng(seed);
    const wrongLength = (lengths: number[]) => new Uint8Array(lengths[Math.floor(random() * lengths.length)]!).fill(3);
    const spoil = (item: any) => {
      if (random() < 0.6) return;
      const pick = random();
      if (signal === 'traces') {
        if (pick < 0.25) item.traceId = wrongLength([0, 1, 15, 17]);
        else if (pick < 0.5) item.spanId = wrongLength([0, 7, 9, 16]);
        else if (pick < 0.75) item.parentSpanId = wrongLength([1, 7, 9]);
        else item.links = [...(item.links ?? []), { [random() < 0.5 ? 'traceId' : 'spanId']: wrongLength([1, 8, 15, 17]) }];
      } else if (signal === 'logs') {
        if (pick < 0.5) item.traceId = wrongLength([1, 8, 15, 17]);
        else item.spanId = wrongLength([1, 7, 9, 16]);
      } else {
        const data = item.gauge ?? item.sum ?? item.histogram ?? item.exponentialHistogram ?? item.summary;
        for (const point of data.dataPoints) {
          if (random() < 0.5) continue;
          if (item.histogram && random() < 0.5) point.bucketCounts = Array.from({ length: (point.explicitBounds?.length ?? 0) + 2 }, () => '1');
          else if (!item.summary) point.exemplars = [...(point.exemplars ?? []), { [random() < 0.5 ? 'traceId' : 'spanId']: wrongLength([1, 8, 15, 17]) }];
        }
      }
    };
    const [resources, scopes, items] = {
      traces: ['resourceSpans', 'scopeSpans', 'spans'],
      logs: ['resourceLogs', 'scopeLogs', 'logRecords'],
      metrics: ['resourceMetrics', 'scopeMetrics', 'metrics'],
    }[signal] as [string, string, string];
    for (const resource of (request as any)[resources]) for (const scope of resource[scopes]) for (const item of scope[items]) spoil(item);
    return encodeDamaged(signal, request, NO_DAMAGE, seed);
  });
}

const DAY_NS = 86_400_000_000_000n;

/** A request of `signal` whose items fall on 90 to 120 different days: refused past 100, for the whole request. */
export function manyDays(signal: Signal): fc.Arbitrary<Uint8Array> {
  return fc.tuple(fc.integer({ min: 90, max: 120 }), fc.bigInt({ min: 0n, max: 100_000n })).map(([days, first]) => {
    const times = Array.from({ length: days + 5 }, (_, i) => String((first + BigInt(i % days)) * DAY_NS + BigInt(i)));
    const ids = { traceId: new Uint8Array(16).fill(1), spanId: new Uint8Array(8).fill(2) };
    const request = signal === 'traces'
      ? { resourceSpans: [{ scopeSpans: [{ spans: times.map((startTimeUnixNano) => ({ ...ids, startTimeUnixNano })) }] }] }
      : signal === 'logs'
        ? { resourceLogs: [{ scopeLogs: [{ logRecords: times.map((timeUnixNano) => ({ timeUnixNano })) }] }] }
        : { resourceMetrics: [{ scopeMetrics: [{ metrics: [
          { name: 'g', gauge: { dataPoints: times.map((timeUnixNano) => ({ timeUnixNano, asInt: '1' })) } },
          { name: 's', summary: { dataPoints: times.slice(0, 3).map((timeUnixNano) => ({ timeUnixNano })) } },
        ] }] }] };
    return encodeDamaged(signal, request, NO_DAMAGE, 1);
  });
}

/** Metric points whose doubles (values, sums, bounds, exemplars) have any bits, and int values of any size. */
export const metricNumbers: fc.Arbitrary<Uint8Array> = fc.tuple(fc.array(anyDoubleBits, { minLength: 8, maxLength: 8 }), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })).map(([d, int]) => {
  const exemplars = [{ asDouble: d[0] }, { asInt: String(int), timeUnixNano: '1' }, {}];
  const request = { resourceMetrics: [{ scopeMetrics: [{ metrics: [
    { name: 'g', gauge: { dataPoints: [{ asDouble: d[1], exemplars }, { asInt: String(int) }] } },
    { name: 's', sum: { dataPoints: [{ asDouble: d[2], exemplars }], isMonotonic: true, aggregationTemporality: 2 } },
    { name: 'h', histogram: { dataPoints: [{ count: '3', sum: d[3], min: d[4], max: d[5], bucketCounts: ['1', '2'], explicitBounds: [d[6]], exemplars }] } },
    { name: 'e', exponentialHistogram: { dataPoints: [{ sum: d[7], zeroThreshold: d[0], exemplars }] } },
    { name: 'q', summary: { dataPoints: [{ sum: d[1], quantileValues: [{ quantile: d[2], value: d[3] }] }] } },
  ] }] }] };
  return encodeDamaged('metrics', request, NO_DAMAGE, 1);
});
