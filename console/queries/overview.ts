/**
 * The Overview page's figures: items received, accepted and refused (by reason) per second, per
 * source and signal, read from `ingest_counts` (pipeline/ingest-tally.ts writes it: 10-second
 * buckets, every gateway its own rows, summed here).
 *
 * Only the SourceIds given are read, bound as parameters by the engine (never spliced into the
 * SQL), and never the empty SourceId (requests refused before their source was known belong to
 * no tenant). Steps are whole multiples of the buckets, so a bucket never straddles two points;
 * every series has a point for every step of the range, zero where nothing came.
 *
 * Items of a refused request are its items when they were counted (refused after decoding), else
 * one per request (docs/reference/storage.md, Ingest counts), so every refusal shows.
 */
import type { Overview, OverviewSeries, TimeRange } from '../api.ts';
import { Params, type StatementExecutor } from './statement.ts';

/** The most points a series has. */
export const MAX_POINTS = 120;
/** Steps a chart reads well in, shortest first; past the last, whole days. Each is a whole number of ingest_counts' 10-second buckets. */
const STEPS = [10, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400];

/** The points of a range: the first one's start (epoch seconds), the step and how many. */
export interface OverviewSteps {
  first: number;
  stepSeconds: number;
  count: number;
}

/** The shortest step of STEPS (or whole days) that covers the range in at most MAX_POINTS points. */
export function overviewSteps({ from, to }: TimeRange): OverviewSteps {
  const start = Math.floor(from / 1000);
  const end = Math.max(start + 1, Math.ceil(to / 1000));
  const fits = (step: number) => {
    const first = Math.floor(start / step) * step;
    const count = Math.ceil((end - first) / step);
    return count <= MAX_POINTS ? { first, stepSeconds: step, count } : undefined;
  };
  for (const step of STEPS) {
    const steps = fits(step);
    if (steps) return steps;
  }
  // A day more than the even share: the range may start mid-step.
  return fits(86_400 * (Math.ceil((end - start) / 86_400 / MAX_POINTS) + 1))!;
}

/** The statement: item counts per source, signal, outcome, reason and point of the range. */
function statement(params: Params, sources: readonly string[], steps: OverviewSteps): string {
  const first = params.bind(steps.first, 'UInt32');
  const step = params.bind(steps.stepSeconds, 'UInt32');
  const end = params.bind(steps.first + steps.count * steps.stepSeconds, 'UInt32');
  return `SELECT SourceId, Signal, Outcome, Reason,
    intDiv(toUInt32(Timestamp) - ${first}, ${step}) AS point,
    toFloat64(sum(Items)) AS items
FROM ingest_counts
WHERE ${params.sources('SourceId', sources)}
    AND Timestamp >= toDateTime(${first}) AND Timestamp < toDateTime(${end})
GROUP BY SourceId, Signal, Outcome, Reason, point`;
}

interface CountRow {
  SourceId: string;
  Signal: string;
  Outcome: string;
  Reason: string;
  point: number;
  items: number;
}

/** One source and signal's series under construction: items per point. */
interface SignalCounts {
  sourceId: string;
  signal: string;
  received: Float64Array;
  accepted: Float64Array;
  refused: Map<string, Float64Array>;
}

/** Items per second by source, signal and outcome over `range`, for the sources given only. */
export async function overview(db: StatementExecutor, sources: readonly string[], range: TimeRange): Promise<Overview> {
  const steps = overviewSteps(range);
  // The empty SourceId holds refusals of no known source: no tenant's.
  const scope = [...new Set(sources)].filter((source) => source !== '');
  if (scope.length === 0) return { stepSeconds: steps.stepSeconds, series: [] };
  const params = new Params();
  const rows = await db.rows<CountRow>(statement(params, scope, steps), params);
  const counts = new Map<string, SignalCounts>();
  for (const row of rows) {
    const key = `${row.SourceId}\u0000${row.Signal}`;
    let entry = counts.get(key);
    if (!entry) {
      entry = { sourceId: row.SourceId, signal: row.Signal, received: new Float64Array(steps.count), accepted: new Float64Array(steps.count), refused: new Map() };
      counts.set(key, entry);
    }
    entry.received[row.point]! += row.items;
    if (row.Outcome === 'accepted') entry.accepted[row.point]! += row.items;
    else {
      let refused = entry.refused.get(row.Reason);
      if (!refused) entry.refused.set(row.Reason, (refused = new Float64Array(steps.count)));
      refused[row.point]! += row.items;
    }
  }
  const series: OverviewSeries[] = [];
  const sorted = [...counts.values()].sort((a, b) => compare(a.sourceId, b.sourceId) || compare(a.signal, b.signal));
  for (const { sourceId, signal, received, accepted, refused } of sorted) {
    series.push({ sourceId, signal, outcome: 'received', points: perSecond(received, steps) });
    series.push({ sourceId, signal, outcome: 'accepted', points: perSecond(accepted, steps) });
    for (const reason of [...refused.keys()].sort(compare)) {
      series.push({ sourceId, signal, outcome: 'refused', reason, points: perSecond(refused.get(reason)!, steps) });
    }
  }
  return { stepSeconds: steps.stepSeconds, series };
}

/** Items per point as [time (ms), items per second]. */
function perSecond(items: Float64Array, { first, stepSeconds }: OverviewSteps): Array<[number, number]> {
  return Array.from(items, (count, i): [number, number] => [(first + i * stepSeconds) * 1000, count / stepSeconds]);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

