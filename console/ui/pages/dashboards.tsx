/**
 * Dashboards: a list, and one dashboard as a grid of charts, each its metric query run over the
 * dashboard's time range with deploy markers. A chart takes half a row or the whole of it. The
 * service variable narrows every chart to one service. Range and service are in the URL, so a
 * shared link shows the same view. Charts move, widen, narrow and are removed in place; every
 * change is saved with PUT.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { ChartSpec, Dashboard } from '../../api.ts';
import { api, mayConfigure, problem } from '../api.ts';
import { CopyButton, ErrorNote, Loading, ReadOnlyNote } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { MetricChart } from '../metric-chart.tsx';
import { Link, href, navigate, withQuery, type Place } from '../router.tsx';
import { TimeRangePicker, rangeQuery, useTimeRange } from '../time-range.tsx';
import { formatAgo, formatDateTime, rangeParams } from '../time.ts';

export function DashboardsPage({ place }: { place: Place }) {
  useTitle('Dashboards');
  const list = useLoad(() => api.dashboards(), []);
  const [name, setName] = useState('');
  const [error, setError] = useState('');
  const create = async (event: Event) => {
    event.preventDefault();
    setError('');
    try {
      const made = await api.createDashboard({ name: name.trim(), charts: [] });
      navigate(href(`/dashboards/${encodeURIComponent(made.id)}`, rangeQuery(place)));
    } catch (err) {
      setError(problem(err));
    }
  };
  const dashboards = [...(list.data?.dashboards ?? [])].sort((a, b) => a.name.localeCompare(b.name));
  return (
    <>
      <div class="page-head">
        <h1>Dashboards</h1>
        {mayConfigure() ? <form class="inline-form" onSubmit={create}>
          <label class="inline">New dashboard <input value={name} required placeholder="e.g. Checkout latency" onInput={(event) => setName(event.currentTarget.value)} data-testid="dashboard-name" /></label>
          <button type="submit" class="primary" data-testid="dashboard-create">Create</button>
        </form> : <ReadOnlyNote />}
      </div>
      <ErrorNote error={error || list.error} />
      {list.loading && !list.data && <Loading />}
      {list.data && dashboards.length === 0 && (
        <section class="empty" data-testid="dashboards-empty">
          <h2>No dashboards yet</h2>
          <p>Create one above, or open <Link href="/metrics">Metrics</Link>, choose a metric and press “Save to dashboard”.</p>
        </section>
      )}
      {dashboards.length > 0 && (
        <table class="table" data-testid="dashboards-table">
          <thead><tr><th>Dashboard</th><th class="num">Charts</th><th>Changed</th></tr></thead>
          <tbody>
            {dashboards.map((one) => (
              <tr key={one.id} data-testid="dashboard-row">
                <td><Link href={href(`/dashboards/${encodeURIComponent(one.id)}`, rangeQuery(place))} data-testid="dashboard-link">{one.name}</Link></td>
                <td class="num">{one.charts.length}</td>
                <td title={formatDateTime(one.updatedAt)}>{formatAgo(one.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

/** One chart of the dashboard, its query narrowed by the service variable. */
function ChartOf({ chart, service, range }: { chart: ChartSpec; service: string; range: { from: number; to: number } }) {
  const query = useMemo(() => withService(chart, service), [chart, service]);
  return <MetricChart query={query} range={range} deployServices={query.services} height={200} testid="dashboard-chart-plot" />;
}

/** Keys that follow a chart when it moves: its spec, and which copy of it. */
function chartKeys(charts: ChartSpec[]): string[] {
  const seen = new Map<string, number>();
  return charts.map((chart) => {
    const text = JSON.stringify(chart);
    const nth = (seen.get(text) ?? 0) + 1;
    seen.set(text, nth);
    return `${text}#${nth}`;
  });
}

/** A chart's query with the dashboard's service variable applied: that service only, whatever the chart saved. */
function withService(chart: ChartSpec, service: string): ChartSpec['query'] {
  return service ? { ...chart.query, services: [service] } : chart.query;
}

/** The dashboard's service variable: every service of the range, or all of them. */
function ServiceVariable({ value, range }: { value: string; range: { from: number; to: number } }) {
  const services = useLoad((signal) => api.services(range, signal), [range]);
  const known = services.data?.services ?? [];
  return (
    <label class="field inline-field">Service
      <select value={value} onChange={(event) => navigate(withQuery({ service: event.currentTarget.value || undefined }))} data-testid="dashboard-service">
        <option value="">All</option>
        {/* A service in the link but not in this range stays chosen. */}
        {[...new Set([...(value ? [value] : []), ...known])].map((one) => <option key={one} value={one}>{one}</option>)}
      </select>
    </label>
  );
}

