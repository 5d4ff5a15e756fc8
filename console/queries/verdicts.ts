/**
 * Deploy verdicts (console/deploy-verdict.ts judges): for each of the newest deploy markers in
 * the range, the deployed service's requests — its server and consumer spans, from every source
 * of the tenant — in the window before the deploy and the window after it. Each window is
 * VERDICT_WINDOW_MS long at most, and ends at the service's previous or next deploy (so each
 * measures one version) and at now. One statement per marker, reading the service's spans of
 * the two windows only.
 */
import type { DeployMarker, DeployVerdictView, TimeRange, VerdictWindow } from '../api.ts';
import { judgeDeploy, type WindowStats } from '../deploy-verdict.ts';
import { deploys } from './catalog.ts';
import { Params, within, type StatementExecutor } from './statement.ts';

export const VERDICT_WINDOW_MS = 30 * 60_000;
/** Markers one answer judges, newest first. */
export const MAX_VERDICTS = 20;
/** Durations per window the latency test ranks. */
export const LATENCY_SAMPLE = 2000;

interface WindowRow {
  after: number;
  requests: string;
  errors: string;
  q: number[];
  sample: number[];
}

export async function deployVerdicts(
  db: StatementExecutor,
  sources: readonly string[],
  query: TimeRange & { services?: string[] },
  now = Date.now(),
): Promise<DeployVerdictView[]> {
  // One verdict per service and instant: the same deploy reported by two sources is one deploy.
  const markers: DeployMarker[] = [];
  const seen = new Set<string>();
  for (const marker of await deploys(db, sources, query)) {
    const key = `${marker.service}\n${marker.time}`;
    if (seen.has(key)) continue;
    seen.add(key);
    markers.push(marker);
    if (markers.length === MAX_VERDICTS) break;
  }
  if (markers.length === 0) return [];
  const neighbours = await deployTimes(db, sources, markers);
  const verdicts: DeployVerdictView[] = [];
  for (const marker of markers) {
    const times = neighbours.get(marker.service) ?? [];
    const previous = Math.max(...times.filter((t) => t < marker.time), marker.time - VERDICT_WINDOW_MS);
    const next = Math.min(...times.filter((t) => t > marker.time), marker.time + VERDICT_WINDOW_MS, Math.max(now, marker.time));
    const [before, after] = await windows(db, sources, marker, previous, next);
    const judged = judgeDeploy(before.stats, after.stats);
    verdicts.push({
      marker,
      verdict: judged.verdict,
      reason: judged.reason,
      ...(judged.errors ? { errors: judged.errors } : {}),
      ...(judged.latency ? { latency: judged.latency } : {}),
      before: before.view,
      after: after.view,
    });
  }
  return verdicts;
}

/** Every deploy time of the markers' services near them (a window either side of the range they span). */
async function deployTimes(db: StatementExecutor, sources: readonly string[], markers: DeployMarker[]): Promise<Map<string, number[]>> {
  const times = markers.map((m) => m.time);
  const found = await deploys(db, sources, {
    from: Math.min(...times) - VERDICT_WINDOW_MS,
    to: Math.max(...times) + VERDICT_WINDOW_MS + 1,
    services: [...new Set(markers.map((m) => m.service))],
  });
  const byService = new Map<string, number[]>();
  for (const { service, time } of found) byService.set(service, [...(byService.get(service) ?? []), time]);
  return byService;
}

async function windows(db: StatementExecutor, sources: readonly string[], marker: DeployMarker, from: number, to: number) {
  const params = new Params();
  const at = params.millis(marker.time);
  const rows = await db.rows<WindowRow>(
    `SELECT Timestamp >= ${at} AS after, count() AS requests, countIf(StatusCode = 'Error') AS errors,
       quantiles(0.5, 0.95, 0.99)(Duration / 1e6) AS q, groupArraySample(${LATENCY_SAMPLE}, 1)(Duration / 1e6) AS sample
     FROM otel_traces
     WHERE ${params.sources('SourceId', sources)} AND ServiceName = ${params.bind(marker.service, 'String')}
       AND SpanKind IN ('Server', 'Consumer') AND ${within('Timestamp', params.range({ from, to }))}
     GROUP BY after`,
    params,
  );
  const side = (after: boolean, range: { from: number; to: number }) => {
    const row = rows.find((r) => Boolean(Number(r.after)) === after);
    const requests = Number(row?.requests ?? 0);
    const errors = Number(row?.errors ?? 0);
    const [p50 = 0, p95 = 0, p99 = 0] = requests > 0 ? row!.q.map(Number) : [];
    const stats: WindowStats = { requests, errors, p50, p95, p99, sample: (row?.sample ?? []).map(Number) };
    const view: VerdictWindow = { ...range, requests, errors, errorRate: requests > 0 ? errors / requests : 0, p50, p95, p99 };
    return { stats, view };
  };
  return [side(false, { from, to: marker.time }), side(true, { from: marker.time, to })] as const;
}
