import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { transcodeOtlp } from './index.ts';
import { unixSeconds } from './fields.ts';
import { attrs, ChdbTables, encodeRequest } from '../../test/otlp-requests.ts';

const START = 1_700_000_000_500_000_000n; // 1700000000.5 s
const TIME = 1_700_000_060_999_999_999n; // 1700000060.999999999 s
const times = { startTimeUnixNano: String(START), timeUnixNano: String(TIME) };
const exemplar = {
  filteredAttributes: attrs({ 'http.route': '/pay' }),
  timeUnixNano: String(TIME - 1_000_000_000n),
  asDouble: 0.25,
  spanId: Buffer.from('b7ad6b7169203331', 'hex'),
  traceId: Buffer.from('0af7651916cd43dd8448eb211c80319c', 'hex'),
};

function request(metrics: object[]) {
  return {
    resourceMetrics: [{
      resource: { attributes: attrs({ 'service.name': 'api' }) },
      schemaUrl: 'https://res',
      scopeMetrics: [{
        scope: { name: 'meter', version: '1.0', attributes: attrs({ lib: 'otel' }), droppedAttributesCount: 2 },
        schemaUrl: 'https://scope',
        metrics,
      }],
    }],
  };
}

let db: ChdbTables;
beforeAll(async () => {
  db = await ChdbTables.open();
});
afterAll(() => db?.close());
beforeEach(() => db.truncateAll());

function store(metrics: object[]) {
  const result = transcodeOtlp('metrics', 'protobuf', encodeRequest('metrics', request(metrics)), 'src-m');
  db.insert(result);
  return result;
}

/** The columns all metrics tables share, plus the table's own, with times as Unix seconds. */
function select(table: string, columns: string) {
  return db.select(`SELECT SourceId, ServiceName, ResourceAttributes, ResourceSchemaUrl, ScopeName, ScopeVersion, ScopeAttributes,
    ScopeDroppedAttrCount, ScopeSchemaUrl, MetricName, MetricDescription, MetricUnit, Attributes,
    toUnixTimestamp(StartTimeUnix) AS start, toUnixTimestamp(TimeUnix) AS time, Flags, ${columns}
    FROM otel.${table} ORDER BY MetricName, time`);
}

const SHARED = {
  SourceId: 'src-m', ServiceName: 'api', ResourceAttributes: { 'service.name': 'api' }, ResourceSchemaUrl: 'https://res',
  ScopeName: 'meter', ScopeVersion: '1.0', ScopeAttributes: { lib: 'otel' }, ScopeDroppedAttrCount: 2, ScopeSchemaUrl: 'https://scope',
  start: 1_700_000_000, time: 1_700_000_060,
};

const EXEMPLAR_COLUMNS = '`Exemplars.FilteredAttributes` AS ea, arrayMap(t -> toUnixTimestamp(t), `Exemplars.TimeUnix`) AS et, `Exemplars.Value` AS ev, `Exemplars.SpanId` AS es, `Exemplars.TraceId` AS etr';
const EXEMPLAR_ROW = { ea: [{ 'http.route': '/pay' }], et: [1_700_000_059], ev: [0.25], es: ['b7ad6b7169203331'], etr: ['0af7651916cd43dd8448eb211c80319c'] };

