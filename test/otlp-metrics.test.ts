/**
 * Metrics sent by the official OpenTelemetry exporters over http/protobuf, http/json and grpc
 * land in the otel_metrics_* tables: sums, gauges, explicit and exponential histograms, every
 * point and bucket checked against what the SDK collected.
 */
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AggregationTemporality,
  AggregationType,
  DataPointType,
  MeterProvider,
  type ExponentialHistogram,
  type Histogram,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';
import { exportOnce, exporterFor, ManualReader, PROTOCOLS } from './otel-clients.ts';

let sluice: TestSluice;
beforeAll(async () => {
  sluice = await startTestSluice();
});
afterAll(async () => sluice?.stop());

async function produceMetrics(service: string): Promise<ResourceMetrics> {
  const reader = new ManualReader();
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ 'service.name': service }),
    readers: [reader],
    views: [
      { instrumentName: 'http.server.duration', aggregation: { type: AggregationType.EXPLICIT_BUCKET_HISTOGRAM, options: { boundaries: [10, 50, 100] } } },
      { instrumentName: 'payload.size', aggregation: { type: AggregationType.EXPONENTIAL_HISTOGRAM, options: { maxSize: 20 } } },
    ],
  });
  const meter = provider.getMeter('shop-meter', '2.0.0');
  const requests = meter.createCounter('http.requests', { description: 'requests served', unit: '{request}' });
  requests.add(3, { route: '/cart' });
  requests.add(4, { route: '/pay' });
  meter.createUpDownCounter('queue.depth').add(-2, { queue: 'email' });
  meter.createGauge('cpu.temperature', { unit: 'Cel' }).record(71.5, { core: 0 });
  const duration = meter.createHistogram('http.server.duration', { unit: 'ms' });
  for (const v of [5, 20, 20, 75, 300]) duration.record(v, { route: '/cart' });
  const size = meter.createHistogram('payload.size', { unit: 'By' });
  for (const v of [1, 2, 4, 1000, 0]) size.record(v);
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  return resourceMetrics;
}

const rows = <T>(table: string, service: string, extra = '') =>
  sluice.rows<T & { start: string; time: string; SourceId: string }>(
    `SELECT *, toString(toUnixTimestamp(StartTimeUnix)) AS start, toString(toUnixTimestamp(TimeUnix)) AS time
     FROM otel.otel_metrics_${table} WHERE ServiceName = '${service}' ${extra} ORDER BY MetricName, toString(Attributes)`,
  );

describe.each(PROTOCOLS)('metrics over %s', (protocol) => {
  it('stores every data point of every kind', async () => {
    const service = `metrics-${protocol.replace(/\W/g, '-')}`;
    const collected = await produceMetrics(service);
    const result = await exportOnce(exporterFor<ResourceMetrics>('metrics', protocol, sluice), collected);
    expect(result.code, String(result.error)).toBe(0);
    const metrics = new Map(collected.scopeMetrics[0]!.metrics.map((m) => [m.descriptor.name, m]));

    const sums = await rows<{ MetricName: string; MetricDescription: string; MetricUnit: string; Value: number; IsMonotonic: boolean; AggregationTemporality: number; Attributes: Record<string, string>; ScopeName: string; ScopeVersion: string }>('sum', service);
    expect(sums.map((r) => [r.MetricName, r.Attributes, r.Value, r.IsMonotonic])).toEqual([
      ['http.requests', { route: '/cart' }, 3, true],
      ['http.requests', { route: '/pay' }, 4, true],
      ['queue.depth', { queue: 'email' }, -2, false],
    ]);
    const counter = metrics.get('http.requests')!;
    expect(sums[0]).toMatchObject({
      SourceId: sluice.sourceId,
      MetricDescription: 'requests served',
      MetricUnit: '{request}',
      ScopeName: 'shop-meter',
      ScopeVersion: '2.0.0',
      AggregationTemporality: 2, // CUMULATIVE
      // The exporter's layout keeps metric times as DateTime: whole seconds.
      start: String(counter.dataPoints[0]!.startTime[0]),
      time: String(counter.dataPoints[0]!.endTime[0]),
    });
    expect(counter.aggregationTemporality).toBe(AggregationTemporality.CUMULATIVE);

    const gauges = await rows<{ MetricName: string; MetricUnit: string; Value: number; Attributes: Record<string, string> }>('gauge', service);
    expect(gauges.map((r) => [r.MetricName, r.MetricUnit, r.Value, r.Attributes])).toEqual([['cpu.temperature', 'Cel', 71.5, { core: '0' }]]);

    const histograms = await rows<{ MetricName: string; Count: number; Sum: number; BucketCounts: number[]; ExplicitBounds: number[]; Min: number; Max: number }>('histogram', service);
    const histogram = metrics.get('http.server.duration')!;
    expect(histogram.dataPointType).toBe(DataPointType.HISTOGRAM);
    const point = histogram.dataPoints[0]!.value as Histogram;
    expect(histograms).toHaveLength(1);
    expect(histograms[0]).toMatchObject({
      MetricName: 'http.server.duration',
      Count: point.count,
      Sum: point.sum,
      BucketCounts: point.buckets.counts,
      ExplicitBounds: point.buckets.boundaries,
      Min: point.min,
      Max: point.max,
    });
    expect(histograms[0]!.BucketCounts).toEqual([1, 2, 1, 1]);

    const exp = await rows<{ MetricName: string; Count: number; Sum: number; Scale: number; ZeroCount: number; PositiveOffset: number; PositiveBucketCounts: number[]; NegativeOffset: number; NegativeBucketCounts: number[]; Min: number; Max: number }>('exp_histogram', service);
    const expPoint = metrics.get('payload.size')!.dataPoints[0]!.value as ExponentialHistogram;
    expect(exp).toHaveLength(1);
    expect(exp[0]).toMatchObject({
      MetricName: 'payload.size',
      Count: expPoint.count,
      Sum: expPoint.sum,
      Scale: expPoint.scale,
      ZeroCount: expPoint.zeroCount,
      PositiveOffset: expPoint.positive.offset,
      PositiveBucketCounts: expPoint.positive.bucketCounts,
      NegativeOffset: expPoint.negative.offset,
      NegativeBucketCounts: expPoint.negative.bucketCounts,
      Min: expPoint.min,
      Max: expPoint.max,
    });
  });
});
