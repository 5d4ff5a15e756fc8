/**
 * Ingest, the operator's page: per source and signal, what arrived, what was accepted and what
 * was refused, per second over the time range (the last hour unless the URL says otherwise),
 * then the refusals by reason. Deploy markers sit on every chart.
 */
import { useMemo } from 'preact/hooks';
import type { OverviewSeries } from '../../api.ts';
import { api } from '../api.ts';
import { TimeChart, type ChartLine } from '../chart.tsx';
import { ErrorNote, Loading, Onboarding } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import type { Place } from '../router.tsx';
import { RangePageHead, useFollowNow, useTimeRange } from '../time-range.tsx';

const OUTCOMES = ['received', 'accepted', 'refused'] as const;
const OUTCOME_COLOURS = ['#2563eb', '#059669', '#dc2626'];

/** Adds up series point by point (refusals of several reasons, one line). */
export function sumPoints(series: OverviewSeries[]): Array<[number, number]> {
  const sums = new Map<number, number>();
  for (const one of series) for (const [time, value] of one.points) sums.set(time, (sums.get(time) ?? 0) + value);
  return [...sums].sort((a, b) => a[0] - b[0]);
}

/** Items over the range: per-second rates times the step. */
function total(series: OverviewSeries[], stepSeconds: number): number {
  return series.reduce((sum, one) => sum + one.points.reduce((s, [, perSecond]) => s + perSecond * stepSeconds, 0), 0);
}

const count = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });

interface Panel {
  key: string;
  sourceId: string;
  signal: string;
  lines: ChartLine[];
  totals: Record<(typeof OUTCOMES)[number], number>;
}

function panels(series: OverviewSeries[], stepSeconds: number): Panel[] {
  const groups = new Map<string, OverviewSeries[]>();
  for (const one of series) {
    const key = `${one.sourceId}\u0000${one.signal}`;
    groups.set(key, [...(groups.get(key) ?? []), one]);
  }
  return [...groups].map(([key, group]) => {
    const of = (outcome: string) => group.filter((one) => one.outcome === outcome);
    return {
      key,
      sourceId: group[0]!.sourceId,
      signal: group[0]!.signal,
      lines: OUTCOMES.map((outcome) => ({ label: outcome, points: sumPoints(of(outcome)) })),
      totals: { received: total(of('received'), stepSeconds), accepted: total(of('accepted'), stepSeconds), refused: total(of('refused'), stepSeconds) },
    };
  }).sort((a, b) => a.key.localeCompare(b.key));
}

export function OverviewPage({ place }: { place: Place }) {
  useTitle('Ingest');
  const page = useTimeRange(place, '1h');
  // The counts land every 10 seconds: the page follows them.
  useFollowNow(page, 10_000);
  const { range } = page;
  const overview = useLoad((signal) => api.overview(range, signal), [range]);
  const deploys = useLoad((signal) => api.deploys(range, signal), [range]);
  const sources = useLoad(() => api.sources(), []);

  const names = new Map(sources.data?.sources.map((source) => [source.id, source.name]) ?? []);
  // Worked out once per answer: the charts are rebuilt only when their lines change.
  const { stepSeconds, shown, reasons, reasonLines, refusedTotal } = useMemo(() => {
    const stepSeconds = overview.data?.stepSeconds ?? 60;
    const series = overview.data?.series ?? [];
    const refusals = series.filter((one) => one.outcome === 'refused');
    const reasons = new Map<string, OverviewSeries[]>();
    for (const one of refusals) reasons.set(one.reason ?? 'unknown', [...(reasons.get(one.reason ?? 'unknown') ?? []), one]);
    const reasonLines = [...reasons].map(([reason, group]) => ({ label: reason, points: sumPoints(group) }));
    return { stepSeconds, shown: panels(series, stepSeconds), reasons, reasonLines, refusedTotal: total(refusals, stepSeconds) };
  }, [overview.data]);

  return (
    <>
      <RangePageHead title="Ingest" page={page} />
      <ErrorNote error={overview.error || deploys.error} />
      {overview.loading && !overview.data && <Loading />}
      {overview.data && shown.length === 0 && <Onboarding signal="telemetry" />}
      {shown.length > 0 && (
        <>
          <table class="table compact" data-testid="overview-totals">
            <caption>Items in the range</caption>
            <thead><tr><th>Source</th><th>Signal</th><th class="num">Received</th><th class="num">Accepted</th><th class="num">Refused</th></tr></thead>
            <tbody>
              {shown.map((panel) => (
                <tr key={panel.key}>
                  <td>{names.get(panel.sourceId) ?? panel.sourceId}</td>
                  <td>{panel.signal}</td>
                  <td class="num">{count.format(panel.totals.received)}</td>
                  <td class="num">{count.format(panel.totals.accepted)}</td>
                  <td class={panel.totals.refused > 0 ? 'num bad' : 'num'}>{count.format(panel.totals.refused)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <div class="chart-grid">
            {shown.map((panel) => (
              <section class="card" key={panel.key} data-testid="overview-panel">
                <h2 class="card-title">{names.get(panel.sourceId) ?? panel.sourceId} <span class="muted">· {panel.signal} per second</span></h2>
                <TimeChart lines={panel.lines} colours={OUTCOME_COLOURS} range={range} deploys={deploys.data?.deploys} unit="/s" height={180} testid="overview-chart" />
              </section>
            ))}
          </div>
          <section class="card" data-testid="refusals">
            <h2 class="card-title">Refusals by reason</h2>
            {reasons.size === 0 ? (
              <p class="muted">Nothing was refused in this range.</p>
            ) : (
              <>
                <TimeChart
                  lines={reasonLines}
                  range={range}
                  deploys={deploys.data?.deploys}
                  unit="/s"
                  height={180}
                  testid="refusals-chart"
                />
                <table class="table compact" data-testid="refusals-table">
                  <thead><tr><th>Reason</th><th>Sources</th><th class="num">Refused</th><th class="num">Share</th></tr></thead>
                  <tbody>
                    {[...reasons].map(([reason, group]) => ({ reason, group, refused: total(group, stepSeconds) })).sort((a, b) => b.refused - a.refused).map(({ reason, group, refused }) => (
                      <tr key={reason}>
                        <td><code>{reason}</code></td>
                        <td>{[...new Set(group.map((one) => `${names.get(one.sourceId) ?? one.sourceId} (${one.signal})`))].join(', ')}</td>
                        <td class="num">{count.format(refused)}</td>
                        <td class="num">{refusedTotal > 0 ? `${((refused / refusedTotal) * 100).toFixed(1)} %` : '–'}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </>
            )}
          </section>
        </>
      )}
    </>
  );
}