describe('metrics: protobuf to the otel_metrics_* tables', () => {
  it('stores gauges, double and int, with exemplars and flags', () => {
    const result = store([{
      name: 'cpu.utilization', description: 'CPU', unit: '1',
      gauge: { dataPoints: [
        { ...times, attributes: attrs({ cpu: '0' }), asDouble: 0.75, exemplars: [exemplar], flags: 1 },
        { ...times, timeUnixNano: String(TIME + 1_000_000_000n), attributes: attrs({ cpu: '1' }), asInt: '-3', exemplars: [{ asInt: '7' }] },
      ] },
    }]);
    expect(result).toMatchObject({ accepted: 2, rejected: 0 });
    expect(result.tables.map((t) => [t.table, t.rows])).toEqual([['otel_metrics_gauge', 2]]);
    const rows = select('otel_metrics_gauge', `Value, ${EXEMPLAR_COLUMNS}`);
    expect(rows[0]).toEqual({ ...SHARED, MetricName: 'cpu.utilization', MetricDescription: 'CPU', MetricUnit: '1', Attributes: { cpu: '0' }, Flags: 1, Value: 0.75, ...EXEMPLAR_ROW });
    // An exemplar without ids gets zero ids, as the exporter hex-encodes its fixed-size arrays.
    expect(rows[1]).toMatchObject({ Attributes: { cpu: '1' }, time: 1_700_000_061, Value: -3, Flags: 0, ea: [{}], et: [0], ev: [7], es: ['0000000000000000'], etr: ['00000000000000000000000000000000'] });
  });

  it('stores sums with temporality and monotonicity', () => {
    store([
      { name: 'requests', sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: [{ ...times, asInt: '1234567890123', exemplars: [exemplar] }] } },
      { name: 'queue.delta', sum: { aggregationTemporality: 1, dataPoints: [{ ...times, asDouble: -2.5 }] } },
    ]);
    const rows = select('otel_metrics_sum', `Value, AggregationTemporality, IsMonotonic, ${EXEMPLAR_COLUMNS}`);
    expect(rows).toEqual([
      { ...SHARED, MetricName: 'queue.delta', MetricDescription: '', MetricUnit: '', Attributes: {}, Flags: 0, Value: -2.5, AggregationTemporality: 1, IsMonotonic: false, ea: [], et: [], ev: [], es: [], etr: [] },
      { ...SHARED, MetricName: 'requests', MetricDescription: '', MetricUnit: '', Attributes: {}, Flags: 0, Value: 1234567890123, AggregationTemporality: 2, IsMonotonic: true, ...EXEMPLAR_ROW },
    ]);
  });

  it('stores histograms with bucket counts, bounds, sum, min and max', () => {
    store([{
      name: 'latency', unit: 'ms',
      histogram: { aggregationTemporality: 2, dataPoints: [
        { ...times, attributes: attrs({ route: '/a' }), count: '10', sum: 123.5, bucketCounts: ['1', '2', '3', '4'], explicitBounds: [1, 5.5, 10], min: 0.5, max: 99, exemplars: [exemplar] },
        { ...times, timeUnixNano: String(TIME + 1_000_000_000n), count: '0' },
      ] },
    }]);
    const rows = select('otel_metrics_histogram', `toString(Count) AS count, Sum, BucketCounts, ExplicitBounds, Min, Max, AggregationTemporality, ${EXEMPLAR_COLUMNS}`);
    expect(rows[0]).toEqual({
      ...SHARED, MetricName: 'latency', MetricDescription: '', MetricUnit: 'ms', Attributes: { route: '/a' }, Flags: 0,
      count: '10', Sum: 123.5, BucketCounts: [1, 2, 3, 4], ExplicitBounds: [1, 5.5, 10], Min: 0.5, Max: 99, AggregationTemporality: 2, ...EXEMPLAR_ROW,
    });
    expect(rows[1]).toMatchObject({ count: '0', Sum: 0, BucketCounts: [], ExplicitBounds: [], Min: 0, Max: 0, ea: [] });
  });

  it('stores exponential histograms with both bucket ranges', () => {
    store([{
      name: 'size', exponentialHistogram: { aggregationTemporality: 1, dataPoints: [{
        ...times, count: '12', sum: 40.25, scale: -2, zeroCount: '3',
        positive: { offset: -5, bucketCounts: ['4', '0', '18446744073709551615'] }, negative: { offset: 2, bucketCounts: ['1'] },
        min: -1, max: 30, flags: 1, exemplars: [exemplar],
      }] },
    }]);
    const rows = select('otel_metrics_exp_histogram',
      `toString(Count) AS count, Sum, Scale, toString(ZeroCount) AS zero, PositiveOffset, arrayMap(c -> toString(c), PositiveBucketCounts) AS positive,
       NegativeOffset, arrayMap(c -> toString(c), NegativeBucketCounts) AS negative, Min, Max, AggregationTemporality, ${EXEMPLAR_COLUMNS}`);
    expect(rows).toEqual([{
      ...SHARED, MetricName: 'size', MetricDescription: '', MetricUnit: '', Attributes: {}, Flags: 1,
      count: '12', Sum: 40.25, Scale: -2, zero: '3', PositiveOffset: -5, positive: ['4', '0', '18446744073709551615'],
      NegativeOffset: 2, negative: ['1'], Min: -1, Max: 30, AggregationTemporality: 1, ...EXEMPLAR_ROW,
    }]);
  });

  it('stores summaries with their quantiles', () => {
    store([{
      name: 'rpc.duration', summary: { dataPoints: [{
        ...times, count: '100', sum: 512.5, flags: 1,
        quantileValues: [{ quantile: 0, value: 0.1 }, { quantile: 0.5, value: 4 }, { quantile: 0.99, value: 20.5 }],
      }] },
    }]);
    const rows = select('otel_metrics_summary', 'toString(Count) AS count, Sum, `ValueAtQuantiles.Quantile` AS q, `ValueAtQuantiles.Value` AS v');
    expect(rows).toEqual([{
      ...SHARED, MetricName: 'rpc.duration', MetricDescription: '', MetricUnit: '', Attributes: {}, Flags: 1,
      count: '100', Sum: 512.5, q: [0, 0.5, 0.99], v: [0.1, 4, 20.5],
    }]);
  });

  it('sends each point type to its own table in one request, and passes over metrics without data', () => {
    const result = store([
      { name: 'g', gauge: { dataPoints: [{ ...times, asDouble: 1 }] } },
      { name: 'nothing' },
      { name: 's', summary: { dataPoints: [{ ...times }, { ...times }] } },
      { name: 'g2', gauge: { dataPoints: [{ ...times, asDouble: 2 }] } },
    ]);
    expect(result.accepted).toBe(4);
    expect(result.tables.map((t) => [t.table, t.rows])).toEqual([['otel_metrics_gauge', 2], ['otel_metrics_summary', 2]]);
    expect(select('otel_metrics_gauge', 'Value').map((r) => [r.MetricName, r.Value])).toEqual([['g', 1], ['g2', 2]]);
  });

  it('refuses malformed points on their own', () => {
    const result = store([
      { name: 'h', histogram: { dataPoints: [
        { ...times, count: '1', bucketCounts: ['1', '0'], explicitBounds: [1, 2] },
        { ...times, count: '2', bucketCounts: ['1', '1'], explicitBounds: [1] },
      ] } },
      { name: 'g', gauge: { dataPoints: [{ ...times, asDouble: 1, exemplars: [{ spanId: Buffer.from('0102', 'hex') }] }] } },
    ]);
    expect(result).toMatchObject({
      accepted: 1, rejected: 2,
      rejectMessage: 'data point 1 (metric "h"): 2 bucket_counts for 2 explicit_bounds (want 3) (and 1 more)',
    });
    expect(select('otel_metrics_histogram', 'toString(Count) AS c').map((r) => r.c)).toEqual(['2']);
    expect(select('otel_metrics_gauge', 'Value')).toEqual([]);
  });
});

describe('unixSeconds', () => {
  it('floors nanoseconds to seconds exactly, also next to a second boundary', () => {
    const cases = [0n, 999_999_999n, 1_000_000_000n, TIME, START, 2n ** 62n - 1n, 2n ** 62n + 123n, 2n ** 64n - 1n, 1_700_000_000_999_999_999n];
    for (const ns of cases) {
      expect(unixSeconds(Number(ns & 0xffffffffn), Number(ns >> 32n)), String(ns)).toBe(Number(ns / 1_000_000_000n));
    }
  });
});
