/**
 * Services: how each one is doing, from its requests (server and consumer spans) — requests per
 * second, error rate and p50/p95/p99 latency over the range, with sparklines of each over time.
 * The landing page. A service's page adds charts with its deploy markers, its operations, and
 * links to its traces and logs.
 */
import { useMemo } from 'preact/hooks';
import type { ServiceHealth } from '../../api.ts';
import { api } from '../api.ts';
import { TimeChart } from '../chart.tsx';
import { ErrorNote, Loading, Onboarding } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { Link, href, type Place } from '../router.tsx';
import { RangePageHead, rangeQuery, useTimeRange } from '../time-range.tsx';
import { formatDuration } from '../time.ts';

const rate = (perSecond: number) => (perSecond >= 10 ? perSecond.toFixed(0) : perSecond >= 0.1 ? perSecond.toFixed(2) : perSecond.toPrecision(2));
const percent = (share: number) => `${(share * 100).toFixed(share > 0 && share < 0.1 ? 1 : 0)} %`;

/** A line of the values, scaled to its own height; decoration beside the figure it draws. */
function Sparkline({ values, label, bad = false }: { values: number[]; label: string; bad?: boolean }) {
  if (values.length < 2) return null;
  const max = Math.max(...values);
  const min = Math.min(0, ...values);
  const spread = max - min || 1;
  const points = values.map((value, i) => `${((i / (values.length - 1)) * 100).toFixed(1)},${(22 - ((value - min) / spread) * 20).toFixed(1)}`).join(' ');
  return (
    <svg class={`sparkline${bad ? ' sparkline-bad' : ''}`} viewBox="0 0 100 24" preserveAspectRatio="none" role="img" aria-label={label}>
      <polyline points={points} fill="none" vector-effect="non-scaling-stroke" />
    </svg>
  );
}

/** A figure with its sparkline under it. */
function Figure({ text, values, label, bad }: { text: string; values: number[]; label: string; bad?: boolean }) {
  return (
    <td class="num figure">
      <span class={bad ? 'bad' : undefined}>{text}</span>
      <Sparkline values={values} label={label} bad={bad} />
    </td>
  );
}

