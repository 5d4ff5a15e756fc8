import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MetricQuery, MetricResult } from '../api.ts';
import { ConsoleQueries } from './queries.ts';
import { attrs, ingestAgent, ingestOtlp, metricsRequest, openQueries, pointTimes, type QueriesFixture } from '../../test/console-queries-fixture.ts';

let fixture: QueriesFixture;
let queries: ConsoleQueries;
/** A whole hour, two hours ago: the range of every chart here, in 60 buckets of a minute. */
const from = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000;
const to = from + 3_600_000;
const base = from / 1000;
/** Every 10 s from `start` (seconds from `from`, may be negative) for `seconds`. */
const every10s = (start: number, seconds: number) => Array.from({ length: seconds / 10 }, (_, i) => base + start + i * 10);

/** Cumulative counter points: +6 every 10 s (0.6/s); restarted from 3 at minute 10. From 10 min before the range to minute 50. */
function counterPoints(): object[] {
  let value = 0;
  return every10s(-600, 3600).map((at) => {
    value = at === base + 600 ? 3 : value + 6;
    return { ...pointTimes(at, at >= base + 600 ? base + 595 : base - 700), asInt: value, attributes: attrs({ series: 'x' }) };
  });
}

/**
 * Cumulative histogram points, bounds 10/20/30, from 5 min before the range to minute 50: 10 observations between 10
 * and 20 every 10 s; between 20 and 30 in minute 5; restarted at minute 20.
 */
function histogramPoints(): object[] {
  let counts = [0, 0, 0, 0];
  return every10s(-300, 3300).map((at) => {
    const restart = at === base + 1200;
    if (restart) counts = [0, 0, 0, 0];
    const inMinute5 = at >= base + 300 && at < base + 360;
    counts = counts.map((c, i) => c + (i === (inMinute5 ? 2 : 1) ? 10 : 0));
    const count = counts.reduce((a, b) => a + b, 0);
    const sum = counts[1]! * 15 + counts[2]! * 25;
    return { ...pointTimes(at, restart || at > base + 1200 ? base + 1195 : base - 400), count, sum, bucketCounts: counts, explicitBounds: [10, 20, 30] };
  });
}

beforeAll(async () => {
  fixture = await openQueries();
  ({ queries } = fixture);
  const { storage } = fixture.engine;
  const gauge = (value: number, queue: string) => every10s(0, 1800).filter((_, i) => i % 3 === 0).map((at) => ({ ...pointTimes(at), asDouble: value, attributes: attrs({ queue }) }));
  for (const [source, scale] of [['src-a', 1], ['src-b', 1000]] as const) {
    await ingestOtlp(storage, 'metrics', metricsRequest('worker', [
      { name: 'queue.depth', unit: '{item}', description: 'Items waiting', gauge: { dataPoints: [...gauge(10 * scale, 'a'), ...gauge(30 * scale, 'b')] } },
      { name: 'requests', unit: '{request}', sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: counterPoints() } },
      { name: 'jobs', sum: { aggregationTemporality: 1, isMonotonic: true, dataPoints: every10s(0, 600).map((at) => ({ ...pointTimes(at, at - 10), asInt: 5 })) } },
      { name: 'active', sum: { aggregationTemporality: 2, isMonotonic: false, dataPoints: [10, 20, 15].map((v, i) => ({ ...pointTimes(base + 60 * i + 5, base - 100), asInt: v })) } },
      { name: 'latency', unit: 'ms', histogram: { aggregationTemporality: 2, dataPoints: histogramPoints() } },
      // A service that just started: one cumulative point, its start 20 s before it.
      { name: 'fresh', unit: 'ms', histogram: { aggregationTemporality: 2, dataPoints: [{ ...pointTimes(base + 30, base + 10), count: 4, sum: 60, bucketCounts: [0, 4, 0, 0], explicitBounds: [10, 20, 30] }] } },
    ], { 'host.name': 'w-1' }), source);
    await ingestOtlp(storage, 'metrics', metricsRequest('api', [
      { name: 'queue.depth', gauge: { dataPoints: gauge(20 * scale, 'a') } },
      // Delta histogram with other bounds: 6 observations spread over 5..25 every 10 s.
      { name: 'latency', unit: 'ms', histogram: { aggregationTemporality: 1, dataPoints: every10s(0, 3600).map((at) => ({ ...pointTimes(at, at - 10), count: 6, sum: 90, bucketCounts: [0, 6, 0], explicitBounds: [5, 25] })) } },
      // The range's edges: the point at `from` is in, the one at `to` is out.
      { name: 'edges', gauge: { dataPoints: [base, base + 3599, base + 3600].map((at) => ({ ...pointTimes(at), asDouble: 1 })) } },
      { name: 'many', gauge: { dataPoints: Array.from({ length: 60 }, (_, i) => ({ ...pointTimes(base + 60), asDouble: i, attributes: attrs({ id: `id-${String(i).padStart(2, '0')}` }) })) } },
    ], { 'host.name': 'a-1' }), source);
    for (const host of ['h1', 'h2']) {
      let total = 0;
      await ingestAgent(storage, 'metrics', {
        host, service: 'node-agent',
        metrics: every10s(-300, 1200).flatMap((at) => {
          total = at === base + 600 ? 100 : total + 1000; // bytes: 100 B/s, restarted at minute 10
          const timestamp = String(BigInt(at) * 1_000_000_000n);
          return [{ name: 'cpu', value: (host === 'h1' ? 0.25 : 0.75) * scale, timestamp }, { name: 'bytes', type: 'counter' as const, unit: 'By', value: total, timestamp }];
        }),
      }, source, Date.now());
    }
  }
});
afterAll(() => fixture?.close());

