/**
 * The statements of a metric chart. A metric's points are read from its table as series
 * (SourceId, service, resource, scope and data point attributes; an agent's source, host,
 * service and attributes), bucketed by time (`step` seconds, aligned to the Unix epoch) and
 * split into groups (the `groupBy` attribute). Three shapes, by what the aggregation needs:
 *
 *   values      avg, min, max, count of the points in each bucket; sum: per series its bucket's
 *               mean (gauges), last value (cumulative sums) or total (delta sums), added up
 *               across the series of the group;
 *   increments  rate (per second), and a histogram's or summary's count, sum and mean, from what
 *               each series added between consecutive points: a delta point is its own increment;
 *               a cumulative one, its value minus the previous point's, or its whole value after a
 *               reset (a new start time, or a monotonic total that went down: the counter restarted
 *               from 0). A series' first point has no increment, unless its start time is inside
 *               what was read (the whole total is then new): one more step, and at least five
 *               minutes, is read before the range to find each series' previous point;
 *   buckets     p50/p95/p99 of histograms: bucket counts incremented the same way (per bucket),
 *               added up per group, time bucket and set of bounds; the quantile is interpolated
 *               by histogram.ts.
 * Each answers one row per group with its points, the groups with the most points first, at most
 * MAX_SERIES + 1 (to tell that there were more).
 */
import type { Aggregation, MetricKind, MetricQuery } from '../api.ts';
import { MAX_SERIES } from './config.ts';
import { mapEquals, Params } from './statement.ts';

/** Where a kind's points are, and the expressions the shapes read from them. */
interface MetricTable {
  table: string;
  /** The time column (DateTime, or DateTime64 for agents). */
  time: string;
  service: string;
  /** The series identity. */
  series: string;
  /** 'delta', 'cumulative' or 'gauge', per point. */
  mode: string;
  monotonic: string;
  start: string;
  /** The value of `values`, the running total of `increments` (a histogram's Count)... */
  value: string;
  /** ...and the second total a histogram has (its Sum). */
  total: string;
}

const OTEL_SERIES = 'cityHash64(SourceId, ServiceName, ResourceAttributes, ScopeName, Attributes)';
const TEMPORALITY = "if(AggregationTemporality = 1, 'delta', 'cumulative')";

const TABLES: Record<MetricKind, MetricTable> = {
  gauge: { table: 'otel_metrics_gauge', time: 'TimeUnix', service: 'ServiceName', series: OTEL_SERIES, mode: "'gauge'", monotonic: '0', start: 'StartTimeUnix', value: 'Value', total: '0' },
  sum: { table: 'otel_metrics_sum', time: 'TimeUnix', service: 'ServiceName', series: OTEL_SERIES, mode: TEMPORALITY, monotonic: 'IsMonotonic', start: 'StartTimeUnix', value: 'Value', total: '0' },
  histogram: { table: 'otel_metrics_histogram', time: 'TimeUnix', service: 'ServiceName', series: OTEL_SERIES, mode: TEMPORALITY, monotonic: '1', start: 'StartTimeUnix', value: 'toFloat64(Count)', total: 'Sum' },
  exp_histogram: { table: 'otel_metrics_exp_histogram', time: 'TimeUnix', service: 'ServiceName', series: OTEL_SERIES, mode: TEMPORALITY, monotonic: '1', start: 'StartTimeUnix', value: 'toFloat64(Count)', total: 'Sum' },
  // A summary is cumulative by definition (OTLP has no temporality for it).
  summary: { table: 'otel_metrics_summary', time: 'TimeUnix', service: 'ServiceName', series: OTEL_SERIES, mode: "'cumulative'", monotonic: '1', start: 'StartTimeUnix', value: 'toFloat64(Count)', total: 'Sum' },
  // An agent counter is a cumulative, monotonic total (pipeline/agent/schemas.ts); it has no start time.
  agent: { table: 'agent_metrics', time: 'Timestamp', service: 'Service', series: 'cityHash64(SourceId, Host, Service, Attributes)', mode: "if(MetricType = 'counter', 'cumulative', 'gauge')", monotonic: "MetricType = 'counter'", start: '0', value: 'Value', total: '0' },
};

export type Shape = 'values' | 'increments' | 'buckets';

const HISTOGRAM_LIKE = new Set<MetricKind>(['histogram', 'exp_histogram', 'summary']);

export function shapeOf(kind: MetricKind, aggregation: Aggregation): Shape {
  if (aggregation === 'p50' || aggregation === 'p95' || aggregation === 'p99') return 'buckets';
  if (aggregation === 'rate') return 'increments';
  if (HISTOGRAM_LIKE.has(kind) && (aggregation === 'avg' || aggregation === 'sum' || aggregation === 'count')) return 'increments';
  return 'values';
}

/** What a plan needs besides the query: the step and where reading starts (before `from` for increments). */
export interface MetricWindow { stepSeconds: number; readFromMs: number }

