/**
 * Logs: OTLP log records and agent logs in one table, newest first, filtered by the URL (time
 * range, service, lowest severity, text, attributes). "Load more" follows the answer's cursor;
 * live tail asks every 2 s for what arrived since the newest row shown. Above the table, the
 * volume of what matches by severity (dragging across it narrows the range); beside it, facets:
 * the most frequent services, severities and attribute values, each a link that adds the filter.
 */
import type { JSX } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { FacetValue, LogEntry, LogQuery, LogSummary } from '../../api.ts';
import { api, problem } from '../api.ts';
import { AttributeFilters, ErrorNote, KeyValues, Loading, Onboarding, ServiceSelect, parseAttribute } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { Link, href, navigate, withQuery, type Place } from '../router.tsx';
import { VolumeChart } from '../log-volume.tsx';
import { SEVERITIES, severityName } from '../severity.ts';
import { RangePageHead, rangeQuery, useTimeRange } from '../time-range.tsx';
import { formatClock, formatDay, formatDateTime, formatStamp } from '../time.ts';

const PAGE = 100;
const TAIL_EVERY_MS = 2000;
/** Live tail keeps this many rows; older ones drop off the bottom. */
const TAIL_KEEP = 2000;

function severityClass(number: number): string {
  return number >= 17 ? 'sev sev-error' : number >= 13 ? 'sev sev-warn' : number >= 9 ? 'sev sev-info' : 'sev sev-debug';
}

/** What tells two rows apart when pages or tail answers overlap. */
function entryKey(entry: LogEntry): string {
  return `${entry.kind}|${entry.timeNs}|${entry.spanId}|${entry.service}|${entry.body}`;
}

export function hasTrace(traceId: string): boolean {
  return /[1-9a-f]/i.test(traceId);
}

/** `text` with each case-insensitive occurrence of `match` marked, as the search found it. */
export function Highlighted({ text, match }: { text: string; match: string }) {
  if (!match) return <>{text}</>;
  const parts: Array<string | JSX.Element> = [];
  const lower = text.toLowerCase();
  const wanted = match.toLowerCase();
  let at = 0;
  for (let found = lower.indexOf(wanted); found !== -1 && parts.length < 200; found = lower.indexOf(wanted, at)) {
    if (found > at) parts.push(text.slice(at, found));
    parts.push(<mark key={found}>{text.slice(found, found + match.length)}</mark>);
    at = found + match.length;
  }
  parts.push(text.slice(at));
  return <>{parts}</>;
}

function LogDetail({ entry, onClose }: { entry: LogEntry; onClose: () => void }) {
  return (
    <aside class="detail" data-testid="log-detail" aria-label="Log record">
      <div class="detail-head">
        <h2>Log record</h2>
        <button type="button" class="small-button" onClick={onClose} data-testid="log-detail-close">Close</button>
      </div>
      <pre class="log-body">{entry.body}</pre>
      {hasTrace(entry.traceId) && <p><Link href={`/traces/${entry.traceId}`} data-testid="log-view-trace">View trace →</Link></p>}
      <dl class="fields">
        <dt>Time</dt><dd>{formatDay(entry.time)} {formatClock(entry.time, true)} <span class="muted small">({entry.timeNs} ns)</span></dd>
        <dt>Severity</dt><dd>{severityName(entry)} ({entry.severityNumber})</dd>
        <dt>Service</dt><dd>{entry.service || '–'}</dd>
        <dt>From</dt><dd>{entry.kind === 'otlp' ? 'OTLP' : 'agent'} · source <code>{entry.sourceId}</code></dd>
        {hasTrace(entry.traceId) && <><dt>Trace</dt><dd><code>{entry.traceId}</code></dd><dt>Span</dt><dd><code>{entry.spanId}</code></dd></>}
      </dl>
      <h3>Attributes</h3>
      <KeyValues values={entry.attributes} testid="log-attributes" />
      <h3>Resource</h3>
      <KeyValues values={entry.resource} testid="log-resource" />
    </aside>
  );
}