const chart = (query: Partial<MetricQuery> & Pick<MetricQuery, 'name' | 'kind' | 'aggregation'>, sources = ['src-a']) =>
  queries.metric(sources, { from, to, stepSeconds: 60, ...query });
/** Each series' values by minute of the range (null where it had no point). */
const values = (result: MetricResult) => Object.fromEntries(result.series.map((s) => [s.group, s.points.map(([, v]) => (v === null ? null : Math.round(v * 1e6) / 1e6))]));
const minutes = (n: number, value: number | null) => Array.from({ length: n }, () => value);

describe('metric names', () => {
  it("lists the range's metrics of every kind with unit, description and services; another source's are not there", async () => {
    const names = await queries.metricNames(['src-a'], { from, to });
    expect(names.map((m) => `${m.kind}:${m.name}`)).toEqual([
      'sum:active', 'agent:bytes', 'agent:cpu', 'gauge:edges', 'histogram:fresh', 'sum:jobs', 'histogram:latency', 'gauge:many', 'gauge:queue.depth', 'sum:requests',
    ]);
    expect(names.find((m) => m.name === 'queue.depth')).toEqual({ name: 'queue.depth', kind: 'gauge', unit: '{item}', description: 'Items waiting', services: ['api', 'worker'] });
    expect(names.find((m) => m.name === 'bytes')).toEqual({ name: 'bytes', kind: 'agent', unit: 'By', description: '', services: ['node-agent'] });
    expect(await queries.metricNames(['src-c'], { from, to })).toEqual([]);
    expect(await queries.metricNames([], { from, to })).toEqual([]);
  });
});

