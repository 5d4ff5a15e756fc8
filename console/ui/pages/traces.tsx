/**
 * Trace search: service, operation, duration bounds, status and attributes, held in the URL; the
 * answer is a table of traces, each a link to its waterfall.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { TraceQuery } from '../../api.ts';
import { api } from '../api.ts';
import { AttributeFilters, ErrorNote, Loading, Onboarding, ServiceSelect, parseAttribute } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { Link, href, navigate, withQuery, type Place } from '../router.tsx';
import { RangePageHead, rangeQuery, useTimeRange } from '../time-range.tsx';
import { formatDateTime, formatDuration } from '../time.ts';

const STATUSES = ['ok', 'error', 'unset'] as const;

function numberParam(value: string | null): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const number = Number(value);
  return Number.isFinite(number) && number >= 0 ? number : undefined;
}

export function TracesPage({ place }: { place: Place }) {
  useTitle('Traces');
  const page = useTimeRange(place, '1h');
  const { range } = page;
  const q = place.query;
  const service = q.get('service') ?? '';
  const operation = q.get('op') ?? '';
  const minMs = numberParam(q.get('min'));
  const maxMs = numberParam(q.get('max'));
  const status = STATUSES.find((one) => one === q.get('status'));
  const attrs = q.getAll('attr');
  const query: TraceQuery = useMemo(() => ({
    ...range,
    services: service ? [service] : undefined,
    operation: operation || undefined,
    minDurationMs: minMs,
    maxDurationMs: maxMs,
    status,
    attributes: attrs.map(parseAttribute).filter((one) => one !== undefined),
    limit: 100,
  }), [range, service, operation, minMs, maxMs, status, attrs.join('\n')]);
  const filtered = Boolean(service || operation || minMs !== undefined || maxMs !== undefined || status || attrs.length);

  const fromUrl = () => ({ service, operation, min: q.get('min') ?? '', max: q.get('max') ?? '', status: status ?? '', attrs });
  const [draft, setDraft] = useState(fromUrl);
  useEffect(() => setDraft(fromUrl()), [q.toString()]);
  const search = (event: Event) => {
    event.preventDefault();
    // A relative range ends now: searching again looks up to this moment, even with the same filters.
    page.refresh();
    navigate(withQuery({ service: draft.service, op: draft.operation.trim(), min: draft.min, max: draft.max, status: draft.status, attr: draft.attrs }));
  };

  const services = useLoad((signal) => api.services(range, signal), [range]);
  const traces = useLoad((signal) => api.traces(query, signal), [query]);
  const list = traces.data?.traces ?? [];
  const longest = Math.max(1, ...list.map((trace) => trace.durationMs));

  return (
    <>
      <RangePageHead title="Traces" page={page} />
      <form class="filters" onSubmit={search} data-testid="traces-filters">
        <ServiceSelect value={draft.service} services={services.data?.services ?? []} current={service} onChange={(next) => setDraft({ ...draft, service: next })} testid="traces-service" />
        <label class="field grow">Operation
          <input type="search" data-search value={draft.operation} placeholder="Span name, e.g. GET /cart" onInput={(event) => setDraft({ ...draft, operation: event.currentTarget.value })} data-testid="traces-operation" />
        </label>
        <label class="field narrow">Min ms
          <input type="number" min="0" step="any" value={draft.min} onInput={(event) => setDraft({ ...draft, min: event.currentTarget.value })} data-testid="traces-min" />
        </label>
        <label class="field narrow">Max ms
          <input type="number" min="0" step="any" value={draft.max} onInput={(event) => setDraft({ ...draft, max: event.currentTarget.value })} data-testid="traces-max" />
        </label>
        <label class="field">Status
          <select value={draft.status} onChange={(event) => setDraft({ ...draft, status: event.currentTarget.value })} data-testid="traces-status">
            <option value="">Any</option>
            {STATUSES.map((one) => <option key={one} value={one}>{one}</option>)}
          </select>
        </label>
        <AttributeFilters value={draft.attrs} onChange={(next) => setDraft({ ...draft, attrs: next })} />
        <div class="filter-actions">
          <button type="submit" class="primary" data-testid="traces-search">Search</button>
        </div>
      </form>
      <ErrorNote error={traces.error} />
      {traces.loading && !traces.data && <Loading what="Searching traces" />}
      {traces.data && list.length === 0 && !filtered && <Onboarding signal="traces" />}
      {traces.data && list.length === 0 && filtered && (
        <section class="empty" data-testid="traces-no-match">
          <p>No traces match these filters in this time range.</p>
          <Link href={href('/traces', rangeQuery(place))}>Clear the filters</Link>
        </section>
      )}
      {list.length > 0 && (
        <table class="table" data-testid="traces-table">
          <thead><tr><th>Started</th><th>Root</th><th>Duration</th><th class="num">Spans</th><th class="num">Errors</th><th>Services</th></tr></thead>
          <tbody>
            {list.map((trace) => (
              <tr key={trace.traceId} data-testid="trace-row">
                <td class="nowrap">{formatDateTime(trace.start)}</td>
                <td>
                  <Link href={`/traces/${trace.traceId}`} data-testid="trace-link"><strong>{trace.rootService}</strong> {trace.rootName}</Link>
                </td>
                <td class="duration-cell">
                  <span class="duration-bar" style={{ width: `${Math.max(2, (trace.durationMs / longest) * 100)}%` }} />
                  <span>{formatDuration(trace.durationMs)}</span>
                </td>
                <td class="num">{trace.spans}</td>
                <td class={trace.errors > 0 ? 'num bad' : 'num'}>{trace.errors}</td>
                <td class="small">{trace.services.join(', ')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
