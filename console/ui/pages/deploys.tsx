/**
 * Deploys: the deploy markers of the range, newest first, each with its verdict — did the
 * service's requests get slower or fail more after it? (console/deploy-verdict.ts: the window
 * after against the window before, tested for chance and for size.) Each row says why, with the
 * figures either side, and links to the service's traces around the deploy.
 */
import { useMemo } from 'preact/hooks';
import type { DeployVerdictView, Verdict, VerdictWindow } from '../../api.ts';
import { api } from '../api.ts';
import { ErrorNote, Loading, ServiceSelect } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { Link, href, navigate, withQuery, type Place } from '../router.tsx';
import { RangePageHead, useTimeRange } from '../time-range.tsx';
import { formatDateTime, formatDuration } from '../time.ts';

const VERDICT_LABEL: Record<Verdict, string> = {
  regression: 'Regression',
  improvement: 'Improvement',
  'no change': 'No change',
  'not enough data': 'Not enough data',
};

export function VerdictBadge({ verdict }: { verdict: Verdict }) {
  return <span class={`verdict verdict-${verdict.replaceAll(' ', '-')}`} data-testid="verdict">{VERDICT_LABEL[verdict]}</span>;
}

const percent = (rate: number) => `${(rate * 100).toFixed(rate > 0 && rate < 0.1 ? 1 : 0)} %`;

/** "2.0 % → 12.3 %", "88 ms → 410 ms": a figure before and after. */
function Change({ before, after, format, worse }: { before: number; after: number; format: (n: number) => string; worse: boolean }) {
  return <span class={worse ? 'bad' : undefined}>{format(before)} → {format(after)}</span>;
}

function requests(window: VerdictWindow): string {
  return `${window.requests.toLocaleString('en-US')} in ${formatDuration(window.to - window.from)}`;
}

export function DeploysPage({ place }: { place: Place }) {
  useTitle('Deploys');
  const page = useTimeRange(place, '24h');
  const { range } = page;
  const service = place.query.get('service') ?? '';
  const query = useMemo(() => ({ ...range, ...(service ? { services: [service] } : {}) }), [range, service]);
  const services = useLoad((signal) => api.services(range, signal), [range]);
  const verdicts = useLoad((signal) => api.deployVerdicts(query, signal), [query]);
  const list: DeployVerdictView[] = verdicts.data?.verdicts ?? [];
  return (
    <>
      <RangePageHead title="Deploys" page={page} />
      <form class="filters" onSubmit={(event) => event.preventDefault()}>
        <ServiceSelect value={service} services={services.data?.services ?? []} current={service} onChange={(next) => navigate(withQuery({ service: next }))} testid="deploys-service" />
      </form>
      <p class="muted small">
        Each deploy's service, its server and consumer spans, in the window after the deploy against the window before it (up to 30 minutes
        each, cut at the service's other deploys): a regression is an error rate or latency that is worse beyond chance (p &lt; 0.01) and by
        enough to matter; fewer than 30 requests a side is not enough data.
      </p>
      <ErrorNote error={verdicts.error} />
      {verdicts.loading && !verdicts.data && <Loading what="Judging deploys" />}
      {verdicts.data && list.length === 0 && (
        <section class="empty" data-testid="deploys-empty">
          <p>No deploys in this time range. CI records one with <code>POST /api/v1/webhooks/deploy</code> (README: Agent API).</p>
        </section>
      )}
      {list.length > 0 && (
        <table class="table" data-testid="deploys-table">
          <thead>
            <tr><th>Deployed</th><th>Service</th><th>Version</th><th>Verdict</th><th>Error rate</th><th>p95</th><th>Requests (before / after)</th><th><span class="visually-hidden">Traces</span></th></tr>
          </thead>
          <tbody>
            {list.map((judged) => {
              const { marker, before, after } = judged;
              const enough = judged.verdict !== 'not enough data';
              const traces = href('/traces', { from: String(before.from), to: String(Math.max(after.to, marker.time + 60_000)), service: marker.service });
              return (
                <tr key={`${marker.service}/${marker.time}`} data-testid="deploy-row" data-service={marker.service}>
                  <td class="nowrap">{formatDateTime(marker.time)}</td>
                  <td><strong>{marker.service}</strong></td>
                  <td title={[marker.commit && `commit ${marker.commit}`, marker.deployedBy && `by ${marker.deployedBy}`, marker.description].filter(Boolean).join(' · ')}>{marker.version}</td>
                  <td><VerdictBadge verdict={judged.verdict} /><div class="small muted" data-testid="verdict-reason">{judged.reason}</div></td>
                  <td class="nowrap">{enough ? <Change before={before.errorRate} after={after.errorRate} format={percent} worse={judged.errors?.change === 'worse'} /> : '—'}</td>
                  <td class="nowrap">{enough ? <Change before={before.p95} after={after.p95} format={formatDuration} worse={judged.latency?.change === 'worse'} /> : '—'}</td>
                  <td class="small">{requests(before)} / {requests(after)}</td>
                  <td><Link href={traces} data-testid="deploy-traces">Traces</Link></td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </>
  );
}
