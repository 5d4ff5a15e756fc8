/**
 * The value rules of docs/reference/limits.md that the transcoder enforces:
 * timestamps past what a DateTime64(9) holds, 64-bit JSON integers out of their range, and the
 * number of daily partitions one request may span. Rows are inserted into a real chDB (the
 * insert path of storage/chdb.ts, without Sluice's own settings), so what lands is what a user
 * would read.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import { transcodeOtlp, type Signal } from './index.ts';
import { ChdbTables, encodeRequest } from '../../test/otlp-requests.ts';

const TRACE_ID = '5b8efff798038103d269b633813fc60c';
const SPAN_ID = 'eee19b7ec3c1b174';
const UINT64_MAX = '18446744073709551615';
/** The last instant of DateTime64(9), Int64 nanoseconds. */
const LAST_INSTANT = '9223372036854775807';
const DAY = 86_400_000_000_000n;
const TODAY = (1_795_000_000_000_000_000n / DAY) * DAY;

let db: ChdbTables;
beforeAll(async () => {
  db = await ChdbTables.open();
});
afterAll(() => db?.close());
beforeEach(() => db.truncateAll());

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

function spans(list: object[]) {
  return { resourceSpans: [{ scopeSpans: [{ spans: list }] }] };
}

/** A span as protobufjs takes it (ids as Buffers) or as OTLP/JSON has it (hex ids). */
function span(format: 'protobuf' | 'json', fields: Record<string, unknown>) {
  return format === 'json'
    ? { traceId: TRACE_ID, spanId: SPAN_ID, ...fields }
    : { traceId: Buffer.from(TRACE_ID, 'hex'), spanId: Buffer.from(SPAN_ID, 'hex'), ...fields };
}

function transcode(signal: Signal, format: 'protobuf' | 'json', request: object) {
  const body = format === 'json' ? json(request) : encodeRequest(signal, request);
  return transcodeOtlp(signal, format, body, 'src');
}

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(SluiceError);
    expect((err as SluiceError).code).toBe('bad_request');
    return (err as SluiceError).message;
  }
  throw new Error('expected a refusal');
}

describe('timestamps past what storage holds', () => {
  for (const format of ['protobuf', 'json'] as const) {
    it(`stores a uint64 beyond Int64 (${format}) as the last DateTime64(9) instant, not wrapped into 1969`, () => {
      const result = transcode('traces', format, spans([
        span(format, { name: 'far', startTimeUnixNano: UINT64_MAX, endTimeUnixNano: UINT64_MAX, events: [{ timeUnixNano: '9223372036854775808', name: 'e' }] }),
        span(format, { name: 'last', startTimeUnixNano: LAST_INSTANT }),
      ]));
      db.insert(result);
      const rows = db.select("SELECT SpanName, toString(toUnixTimestamp64Nano(Timestamp)) AS ns, arrayMap(t -> toString(toUnixTimestamp64Nano(t)), `Events.Timestamp`) AS events, toString(Timestamp) AS text FROM otel.otel_traces ORDER BY SpanName");
      expect(rows).toEqual([
        { SpanName: 'far', ns: LAST_INSTANT, events: [LAST_INSTANT], text: '2262-04-11 23:47:16.854775807' },
        { SpanName: 'last', ns: LAST_INSTANT, events: [], text: '2262-04-11 23:47:16.854775807' },
      ]);

      const logs = transcode('logs', format, { resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: UINT64_MAX, body: { stringValue: 'late' } }] }] }] });
      db.insert(logs);
      expect(db.select('SELECT toString(toUnixTimestamp64Nano(Timestamp)) AS ns FROM otel.otel_logs')).toEqual([{ ns: LAST_INSTANT }]);
    });
  }
});

describe('64-bit integers in OTLP/JSON', () => {
  const at = 'resourceSpans[0].scopeSpans[0].spans[0]';
  const unsigned = 'must be an integer from 0 to 2^64-1, as a decimal string or a number';

  it('refuses a timestamp that is not a uint64 rather than wrapping it (2^64 would be stored as 1970)', () => {
    for (const value of ['18446744073709551616', '-1', '99999999999999999999999', 2 ** 64, -5, 1e300]) {
      const message = refusal(() => transcode('traces', 'json', spans([span('json', { name: 'x', startTimeUnixNano: value })])));
      expect(message, String(value)).toBe(`invalid OTLP/JSON: ${at}.startTimeUnixNano ${unsigned}`);
    }
    // In range, with leading zeros or as "-0": read as the number they are.
    const result = transcode('traces', 'json', spans([span('json', { name: 'x', startTimeUnixNano: `000${UINT64_MAX}`, endTimeUnixNano: '-0' })]));
    expect(result.accepted).toBe(1);
  });

  it('refuses an int64 attribute value out of the int64 range', () => {
    const attribute = (intValue: unknown) => spans([span('json', { name: 'x', attributes: [{ key: 'n', value: { intValue } }] })]);
    expect(refusal(() => transcode('traces', 'json', attribute('9223372036854775808')))).toBe(
      `invalid OTLP/JSON: ${at}.attributes[0].value.intValue must be an integer from -2^63 to 2^63-1, as a decimal string or a number`,
    );
    expect(refusal(() => transcode('traces', 'json', attribute('-9223372036854775809')))).toMatch(/intValue must be an integer from -2\^63/);
    db.insert(transcode('traces', 'json', attribute('-9223372036854775808')));
    expect(db.select('SELECT SpanAttributes AS a FROM otel.otel_traces')).toEqual([{ a: { n: '-9223372036854775808' } }]);
  });
});

