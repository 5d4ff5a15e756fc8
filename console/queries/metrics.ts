/**
 * Metrics: the names (with kind, unit, description and services) in a range, and one chart's
 * series (metric-sql.ts builds its statement; here the step is chosen and the answer shaped:
 * every bucket of the range a point, null where a series had nothing).
 */
import type { MetricInfo, MetricKind, MetricQuery, MetricResult, MetricSeries, TimeRange } from '../api.ts';
import { MAX_POINTS, MAX_SERIES } from './config.ts';
import { histogramQuantile, type BucketSet } from './histogram.ts';
import { metricStatement, shapeOf } from './metric-sql.ts';
import { Params, within, type StatementExecutor } from './statement.ts';

/** The most metric names one answer lists. */
export const MAX_METRIC_NAMES = 2000;

const NAME_TABLES: ReadonlyArray<[kind: MetricKind, table: string]> = [
  ['gauge', 'otel_metrics_gauge'],
  ['sum', 'otel_metrics_sum'],
  ['histogram', 'otel_metrics_histogram'],
  ['exp_histogram', 'otel_metrics_exp_histogram'],
  ['summary', 'otel_metrics_summary'],
];

export async function metricNames(db: StatementExecutor, sources: readonly string[], range: TimeRange): Promise<MetricInfo[]> {
  const params = new Params();
  const source = params.sources('SourceId', sources);
  const bounds = params.range(range);
  const services = (column: string) => `arraySort(arrayFilter(s -> s != '', groupUniqArray(100)(toString(${column}))))`;
  const branches = NAME_TABLES.map(([kind, table]) =>
    `SELECT toString(MetricName) AS name, '${kind}' AS kind, anyIf(MetricUnit, MetricUnit != '') AS unit, anyIf(MetricDescription, MetricDescription != '') AS description, ${services('ServiceName')} AS services
     FROM ${table} WHERE ${source} AND ${within('TimeUnix', bounds)} GROUP BY MetricName`);
  branches.push(`SELECT toString(MetricName), 'agent', toString(anyIf(Unit, Unit != '')), '', ${services('Service')}
     FROM agent_metrics WHERE ${source} AND ${within('Timestamp', bounds)} GROUP BY MetricName`);
  return db.rows<MetricInfo>(`SELECT * FROM (\n${branches.join('\nUNION ALL\n')}\n) ORDER BY name, kind LIMIT ${MAX_METRIC_NAMES}`, params);
}

/** Seconds per point a chart may have, the smallest that fits is used; past a day, whole days. */
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

/** Buckets of `step` seconds, aligned to the epoch, that [from, to) touches. */
function bucketCount({ from, to }: TimeRange, step: number): number {
  const stepMs = step * 1000;
  return Math.floor((to - 1) / stepMs) - Math.floor(from / stepMs) + 1;
}

/** The step asked for when it gives at most MAX_POINTS points, else the smallest of STEPS (or days) that does. */
/** Unasked steps: about this many points, each at least this long. */
const DEFAULT_POINTS = 240;
const DEFAULT_MIN_STEP_SECONDS = 60;

export function chooseStep(range: TimeRange, asked?: number): number {
  if (asked !== undefined && bucketCount(range, asked) <= MAX_POINTS) return asked;
  const seconds = (range.to - range.from) / 1000;
  // Unasked, a step no shorter than the SDKs' export interval (a minute by default): a shorter
  // one leaves most buckets empty, and a line of isolated points draws nothing.
  const least = asked !== undefined ? Math.max(asked, seconds / MAX_POINTS) : Math.max(DEFAULT_MIN_STEP_SECONDS, seconds / DEFAULT_POINTS);
  let step = STEPS.find((s) => s >= least) ?? Math.ceil(least / 86400) * 86400;
  while (bucketCount(range, step) > MAX_POINTS) step = STEPS.find((s) => s > step) ?? (Math.floor(step / 86400) + 1) * 86400;
  return step;
}

/** Lookback of the increments shape: a previous point for each series' first one in range. */
const MIN_LOOKBACK_MS = 5 * 60_000;

/** Bucket starts (seconds) come as strings: UInt64, quoted in JSON. */
interface ValueRow { g: string; points: Array<[string, number | null]>; weight: string }
interface BucketRow { g: string; cells: Array<[string, number[], number[]]>; weight: string }

export async function metric(db: StatementExecutor, sources: readonly string[], query: MetricQuery): Promise<MetricResult> {
  const stepSeconds = chooseStep(query, query.stepSeconds);
  const shape = shapeOf(query.kind, query.aggregation);
  const readFromMs = shape === 'values' ? query.from : query.from - Math.max(stepSeconds * 1000, MIN_LOOKBACK_MS);
  const params = new Params();
  const sql = metricStatement(params, sources, query, { stepSeconds, readFromMs });
  const stepMs = stepSeconds * 1000;
  const first = Math.floor(query.from / stepMs) * stepMs;
  const count = bucketCount(query, stepSeconds);
  /** Every bucket of the range, with the values found (seconds → value), null elsewhere. */
  const fill = (values: Map<number, number | null>): MetricSeries['points'] =>
    Array.from({ length: count }, (_, i) => {
      const time = first + i * stepMs;
      return [time, values.get(time / 1000) ?? null];
    });

  let series: MetricSeries[];
  if (shape === 'buckets') {
    const q = { p50: 0.5, p95: 0.95, p99: 0.99 }[query.aggregation as 'p50' | 'p95' | 'p99'];
    const rows = await db.rows<BucketRow>(sql, params);
    series = rows.map(({ g, cells }) => {
      const byBucket = new Map<number, BucketSet[]>();
      for (const [b, bounds, counts] of cells) byBucket.set(Number(b), [...(byBucket.get(Number(b)) ?? []), { bounds, counts }]);
      const values = new Map([...byBucket].map(([b, sets]) => [b, histogramQuantile(q, sets)]));
      return { group: g, points: fill(values) };
    });
  } else {
    const rows = await db.rows<ValueRow>(sql, params);
    series = rows.map(({ g, points }) => ({ group: g, points: fill(new Map(points.map(([b, v]) => [Number(b), v]))) }));
  }
  const truncated = series.length > MAX_SERIES;
  // The busiest series were kept; shown in a stable order.
  series = series.slice(0, MAX_SERIES).sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
  return truncated ? { stepSeconds, series, truncated } : { stepSeconds, series };
}