export function DashboardPage({ place, params }: { place: Place; params: Record<string, string> }) {
  const page = useTimeRange(place, '6h');
  const service = place.query.get('service') ?? '';
  const list = useLoad(() => api.dashboards(), []);
  const [dashboard, setDashboard] = useState<Dashboard | undefined>();
  const [error, setError] = useState('');
  useEffect(() => setDashboard(list.data?.dashboards.find((one) => one.id === params.id)), [list.data, params.id]);
  useTitle(dashboard?.name ?? 'Dashboard');

  /** Shows the change at once and saves it; on failure the saved version comes back with the error. */
  const change = async (charts: ChartSpec[]) => {
    if (!dashboard) return;
    const before = dashboard;
    setDashboard({ ...dashboard, charts });
    setError('');
    try {
      setDashboard(await api.saveDashboard(dashboard.id, { name: dashboard.name, charts }));
    } catch (err) {
      setDashboard(before);
      setError(problem(err));
    }
  };
  const move = (from: number, to: number) => {
    if (!dashboard || to < 0 || to >= dashboard.charts.length) return;
    const charts = [...dashboard.charts];
    const [chart] = charts.splice(from, 1);
    charts.splice(to, 0, chart!);
    void change(charts);
  };
  const remove = async () => {
    if (!dashboard || !confirm(`Delete the dashboard ${dashboard.name}?`)) return;
    try {
      await api.deleteDashboard(dashboard.id);
      navigate('/dashboards');
    } catch (err) {
      setError(problem(err));
    }
  };

  if (list.error) return <ErrorNote error={list.error} />;
  if (!list.data) return <Loading />;
  if (!dashboard) {
    return (
      <section class="empty" data-testid="dashboard-not-found">
        <h1>No such dashboard</h1>
        <p>It may have been deleted. <Link href="/dashboards">All dashboards</Link></p>
      </section>
    );
  }
  const widen = (i: number) => change(dashboard.charts.map((chart, j) => (j === i ? { ...chart, width: chart.width === 'full' ? 'half' : 'full' } : chart)));
  // The shared link always names its time range, even when this URL relies on the default, and the service.
  const shareLink = `${location.origin}${href(location.pathname, { ...rangeParams(page.choice), service: service || undefined })}`;
  const keys = chartKeys(dashboard.charts);
  return (
    <>
      <div class="page-head">
        <div>
          <p class="crumbs"><Link href="/dashboards">Dashboards</Link> /</p>
          <h1 data-testid="dashboard-title">{dashboard.name}</h1>
        </div>
        <div class="head-actions">
          <ServiceVariable value={service} range={page.range} />
          <TimeRangePicker page={page} />
          <CopyButton text={shareLink} label="Copy link" testid="dashboard-share" />
          {mayConfigure() && <button type="button" class="small-button danger" onClick={remove} data-testid="dashboard-delete">Delete</button>}
        </div>
      </div>
      <ErrorNote error={error} />
      {dashboard.charts.length === 0 && (
        <section class="empty" data-testid="dashboard-empty">
          <p>This dashboard has no charts yet. Open <Link href={href('/metrics', rangeQuery(place))}>Metrics</Link>, choose a metric and press “Save to dashboard”.</p>
        </section>
      )}
      <div class="chart-grid">
        {dashboard.charts.map((chart, i) => (
          <section class={chart.width === 'full' ? 'card wide' : 'card'} key={keys[i]} data-testid="dashboard-chart" data-width={chart.width ?? 'half'}>
            <div class="card-head">
              <h2 class="card-title">{chart.title}</h2>
              {mayConfigure() && <div class="card-actions">
                <button type="button" class="icon-button" onClick={() => move(i, i - 1)} disabled={i === 0} aria-label={`Move ${chart.title} up`} data-testid="chart-move-up">↑</button>
                <button type="button" class="icon-button" onClick={() => move(i, i + 1)} disabled={i === dashboard.charts.length - 1} aria-label={`Move ${chart.title} down`} data-testid="chart-move-down">↓</button>
                <button type="button" class="icon-button" onClick={() => widen(i)} aria-label={chart.width === 'full' ? `Make ${chart.title} half a row` : `Make ${chart.title} a whole row`} aria-pressed={chart.width === 'full'} data-testid="chart-width">⇔</button>
                <button type="button" class="icon-button danger" onClick={() => confirm(`Remove the chart ${chart.title}?`) && change(dashboard.charts.filter((_, j) => j !== i))} aria-label={`Remove ${chart.title}`} data-testid="chart-remove">✕</button>
              </div>}
            </div>
            <ChartOf chart={chart} service={service} range={page.range} />
          </section>
        ))}
      </div>
    </>
  );
}