describe('metric charts', () => {
  it('aggregates gauges per minute: avg, min, max and count of the points, sum of the series', async () => {
    // worker a = 10 and b = 30, api a = 20; two points per series a minute for the first 30 minutes.
    expect(values(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'avg' }))).toEqual({ '': [...minutes(30, 20), ...minutes(30, null)] });
    expect(values(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'sum' }))['']!.slice(0, 2)).toEqual([60, 60]);
    expect(values(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'min' }))['']![0]).toBe(10);
    expect(values(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'max' }))['']![0]).toBe(30);
    expect(values(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'count' }))['']![0]).toBe(6);
    const result = await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'avg' });
    expect(result.stepSeconds).toBe(60);
    expect(result.series[0]!.points.map(([time]) => time)).toEqual(Array.from({ length: 60 }, (_, i) => from + i * 60_000));
  });

  it('splits by a data point attribute, service.name or a resource attribute, and filters by service and attribute', async () => {
    const first = (result: MetricResult) => Object.fromEntries(Object.entries(values(result)).map(([g, v]) => [g, v[0]]));
    expect(first(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'sum', groupBy: 'queue' }))).toEqual({ a: 30, b: 30 });
    expect(first(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'avg', groupBy: 'queue' }))).toEqual({ a: 15, b: 30 });
    expect(first(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'sum', groupBy: 'service.name' }))).toEqual({ api: 20, worker: 40 });
    expect(first(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'sum', groupBy: 'host.name' }))).toEqual({ 'a-1': 20, 'w-1': 40 });
    expect(first(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'avg', services: ['api'] }))).toEqual({ '': 20 });
    expect(first(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'avg', attributes: [{ key: 'queue', value: 'b' }] }))).toEqual({ '': 30 });
    expect(first(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'avg', attributes: [{ key: 'host.name', value: 'a-1' }] }))).toEqual({ '': 20 });
  });

  it('rates a cumulative counter per second, through a restart, with the point before the range as the first one', async () => {
    // 0.6/s; in minute 10 the counter restarted from 3: 3 + 5 × 6 = 33 in that minute.
    expect(values(await chart({ name: 'requests', kind: 'sum', aggregation: 'rate' }))).toEqual({ '': [...minutes(10, 0.6), 0.55, ...minutes(39, 0.6), ...minutes(10, null)] });
    // The counter's own value: the last point of each minute.
    expect(values(await chart({ name: 'requests', kind: 'sum', aggregation: 'sum' }))['']!.slice(0, 2)).toEqual([66 * 6, 72 * 6]); // the points at 0:50 and 1:50
  });

  it('rates a delta sum (each point its own increment) and sums its deltas; a non-monotonic total goes down without a reset', async () => {
    expect(values(await chart({ name: 'jobs', kind: 'sum', aggregation: 'rate' }))['']!.slice(0, 11)).toEqual([...minutes(10, 0.5), null]);
    expect(values(await chart({ name: 'jobs', kind: 'sum', aggregation: 'sum' }))['']!.slice(0, 2)).toEqual([30, 30]);
    // Its start time is inside what was read: the first point's whole total (10) is its first minute's increase.
    expect(values(await chart({ name: 'active', kind: 'sum', aggregation: 'rate' }))['']!.slice(0, 3)).toEqual([0.166667, 0.166667, -0.083333]);
    expect(values(await chart({ name: 'active', kind: 'sum', aggregation: 'sum' }))['']!.slice(0, 3)).toEqual([10, 20, 15]);
  });

  it('interpolates histogram percentiles from the bucket increments, across a restart and series with other bounds', async () => {
    const p = async (aggregation: 'p50' | 'p95' | 'p99', groupBy?: string) => values(await chart({ name: 'latency', kind: 'histogram', aggregation, groupBy }));
    const worker = (await p('p50', 'service.name')).worker!;
    // 10..20 every minute (restart at minute 20 included), 20..30 in minute 5.
    expect(worker).toEqual([...minutes(5, 15), 25, ...minutes(44, 15), ...minutes(10, null)]);
    expect((await p('p95', 'service.name')).worker!.slice(0, 6)).toEqual([...minutes(5, 19.5), 29.5]);
    expect((await p('p50', 'service.name')).api).toEqual(minutes(60, 15));
    // Together, minute 0: 60 observations over 10..20 and 36 over 5..25, symmetric about 15.
    expect((await p('p50'))['']![0]).toBe(15);
    // p99: rank 95.04 of 96; 87 are below 20, then 1.8 per unit up to 25: 20 + 8.04 / 1.8.
    expect((await p('p99'))['']![0]).toBeCloseTo(20 + 8.04 / 1.8, 5);
  });

  it("counts a series' first point whole when its start time was read: a service that just started has percentiles", async () => {
    expect(values(await chart({ name: 'fresh', kind: 'histogram', aggregation: 'p50' }))['']).toEqual([15, ...minutes(59, null)]);
    expect(values(await chart({ name: 'fresh', kind: 'histogram', aggregation: 'count' }))['']!.slice(0, 2)).toEqual([4, null]);
  });

  it("gives a histogram's observations per second, count, sum and mean", async () => {
    const worker = async (aggregation: 'rate' | 'count' | 'sum' | 'avg') =>
      values(await chart({ name: 'latency', kind: 'histogram', aggregation, services: ['worker'] }))['']!;
    expect((await worker('rate')).slice(0, 21)).toEqual(minutes(21, 1));
    expect((await worker('count')).slice(18, 22)).toEqual([60, 60, 60, 60]);
    expect((await worker('sum')).slice(4, 7)).toEqual([900, 1500, 900]);
    expect((await worker('avg')).slice(4, 7)).toEqual([15, 25, 15]);
  });

  it('charts agent gauges by host and agent counters as a rate, restart included', async () => {
    const cpu = values(await chart({ name: 'cpu', kind: 'agent', aggregation: 'avg', groupBy: 'host.name' }));
    expect(Object.keys(cpu)).toEqual(['h1', 'h2']);
    expect(cpu.h1!.slice(0, 16)).toEqual([...minutes(15, 0.25), null]);
    expect(values(await chart({ name: 'cpu', kind: 'agent', aggregation: 'sum' }))['']![0]).toBe(1);
    const bytes = values(await chart({ name: 'bytes', kind: 'agent', aggregation: 'rate', attributes: [{ key: 'host.name', value: 'h2' }] }))['']!;
    // 1000 B every 10 s; restarted from 100 at minute 10: 100 + 5 × 1000 in that minute.
    expect(bytes.slice(0, 16)).toEqual([...minutes(10, 100), 5100 / 60, ...minutes(4, 100), null]);
  });

  it('counts the point at `from` and not the one at `to`', async () => {
    expect(values(await chart({ name: 'edges', kind: 'gauge', aggregation: 'count' }))).toEqual({ '': [1, ...minutes(58, null), 1] });
  });

  it('shows the 50 busiest series when more match, and says so', async () => {
    const result = await chart({ name: 'many', kind: 'gauge', aggregation: 'max', groupBy: 'id' });
    expect(result.truncated).toBe(true);
    expect(result.series).toHaveLength(50);
    expect(result.series.map((s) => s.group)).toEqual([...result.series.map((s) => s.group)].sort());
  });

  it("never mixes in another source's points", async () => {
    expect(values(await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'max' }, ['src-b']))['']![0]).toBe(30_000);
    const others: Array<Pick<MetricQuery, 'name' | 'kind' | 'aggregation' | 'attributes' | 'groupBy'>> = [
      { name: 'queue.depth', kind: 'gauge', aggregation: 'max', attributes: [{ key: 'queue', value: 'b' }] },
      { name: 'cpu', kind: 'agent', aggregation: 'max', groupBy: 'host.name' },
      { name: 'requests', kind: 'sum', aggregation: 'rate' },
    ];
    for (const query of others) {
      for (const series of (await chart(query)).series) expect(Math.max(...series.points.map(([, v]) => v ?? 0)), query.name).toBeLessThan(31);
    }
    expect((await chart({ name: 'queue.depth', kind: 'gauge', aggregation: 'max' }, ['src-c'])).series).toEqual([]);
    // Unasked, an hour gets a point a minute (the SDKs' default export interval).
    expect(await queries.metric([], { from, to, name: 'queue.depth', kind: 'gauge', aggregation: 'max' })).toEqual({ stepSeconds: 60, series: [] });
  });
});