/** One facet: its most frequent values with their counts, each a link to the page filtered by it. */
function FacetGroup({ title, values, link, current }: { title: string; values: FacetValue[]; link: (value: string) => string | undefined; current?: (value: string) => boolean }) {
  return (
    <section class="facet" aria-label={title}>
      <h3 title={title}>{title}</h3>
      <ul>
        {values.map(({ value, count }) => {
          const to = link(value);
          const label = <><span class="facet-value">{value || '(none)'}</span><span class="facet-count">{count.toLocaleString()}</span></>;
          return (
            <li key={value}>
              {to ? <Link href={to} aria-current={current?.(value) ? 'true' : undefined} data-testid="facet-value">{label}</Link> : <span class="facet-static">{label}</span>}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

function LogFacets({ summary, service, attrs }: { summary: LogSummary; service: string; attrs: string[] }) {
  const floors = new Map(SEVERITIES.map(([number, name]) => [name, number]));
  return (
    <nav class="facets" aria-label="Facets" data-testid="log-facets">
      <FacetGroup title="Service" values={summary.facets.services} link={(value) => withQuery({ service: value })} current={(value) => value === service} />
      <FacetGroup
        title="Severity"
        values={summary.facets.severities}
        link={(band) => (floors.has(band) ? withQuery({ sev: String(floors.get(band)) }) : undefined)}
      />
      {summary.facets.attributes.map(({ key, values }) => (
        <FacetGroup
          key={key}
          title={key}
          values={values}
          link={(value) => withQuery({ attr: [...attrs.filter((attr) => !attr.startsWith(`${key}=`)), `${key}=${value}`] })}
          current={(value) => attrs.includes(`${key}=${value}`)}
        />
      ))}
    </nav>
  );
}

export function LogsPage({ place }: { place: Place }) {
  useTitle('Logs');
  const page = useTimeRange(place, '1h');
  const { range } = page;
  const service = place.query.get('service') ?? '';
  const minSeverity = Number(place.query.get('sev')) || undefined;
  const text = place.query.get('q') ?? '';
  const trace = place.query.get('trace') ?? '';
  const attrs = place.query.getAll('attr');
  const query: LogQuery = useMemo(() => ({
    ...range,
    services: service ? [service] : undefined,
    minSeverity,
    text: text || undefined,
    traceId: trace || undefined,
    attributes: attrs.map(parseAttribute).filter((one) => one !== undefined),
    limit: PAGE,
  }), [range, service, minSeverity, text, trace, attrs.join('\n')]);
  const filtered = Boolean(service || minSeverity || text || trace || attrs.length);

  // The form edits a draft; Search puts it in the URL, which runs the query.
  const [draft, setDraft] = useState({ service, sev: String(minSeverity ?? ''), text, attrs });
  useEffect(() => setDraft({ service, sev: String(minSeverity ?? ''), text, attrs }), [place.query.toString()]);
  const search = (event: Event) => {
    event.preventDefault();
    // A relative range ends now: searching again looks up to this moment, even with the same filters.
    page.refresh();
    navigate(withQuery({ service: draft.service, sev: draft.sev, q: draft.text.trim(), attr: draft.attrs }));
  };

  const services = useLoad((signal) => api.services(range, signal), [range]);
  const first = useLoad((signal) => api.logs(query, signal), [query]);
  const summary = useLoad((signal) => api.logSummary(query, signal), [query]);
  const counted = summary.data && summary.data.total > 0 ? summary.data : undefined;
  const [entries, setEntries] = useState<LogEntry[]>([]);
  const [cursor, setCursor] = useState<string | undefined>();
  const [selected, setSelected] = useState<LogEntry | undefined>();
  const [more, setMore] = useState({ busy: false, error: '' });
  const [live, setLive] = useState(false);
  const seen = useRef(new Set<string>());
  // The tail asks from the newest row shown; a ref, so new rows do not restart its timer.
  const newest = useRef<number | undefined>(undefined);
  newest.current = entries[0]?.time;

  useEffect(() => {
    if (!first.data) return;
    seen.current = new Set(first.data.logs.map(entryKey));
    setEntries(first.data.logs);
    setCursor(first.data.cursor);
  }, [first.data]);

  const loadMore = async () => {
    setMore({ busy: true, error: '' });
    try {
      const next = await api.logs({ ...query, cursor });
      const fresh = next.logs.filter((entry) => !seen.current.has(entryKey(entry)));
      for (const entry of fresh) seen.current.add(entryKey(entry));
      setEntries((old) => [...old, ...fresh]);
      setCursor(next.cursor);
      setMore({ busy: false, error: '' });
    } catch (err) {
      setMore({ busy: false, error: problem(err) });
    }
  };

  // Live tail: one request at a time, from the newest row shown (or the range's start) to now.
  useEffect(() => {
    if (!live) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const controller = new AbortController();
    const tick = async () => {
      try {
        const answer = await api.logs({ ...query, from: newest.current ?? query.from, to: Date.now(), cursor: undefined, limit: 500 }, controller.signal);
        const fresh = answer.logs.filter((entry) => !seen.current.has(entryKey(entry)));
        for (const entry of fresh) seen.current.add(entryKey(entry));
        if (fresh.length > 0) setEntries((old) => [...fresh, ...old].slice(0, TAIL_KEEP));
        setMore((old) => ({ ...old, error: '' }));
      } catch (err) {
        if (!stopped) setMore((old) => ({ ...old, error: `Live tail: ${problem(err)}` }));
      }
      if (!stopped) timer = setTimeout(tick, TAIL_EVERY_MS);
    };
    timer = setTimeout(tick, 0);
    return () => {
      stopped = true;
      controller.abort();
      clearTimeout(timer);
    };
  }, [live, query]);

  useEffect(() => {
    const close = (event: KeyboardEvent) => event.key === 'Escape' && setSelected(undefined);
    document.addEventListener('keydown', close);
    return () => document.removeEventListener('keydown', close);
  }, []);

  return (
    <>
      <RangePageHead title="Logs" page={page} />
      <form class="filters" onSubmit={search} data-testid="logs-filters">
        <label class="field grow">Text
          <input type="search" data-search value={draft.text} placeholder="Search the message (press / to come here)" onInput={(event) => setDraft({ ...draft, text: event.currentTarget.value })} data-testid="logs-text" />
        </label>
        <ServiceSelect value={draft.service} services={services.data?.services ?? []} current={service} onChange={(next) => setDraft({ ...draft, service: next })} testid="logs-service" />
        <label class="field">Severity at least
          <select value={draft.sev} onChange={(event) => setDraft({ ...draft, sev: event.currentTarget.value })} data-testid="logs-severity">
            <option value="">Any</option>
            {SEVERITIES.slice(1).map(([number, name]) => <option key={number} value={String(number)}>{name}</option>)}
          </select>
        </label>
        <AttributeFilters value={draft.attrs} onChange={(next) => setDraft({ ...draft, attrs: next })} />
        {trace && (
          <span class="chip" data-testid="logs-trace-filter">
            Trace <code>{trace.slice(0, 8)}…</code>
            <Link href={withQuery({ trace: undefined })} aria-label="Show the logs of every trace" class="chip-remove">×</Link>
          </span>
        )}
        <div class="filter-actions">
          <button type="submit" class="primary" data-testid="logs-search">Search</button>
          <button type="button" class={live ? 'toggle on' : 'toggle'} aria-pressed={live} onClick={() => setLive(!live)} data-testid="logs-live">
            {live ? '● Live' : 'Live tail'}
          </button>
        </div>
      </form>
      <ErrorNote error={first.error || more.error} />
      {first.loading && !first.data && <Loading what="Loading logs" />}
      {first.data && first.data.logs.length === 0 && entries.length === 0 && !filtered && !live && <Onboarding signal="logs" />}
      {first.data && first.data.logs.length === 0 && entries.length === 0 && (filtered || live) && (
        <section class="empty" data-testid="logs-no-match">
          <p>{live ? 'Waiting for new logs…' : 'No logs match these filters in this time range.'}</p>
          {filtered && <Link href={href('/logs', rangeQuery(place))}>Clear the filters</Link>}
        </section>
      )}
      {counted && (
        <section class="card volume-card">
          <h2 class="card-title">{counted.total.toLocaleString()} {counted.total === 1 ? 'entry' : 'entries'} <span class="muted small">· drag across the chart to narrow the range</span></h2>
          <VolumeChart summary={counted} range={range} />
        </section>
      )}
      {entries.length > 0 && (
        <div class={counted ? 'logs-layout' : ''}>
          {counted && <LogFacets summary={counted} service={service} attrs={attrs} />}
          <div class={selected ? 'split' : ''}>
            <div class="table-wrap">
              <table class="table logs" data-testid="logs-table">
                <thead><tr><th>Time</th><th>Level</th><th>Service</th><th>Message</th></tr></thead>
                <tbody>
                  {entries.map((entry) => {
                    const key = entryKey(entry);
                    return (
                      <tr key={key} class={selected && entryKey(selected) === key ? 'selected' : ''} onClick={() => setSelected(entry)} data-testid="log-row">
                        <td class="nowrap"><button type="button" class="link-button" title={formatDateTime(entry.time)} onClick={(event) => { event.stopPropagation(); setSelected(entry); }}>{formatStamp(entry.time)}</button></td>
                        <td><span class={severityClass(entry.severityNumber)}>{severityName(entry)}</span></td>
                        <td class="nowrap">{entry.service}{entry.kind === 'agent' && <span class="badge" title="From the Sluice agent">agent</span>}</td>
                        <td class="message"><Highlighted text={entry.body} match={text} /></td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
              {cursor && !live && (
                <button type="button" class="load-more" onClick={loadMore} disabled={more.busy} data-testid="logs-load-more">{more.busy ? 'Loading…' : 'Load more'}</button>
              )}
            </div>
            {selected && <LogDetail entry={selected} onClose={() => setSelected(undefined)} />}
          </div>
        </div>
      )}
    </>
  );
}