describe('partitions one request may span', () => {
  const spread = (days: number, i: number) => String(TODAY - BigInt(i % days) * DAY);

  for (const format of ['protobuf', 'json'] as const) {
    it(`refuses spans on 101 days (${format}), takes 100`, () => {
      const request = (days: number) => spans(Array.from({ length: 150 }, (_, i) => span(format, { name: `s${i}`, startTimeUnixNano: spread(days, i) })));
      expect(refusal(() => transcode('traces', format, request(101)))).toBe(
        'rows span 101 days; one request may span at most 100 days per table (the storage partitions otel_traces by the day of Timestamp, UTC): send them in several requests',
      );
      const result = transcode('traces', format, request(100));
      db.insert(result); // a stock ClickHouse takes 100 partitions in one insert
      expect(db.select('SELECT uniq(toDate(Timestamp)) AS days, count() AS n FROM otel.otel_traces')).toEqual([{ days: 100, n: 150 }]);
    });
  }

  it('counts the partitions of log records and metric points too, and only of the rows stored', () => {
    const records = Array.from({ length: 120 }, (_, i) => ({ timeUnixNano: spread(120, i), body: { stringValue: 'x' } }));
    expect(refusal(() => transcode('logs', 'protobuf', { resourceLogs: [{ scopeLogs: [{ logRecords: records }] }] }))).toMatch(/^rows span 120 days; .* otel_logs by the day of Timestamp/);
    const points = Array.from({ length: 102 }, (_, i) => ({ timeUnixNano: spread(102, i), asDouble: i }));
    expect(refusal(() => transcode('metrics', 'protobuf', { resourceMetrics: [{ scopeMetrics: [{ metrics: [{ name: 'g', gauge: { dataPoints: points } }] }] }] })))
      .toMatch(/^rows span 102 days; .* otel_metrics_gauge by the day of TimeUnix/);
    // 110 spans on 110 days, of which 10 are refused on their own (a 3-byte trace id): 100 days stored.
    const mixed = Array.from({ length: 110 }, (_, i) => span('protobuf', { name: `m${i}`, startTimeUnixNano: spread(110, i), ...(i < 10 ? { traceId: Buffer.from('abc') } : {}) }));
    expect(transcode('traces', 'protobuf', spans(mixed))).toMatchObject({ accepted: 100, rejected: 10 });
  });
});

describe('nesting of attribute values', () => {
  /** An AnyValue of `levels` arrays (or kvlists) around a string, as protobufjs takes it and as OTLP/JSON has it. */
  function nested(levels: number, kind: 'array' | 'kvlist'): object {
    let value: object = { stringValue: 'x' };
    for (let i = 0; i < levels; i++) value = kind === 'array' ? { arrayValue: { values: [value] } } : { kvlistValue: { values: [{ key: 'k', value }] } };
    return value;
  }

  it('takes arrays and kvlists 100 levels deep and refuses 101 with one message, in protobuf and JSON alike', () => {
    for (const format of ['protobuf', 'json'] as const) {
      for (const kind of ['array', 'kvlist'] as const) {
        const request = (levels: number) => spans([span(format, { name: kind, attributes: [{ key: 'deep', value: nested(levels, kind) }] })]);
        expect(transcode('traces', format, request(100)).accepted, `${format} ${kind}`).toBe(1);
        expect(refusal(() => transcode('traces', format, request(101))), `${format} ${kind}`).toBe('an attribute value is nested deeper than 100 levels');
      }
      // The deepest envelope: an exemplar's filtered attributes of a histogram point.
      const metrics = (levels: number) => ({ resourceMetrics: [{ scopeMetrics: [{ metrics: [{ name: 'h', histogram: { dataPoints: [{ exemplars: [{ filteredAttributes: [{ key: 'deep', value: nested(levels, 'kvlist') }] }] }] } }] }] }] });
      expect(transcode('metrics', format, metrics(100)).accepted, format).toBe(1);
      expect(refusal(() => transcode('metrics', format, metrics(101))), format).toBe('an attribute value is nested deeper than 100 levels');
    }
  });
});