export function ServicesPage({ place }: { place: Place }) {
  useTitle('Services');
  const page = useTimeRange(place, '1h');
  const { range } = page;
  const health = useLoad((signal) => api.servicesHealth(range, signal), [range]);
  const services = health.data?.services ?? [];
  return (
    <>
      <RangePageHead title="Services" page={page} />
      <ErrorNote error={health.error} />
      {health.loading && !health.data && <Loading what="Reading services" />}
      {health.data && services.length === 0 && (
        <Onboarding signal="traces">
          <p class="small muted">Services appear here from their server and consumer spans. What each source sends, traces or not: <Link href={href('/ingest', rangeQuery(place))}>Ingest</Link>.</p>
        </Onboarding>
      )}
      {services.length > 0 && (
        <table class="table" data-testid="services-table">
          <thead>
            <tr><th>Service</th><th class="num">Requests/s</th><th class="num">Error rate</th><th class="num">p50</th><th class="num">p95</th><th class="num">p99</th><th class="num">Requests</th></tr>
          </thead>
          <tbody>
            {services.map((service) => (
              <tr key={service.service} data-testid="service-row" data-service={service.service}>
                <td><Link href={href(`/services/${encodeURIComponent(service.service)}`, rangeQuery(place))} data-testid="service-link"><strong>{service.service}</strong></Link></td>
                <Figure text={rate(service.perSecond)} values={service.series.map(([, perSecond]) => perSecond)} label={`Requests per second of ${service.service} over time`} />
                <Figure text={percent(service.errorRate)} values={service.series.map(([, , errorRate]) => errorRate)} label={`Error rate of ${service.service} over time`} bad={service.errorRate >= 0.05} />
                <td class="num" data-testid="service-p50">{formatDuration(service.p50)}</td>
                <Figure text={formatDuration(service.p95)} values={service.series.map(([, , , p95]) => p95)} label={`p95 latency of ${service.service} over time`} />
                <td class="num">{formatDuration(service.p99)}</td>
                <td class="num" data-testid="service-requests">{service.requests.toLocaleString('en-US')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

export function ServicePage({ place, params }: { place: Place; params: Record<string, string> }) {
  const name = params.service!;
  useTitle(name);
  const page = useTimeRange(place, '1h');
  const { range } = page;
  const health = useLoad((signal) => api.servicesHealth({ ...range, services: [name] }, signal), [range, name]);
  const operations = useLoad((signal) => api.serviceOperations({ ...range, service: name }, signal), [range, name]);
  const deploys = useLoad((signal) => api.deploys({ ...range, services: [name] }, signal), [range, name]);
  const service: ServiceHealth | undefined = health.data?.services[0];
  const lines = useMemo(() => {
    const series = service?.series ?? [];
    return {
      rate: [{ label: 'requests/s', points: series.map(([time, perSecond]) => [time, perSecond] as [number, number]) }],
      errors: [{ label: 'error rate %', points: series.map(([time, , errorRate]) => [time, errorRate * 100] as [number, number]) }],
      p95: [{ label: 'p95 ms', points: series.map(([time, , , p95]) => [time, p95] as [number, number]) }],
    };
  }, [service]);
  const filtered = (path: string) => href(path, { ...rangeQuery(place), service: name });
  return (
    <>
      <p class="crumbs"><Link href={href('/', rangeQuery(place))}>Services</Link> /</p>
      <RangePageHead title={name} page={page} />
      <p class="small"><Link href={filtered('/traces')} data-testid="service-traces">Traces</Link> · <Link href={filtered('/logs')} data-testid="service-logs">Logs</Link> · <Link href={href('/deploys', { ...rangeQuery(place), service: name })}>Deploys</Link></p>
      <ErrorNote error={health.error || operations.error} />
      {health.loading && !health.data && <Loading what="Reading the service" />}
      {health.data && !service && <p class="empty">No requests of {name} in this time range.</p>}
      {service && (
        <>
          <p class="summary" data-testid="service-summary">
            {rate(service.perSecond)} requests/s · {percent(service.errorRate)} errors · p50 {formatDuration(service.p50)} · p95 {formatDuration(service.p95)} · p99 {formatDuration(service.p99)}
          </p>
          <div class="chart-grid">
            <section class="card"><h2 class="card-title">Requests per second</h2><TimeChart lines={lines.rate} range={range} deploys={deploys.data?.deploys} unit="/s" height={180} testid="service-rate-chart" /></section>
            <section class="card"><h2 class="card-title">Error rate</h2><TimeChart lines={lines.errors} range={range} deploys={deploys.data?.deploys} unit="%" height={180} testid="service-errors-chart" /></section>
            <section class="card"><h2 class="card-title">p95 latency</h2><TimeChart lines={lines.p95} range={range} deploys={deploys.data?.deploys} unit="ms" height={180} testid="service-p95-chart" /></section>
          </div>
        </>
      )}
      {(operations.data?.operations.length ?? 0) > 0 && (
        <section>
          <h2>Operations</h2>
          <table class="table" data-testid="operations-table">
            <thead><tr><th>Operation</th><th class="num">Requests/s</th><th class="num">Error rate</th><th class="num">p50</th><th class="num">p95</th><th class="num">p99</th><th class="num">Requests</th></tr></thead>
            <tbody>
              {operations.data!.operations.map((operation) => (
                <tr key={operation.name} data-testid="operation-row">
                  <td><Link href={href('/traces', { ...rangeQuery(place), service: name, op: operation.name })}>{operation.name}</Link></td>
                  <td class="num">{rate(operation.perSecond)}</td>
                  <td class={operation.errorRate >= 0.05 ? 'num bad' : 'num'}>{percent(operation.errorRate)}</td>
                  <td class="num">{formatDuration(operation.p50)}</td>
                  <td class="num">{formatDuration(operation.p95)}</td>
                  <td class="num">{formatDuration(operation.p99)}</td>
                  <td class="num">{operation.requests.toLocaleString('en-US')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
    </>
  );
}