/** The statement of a metric chart (see the module comment); `query` is validated. */
export function metricStatement(params: Params, sources: readonly string[], query: MetricQuery, window: MetricWindow): string {
  const t = TABLES[query.kind];
  const shape = shapeOf(query.kind, query.aggregation);
  const step = params.bind(window.stepSeconds, 'UInt32');
  const where = [
    params.sources('SourceId', sources),
    `MetricName = ${params.bind(query.name, 'String')}`,
    `${t.time} >= ${params.millis(window.readFromMs)}`,
    `${t.time} < ${params.millis(query.to)}`,
  ];
  if (query.services?.length) where.push(`${t.service} IN ${params.list(query.services)}`);
  for (const { key, value } of query.attributes ?? []) where.push(attributeMatch(params, query.kind, key, value));
  const group = groupExpression(params, query.kind, query.groupBy);
  const bucket = `intDiv(toUnixTimestamp(${t.time}), ${step}) * ${step}`;
  const limit = `ORDER BY weight DESC, g LIMIT ${MAX_SERIES + 1}`;

  if (shape === 'values') {
    // A histogram's min and max are its points' Min and Max columns.
    const v = query.kind === 'agent' || !HISTOGRAM_LIKE.has(query.kind) ? t.value : query.aggregation === 'min' ? 'Min' : 'Max';
    const combine: Record<string, string> = {
      avg: 'sum(s) / sum(n)', min: 'min(mn)', max: 'max(mx)', count: 'sum(n)',
      sum: "sum(multiIf(mode = 'delta', s, mode = 'cumulative', l, a))",
    };
    return `SELECT g, groupArray((b, v)) AS points, sum(points_in_bucket) AS weight FROM (
      SELECT g, b, ${combine[query.aggregation]} AS v, sum(n) AS points_in_bucket FROM (
        SELECT ${group} AS g, ${t.series} AS sid, ${bucket} AS b, any(${t.mode}) AS mode, avg(${v}) AS a,
          argMax(${v}, ${t.time}) AS l, sum(${v}) AS s, min(${v}) AS mn, max(${v}) AS mx, count() AS n
        FROM ${t.table} WHERE ${where.join(' AND ')} GROUP BY g, sid, b
      ) GROUP BY g, b
    ) GROUP BY g ${limit}`;
  }

  // Increments of a running total x (and y), per series in time order; reset as the module comment says.
  const reset = `(start != pstart OR (monotonic AND x < px))`;
  const increment = (c: string) => `multiIf(mode = 'delta', ${c}, mode = 'gauge', ${c} - p${c}, ${reset}, ${c}, ${c} - p${c})`;
  const ordered = (extra: string) => `SELECT ${group} AS g, ${t.series} AS sid, ${t.time} AS ts, toUnixTimestamp(${t.time}) AS t,
      ${t.mode} AS mode, ${t.monotonic} AS monotonic, toUInt32(${t.start}) AS start, ${t.value} AS x, ${t.total} AS y${extra},
      row_number() OVER w AS i, lagInFrame(start) OVER w AS pstart, lagInFrame(x) OVER w AS px, lagInFrame(y) OVER w AS py
    FROM ${t.table} WHERE ${where.join(' AND ')}
    WINDOW w AS (PARTITION BY sid ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)`;
  // A series' first point read counts whole when its counter started inside what was read (OTLP
  // says since when a cumulative total runs): a service that just started has a first increment.
  const readFrom = params.bind(Math.floor(window.readFromMs / 1000), 'Int64');
  const inRange = `t >= intDiv(${params.bind(query.from, 'Int64')}, 1000) AND (mode = 'delta' OR i > 1 OR (start > 0 AND start >= ${readFrom}))`;

  if (shape === 'increments') {
    const combine: Record<string, string> = {
      rate: `sum(ix) / ${step}`, count: 'sum(ix)', sum: 'sum(iy)', avg: 'if(sum(ix) = 0, NULL, sum(iy) / sum(ix))',
    };
    return `SELECT g, groupArray((b, v)) AS points, sum(n) AS weight FROM (
      SELECT g, intDiv(t, ${step}) * ${step} AS b, ${combine[query.aggregation]} AS v, count() AS n FROM (
        SELECT g, t, ${increment('x')} AS ix, ${increment('y')} AS iy FROM (${ordered('')}) WHERE ${inRange}
      ) GROUP BY g, b
    ) GROUP BY g ${limit}`;
  }

  // Buckets: a changed set of bounds (or of bucket count) is a reset as well.
  const counts = 'arrayMap(c -> toFloat64(c), BucketCounts)';
  return `SELECT g, groupArray((b, bounds, counts)) AS cells, sum(n) AS weight FROM (
    SELECT g, intDiv(t, ${step}) * ${step} AS b, bounds, sumForEach(dc) AS counts, count() AS n FROM (
      SELECT g, t, bounds,
        if(mode = 'delta' OR ${reset} OR bounds != pbounds OR length(c) != length(pc), c, arrayMap((v, p) -> greatest(v - p, 0), c, pc)) AS dc
      FROM (${ordered(`, ExplicitBounds AS bounds, ${counts} AS c, lagInFrame(bounds) OVER w AS pbounds, lagInFrame(c) OVER w AS pc`)})
      WHERE ${inRange}
    ) GROUP BY g, b, bounds
  ) GROUP BY g ${limit}`;
}

/** The group a point belongs to: '' without groupBy; `service.name` (and an agent's `host.name`) are columns. */
function groupExpression(params: Params, kind: MetricKind, groupBy: string | undefined): string {
  if (groupBy === undefined) return "''";
  if (groupBy === 'service.name') return `toString(${TABLES[kind].service})`;
  if (kind === 'agent' && groupBy === 'host.name') return 'toString(Host)';
  const key = params.bind(groupBy, 'String');
  // A resource attribute (host.name, k8s.pod.name...) splits as well as a data point attribute.
  return kind === 'agent' ? `Attributes[${key}]` : `if(mapContains(Attributes, ${key}), Attributes[${key}], ResourceAttributes[${key}])`;
}

function attributeMatch(params: Params, kind: MetricKind, key: string, value: string): string {
  const k = params.bind(key, 'String');
  const v = params.bind(value, 'String');
  const empty = value === '';
  if (kind === 'agent') return `(${mapEquals('Attributes', k, v, empty)} OR (${k} = 'host.name' AND Host = ${v}) OR (${k} = 'service.name' AND Service = ${v}))`;
  return `(${mapEquals('Attributes', k, v, empty)} OR ${mapEquals('ResourceAttributes', k, v, empty)})`;
}
