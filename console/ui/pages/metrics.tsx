/**
 * Metrics: choose a metric, how to aggregate it (rate for sums, percentiles for histograms), an
 * attribute to split it by and a service; the chart shows it over the time range with the deploys
 * of its services. Everything is in the URL; "Save to dashboard" keeps the query as a chart.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { Aggregation, MetricInfo, MetricKind, MetricQuery } from '../../api.ts';
import { api } from '../api.ts';
import { AttributeFilters, ErrorNote, Loading, Onboarding, ServiceSelect, parseAttribute } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { Link, href, navigate, withQuery, type Place } from '../router.tsx';
import { RangePageHead, rangeQuery, useTimeRange } from '../time-range.tsx';
import { MetricChart, describeQuery } from '../metric-chart.tsx';
import { SaveToDashboard } from '../save-chart.tsx';

/** The aggregations that mean something for a kind; the first is the default. */
export const AGGREGATIONS: Record<MetricKind, Aggregation[]> = {
  gauge: ['avg', 'min', 'max', 'sum', 'count'],
  sum: ['rate', 'sum', 'avg', 'min', 'max'],
  histogram: ['p95', 'p50', 'p99', 'avg', 'count'],
  exp_histogram: ['p95', 'p50', 'p99', 'avg', 'count'],
  summary: ['avg', 'min', 'max', 'count'],
  agent: ['avg', 'min', 'max', 'sum', 'count'],
};
const KINDS = Object.keys(AGGREGATIONS) as MetricKind[];

function MetricList({ metrics, place }: { metrics: MetricInfo[]; place: Place }) {
  return (
    <table class="table" data-testid="metric-list">
      <caption>Metrics in this time range: choose one</caption>
      <thead><tr><th>Metric</th><th>Kind</th><th>Unit</th><th>Services</th><th>Description</th></tr></thead>
      <tbody>
        {metrics.map((metric) => (
          <tr key={metric.name}>
            <td><Link href={href('/metrics', { ...rangeQuery(place), metric: metric.name, kind: metric.kind })} data-testid="metric-link">{metric.name}</Link></td>
            <td>{metric.kind}</td>
            <td>{metric.unit}</td>
            <td class="small">{metric.services.join(', ')}</td>
            <td class="small muted">{metric.description}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function MetricsPage({ place }: { place: Place }) {
  useTitle('Metrics');
  const page = useTimeRange(place, '1h');
  const { range } = page;
  const q = place.query;
  const names = useLoad((signal) => api.metricNames(range, signal), [range]);
  const metrics = names.data?.metrics ?? [];
  const name = q.get('metric') ?? '';
  const info = metrics.find((metric) => metric.name === name);
  // The kind is in the URL too, so a shared link works before (or without) the name list.
  const kind = info?.kind ?? KINDS.find((one) => one === q.get('kind')) ?? 'gauge';
  const aggregation = AGGREGATIONS[kind].find((one) => one === q.get('agg')) ?? AGGREGATIONS[kind][0]!;
  const groupBy = q.get('group') ?? '';
  const service = q.get('service') ?? '';
  const attrs = q.getAll('attr');

  const chart: Omit<MetricQuery, 'from' | 'to'> | undefined = useMemo(() => (name ? {
    name,
    kind,
    aggregation,
    services: service ? [service] : undefined,
    groupBy: groupBy || undefined,
    attributes: attrs.length ? attrs.map(parseAttribute).filter((one) => one !== undefined) : undefined,
  } : undefined), [name, kind, aggregation, service, groupBy, attrs.join('\n')]);

  const [groupDraft, setGroupDraft] = useState(groupBy);
  useEffect(() => setGroupDraft(groupBy), [groupBy]);
  const set = (changes: Record<string, string | string[] | undefined>) => navigate(withQuery(changes));

  return (
    <>
      <RangePageHead title="Metrics" page={page} />
      <ErrorNote error={names.error} />
      {names.loading && !names.data && <Loading what="Loading metric names" />}
      {names.data && metrics.length === 0 && !name && <Onboarding signal="metrics" />}
      {(metrics.length > 0 || name) && (
        <form class="filters" onSubmit={(event) => { event.preventDefault(); set({ group: groupDraft.trim() }); }} data-testid="metrics-form">
          <label class="field grow">Metric
            <select data-search value={name} onChange={(event) => {
              const picked = metrics.find((metric) => metric.name === event.currentTarget.value);
              set({ metric: picked?.name, kind: picked?.kind, agg: undefined, group: undefined, service: undefined, attr: undefined });
            }} data-testid="metrics-name">
              <option value="">Choose a metric…</option>
              {[...metrics, ...(name && !info ? [{ name, kind, unit: '', description: '', services: [] }] : [])].map((metric) => (
                <option key={metric.name} value={metric.name}>{metric.name} ({metric.kind}{metric.unit ? `, ${metric.unit}` : ''})</option>
              ))}
            </select>
          </label>
          <label class="field">Aggregation
            <select value={aggregation} onChange={(event) => set({ agg: event.currentTarget.value })} disabled={!name} data-testid="metrics-aggregation">
              {AGGREGATIONS[kind].map((one) => <option key={one} value={one}>{one === 'rate' ? 'rate (per second)' : one}</option>)}
            </select>
          </label>
          <ServiceSelect value={service} services={info?.services ?? []} current={service} onChange={(next) => set({ service: next })} disabled={!name} testid="metrics-service" />
          <label class="field">Group by
            <input list="group-by-suggestions" value={groupDraft} placeholder="e.g. service.name" disabled={!name} onInput={(event) => setGroupDraft(event.currentTarget.value)} onBlur={() => groupDraft.trim() !== groupBy && set({ group: groupDraft.trim() })} data-testid="metrics-group-by" />
            <datalist id="group-by-suggestions"><option value="service.name" /></datalist>
          </label>
          {name && <AttributeFilters value={attrs} onChange={(next) => set({ attr: next })} />}
          <div class="filter-actions"><button type="submit" class="primary" disabled={!name}>Show</button></div>
        </form>
      )}
      {!name && metrics.length > 0 && <MetricList metrics={metrics} place={place} />}
      {chart && (
        <section class="card">
          <div class="card-head">
            <h2 class="card-title">{describeQuery(chart)}{info?.unit && <span class="muted"> · {info.unit}{aggregation === 'rate' ? '/s' : ''}</span>}</h2>
            <SaveToDashboard chart={chart} />
          </div>
          {info?.description && <p class="muted small">{info.description}</p>}
          <MetricChart query={chart} range={range} deployServices={service ? [service] : info?.services} height={320} testid="metric-chart" />
        </section>
      )}
    </>
  );
}
