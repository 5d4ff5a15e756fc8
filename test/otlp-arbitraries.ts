/**
 * fast-check arbitraries of valid OTLP export requests, for the fuzz tests (otlp.fuzz.test.ts):
 * every field the transcoder reads, with values from the whole range of their types (any code
 * point in strings, uint64 timestamps up to 2^64 - 1, NaN and -0 doubles, attribute values
 * nested a few levels), shaped as protobufjs takes them (testing.ts#encodeRequest).
 * otlpJson() gives the same request as OTLP/JSON.
 *
 * "Valid" means the transcoder must store every item: ids of the right length, histogram
 * buckets that match their bounds, and few enough items that their times cannot span more than
 * 100 days.
 */
import fc from 'fast-check';
import type { Signal } from '../pipeline/otlp/index.ts';

const text = fc.string({ unit: 'binary', maxLength: 24 });
const bytes = (length: number) => fc.uint8Array({ minLength: length, maxLength: length });
const optionalId = (length: number) => fc.oneof(bytes(length), fc.constant(new Uint8Array(0)));
const uint64 = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String);
const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String);
const uint32 = fc.nat({ max: 0xffffffff });
const double = fc.double();

/** An AnyValue, arrays and kvlists up to a few levels deep. */
const { value: anyValue, kv: keyValue } = fc.letrec<{ value: object; kv: object }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.record({ stringValue: text }),
    fc.record({ boolValue: fc.boolean() }),
    fc.record({ intValue: int64 }),
    fc.record({ doubleValue: double }),
    fc.record({ bytesValue: fc.uint8Array({ maxLength: 12 }) }),
    fc.record({ arrayValue: fc.record({ values: fc.array(tie('value'), { maxLength: 3 }) }) }),
    fc.record({ kvlistValue: fc.record({ values: fc.array(tie('kv'), { maxLength: 3 }) }) }),
    fc.constant({}),
  ),
  kv: fc.record({ key: text, value: tie('value') }, { requiredKeys: ['key'] }),
}));
const attributes = fc.array(keyValue, { maxLength: 4 });

const resource = fc.record({ attributes, droppedAttributesCount: uint32 }, { requiredKeys: [] });
const scope = fc.record({ name: text, version: text, attributes, droppedAttributesCount: uint32 }, { requiredKeys: [] });

const span = fc.record({
  traceId: bytes(16),
  spanId: bytes(8),
  parentSpanId: optionalId(8),
  traceState: text,
  name: text,
  kind: fc.nat({ max: 7 }),
  startTimeUnixNano: uint64,
  endTimeUnixNano: uint64,
  attributes,
  droppedAttributesCount: uint32,
  events: fc.array(fc.record({ timeUnixNano: uint64, name: text, attributes }, { requiredKeys: [] }), { maxLength: 2 }),
  links: fc.array(fc.record({ traceId: optionalId(16), spanId: optionalId(8), traceState: text, attributes }, { requiredKeys: [] }), { maxLength: 2 }),
  status: fc.record({ code: fc.nat({ max: 3 }), message: text }, { requiredKeys: [] }),
}, { requiredKeys: ['traceId', 'spanId'] });

const logRecord = fc.record({
  timeUnixNano: uint64,
  observedTimeUnixNano: uint64,
  severityNumber: fc.nat({ max: 30 }),
  severityText: text,
  body: anyValue,
  attributes,
  flags: uint32,
  traceId: optionalId(16),
  spanId: optionalId(8),
  eventName: text,
}, { requiredKeys: [] });

const exemplar = fc.record({
  filteredAttributes: attributes,
  timeUnixNano: uint64,
  spanId: optionalId(8),
  traceId: optionalId(16),
}, { requiredKeys: [] }).chain((e) => fc.oneof(fc.constant(e), double.map((asDouble) => ({ ...e, asDouble })), int64.map((asInt) => ({ ...e, asInt }))));

const pointCommon = { attributes, startTimeUnixNano: uint64, timeUnixNano: uint64, exemplars: fc.array(exemplar, { maxLength: 2 }), flags: uint32 };
const numberPoint = fc.record(pointCommon, { requiredKeys: [] })
  .chain((p) => fc.oneof(fc.constant(p), double.map((asDouble) => ({ ...p, asDouble })), int64.map((asInt) => ({ ...p, asInt }))));
const histogramPoint = fc.record({ ...pointCommon, count: uint64, sum: double, min: double, max: double, explicitBounds: fc.array(double, { maxLength: 4 }) }, { requiredKeys: ['explicitBounds'] })
  .chain((p) => fc.oneof(fc.constant(p), fc.array(uint64, { minLength: p.explicitBounds.length + 1, maxLength: p.explicitBounds.length + 1 }).map((bucketCounts) => ({ ...p, bucketCounts }))));
