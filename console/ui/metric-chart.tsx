/**
 * A metric query run over a time range and drawn, with the deploy markers of its services: the
 * Metrics page's chart and every chart of a dashboard.
 */
import { useMemo } from 'preact/hooks';
import type { MetricQuery, TimeRange } from '../api.ts';
import { api } from './api.ts';
import { TimeChart } from './chart.tsx';
import { ErrorNote, Loading } from './components.tsx';
import { useLoad } from './hooks.ts';

/** "p95 of http.server.duration by http.route": a chart's default title. */
export function describeQuery(query: Pick<MetricQuery, 'name' | 'aggregation' | 'groupBy' | 'services'>): string {
  const by = query.groupBy ? ` by ${query.groupBy}` : '';
  const of = query.services?.length ? ` (${query.services.join(', ')})` : '';
  return `${query.aggregation} of ${query.name}${by}${of}`;
}

interface MetricChartProps {
  query: Omit<MetricQuery, 'from' | 'to'>;
  range: TimeRange;
  /** Whose deploys to mark; all services' when absent. */
  deployServices?: string[];
  height?: number;
  testid: string;
}

export function MetricChart({ query, range, deployServices, height = 240, testid }: MetricChartProps) {
  const result = useLoad((signal) => api.metrics({ ...query, ...range }, signal), [query, range]);
  const deploys = useLoad((signal) => api.deploys({ ...range, services: deployServices?.length ? deployServices : undefined }, signal), [range, deployServices]);
  const lines = useMemo(
    () => (result.data?.series ?? []).map((series) => ({ label: series.group || query.name, points: series.points })),
    [result.data],
  );

  if (result.error) return <ErrorNote error={result.error} />;
  if (!result.data) return <Loading what="Running the query" />;
  if (lines.every((line) => line.points.length === 0)) {
    return <p class="chart-empty muted" data-testid={`${testid}-empty`}>No points for this query in the time range.</p>;
  }
  return (
    <>
      <TimeChart lines={lines} range={range} deploys={deploys.data?.deploys} unit={query.aggregation === 'rate' ? '/s' : ''} height={height} testid={testid} />
      <ErrorNote error={deploys.error && `Deploy markers: ${deploys.error}`} />
    </>
  );
}