const buckets = fc.record({ offset: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), bucketCounts: fc.array(uint64, { maxLength: 4 }) }, { requiredKeys: [] });
const expHistogramPoint = fc.record({
  ...pointCommon, count: uint64, sum: double, scale: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), zeroCount: uint64,
  positive: buckets, negative: buckets, min: double, max: double, zeroThreshold: double,
}, { requiredKeys: [] });
const summaryPoint = fc.record({
  ...pointCommon, count: uint64, sum: double, quantileValues: fc.array(fc.record({ quantile: double, value: double }, { requiredKeys: [] }), { maxLength: 3 }),
}, { requiredKeys: [] });

const points = <T>(point: fc.Arbitrary<T>) => fc.array(point, { minLength: 1, maxLength: 3 });
const temporality = fc.nat({ max: 2 });
const metric = fc.record({ name: text, description: text, unit: text }, { requiredKeys: [] }).chain((m) => fc.oneof(
  points(numberPoint).map((dataPoints) => ({ ...m, gauge: { dataPoints } })),
  fc.tuple(points(numberPoint), temporality, fc.boolean()).map(([dataPoints, aggregationTemporality, isMonotonic]) => ({ ...m, sum: { dataPoints, aggregationTemporality, isMonotonic } })),
  fc.tuple(points(histogramPoint), temporality).map(([dataPoints, aggregationTemporality]) => ({ ...m, histogram: { dataPoints, aggregationTemporality } })),
  fc.tuple(points(expHistogramPoint), temporality).map(([dataPoints, aggregationTemporality]) => ({ ...m, exponentialHistogram: { dataPoints, aggregationTemporality } })),
  points(summaryPoint).map((dataPoints) => ({ ...m, summary: { dataPoints } })),
));

/** Resource → scope → items, 1-2 of each level above the items. */
function envelope<T>(resourceKey: string, scopeKey: string, itemsKey: string, item: fc.Arbitrary<T>, maxItems: number) {
  const scoped = fc.record({ scope, [itemsKey]: fc.array(item, { maxLength: maxItems }), schemaUrl: text }, { requiredKeys: [itemsKey] });
  const resourced = fc.record({ resource, [scopeKey]: fc.array(scoped, { minLength: 1, maxLength: 2 }), schemaUrl: text }, { requiredKeys: [scopeKey] });
  return fc.record({ [resourceKey]: fc.array(resourced, { minLength: 1, maxLength: 2 }) });
}

export interface ValidRequest {
  signal: Signal;
  /** The request as protobufjs takes it. */
  request: object;
  /** Spans, log records or data points in it: what the transcoder must accept. */
  items: number;
}

const requests: Record<Signal, fc.Arbitrary<object>> = {
  traces: envelope('resourceSpans', 'scopeSpans', 'spans', span, 8),
  logs: envelope('resourceLogs', 'scopeLogs', 'logRecords', logRecord, 8),
  metrics: envelope('resourceMetrics', 'scopeMetrics', 'metrics', metric, 3),
};

/** A valid request of `signal`, at most 2 x 2 x 8 items (so at most 32 days). */
export function validRequest(signal: Signal): fc.Arbitrary<ValidRequest> {
  return requests[signal].map((request) => ({ signal, request, items: countItems(signal, request) }));
}

function countItems(signal: Signal, request: any): number {
  const [resources, scopes, items] = {
    traces: ['resourceSpans', 'scopeSpans', 'spans'],
    logs: ['resourceLogs', 'scopeLogs', 'logRecords'],
    metrics: ['resourceMetrics', 'scopeMetrics', 'metrics'],
  }[signal];
  let count = 0;
  for (const r of request[resources!]) {
    for (const s of r[scopes!]) {
      for (const item of s[items!]) {
        if (signal !== 'metrics') count++;
        else count += (item.gauge ?? item.sum ?? item.histogram ?? item.exponentialHistogram ?? item.summary).dataPoints.length;
      }
    }
  }
  return count;
}

const HEX_IDS = new Set(['traceId', 'spanId', 'parentSpanId']);

/**
 * The request as OTLP/JSON text: ids as hex, other bytes as base64, 64-bit integers as decimal
 * strings, NaN, ±Infinity and -0 as the strings the protobuf JSON mapping uses; with `snake`,
 * every key in the proto's snake_case (which receivers must take too).
 */
export function otlpJson(request: object, snake = false): string {
  const convert = (value: unknown, key: string): unknown => {
    if (value instanceof Uint8Array) return HEX_IDS.has(key) ? Buffer.from(value).toString('hex') : Buffer.from(value).toString('base64');
    if (typeof value === 'number' && (!Number.isFinite(value) || Object.is(value, -0))) return Object.is(value, -0) ? '-0' : String(value);
    if (Array.isArray(value)) return value.map((item) => convert(item, key));
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [snake ? k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) : k, convert(v, k)]));
    }
    return value;
  };
  return JSON.stringify(convert(request, ''));
}
