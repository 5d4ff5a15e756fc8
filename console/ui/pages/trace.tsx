/**
 * One trace as a waterfall: a row per span, indented under its parent, its bar offset by its
 * start and as wide as its duration. Selecting a span (its id goes in the URL, `?span=`) opens its
 * attributes, resource, events and links beside the waterfall.
 */
import { useMemo, useState } from 'preact/hooks';
import type { SpanView } from '../../api.ts';
import { ApiFailure, api } from '../api.ts';
import { PALETTE } from '../chart.tsx';
import { ErrorNote, KeyValues, Loading } from '../components.tsx';
import { useLoad, useTitle } from '../hooks.ts';
import { Link, href, navigate, withQuery, type Place } from '../router.tsx';
import { formatDateTime, formatDuration } from '../time.ts';
import { layoutWaterfall, nanoseconds } from '../waterfall.ts';

/** A colour per service, in order of first appearance: up to ten services of a trace are told apart. */
function serviceColours(spans: SpanView[]): (service: string) => string {
  const colours = new Map<string, string>();
  for (const span of spans) if (!colours.has(span.service)) colours.set(span.service, PALETTE[colours.size % PALETTE.length]!);
  return (service) => colours.get(service) ?? PALETTE[0]!;
}

/** "1 span", "3 spans". */
const counted = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;

/** The logs page filtered to one trace, over its time and a few minutes either side (logs are written a little after a span). */
const TRACE_LOG_MARGIN_MS = 5 * 60_000;
function traceLogs(traceId: string, startMs: number, durationMs: number): string {
  return href('/logs', { trace: traceId, from: String(startMs - TRACE_LOG_MARGIN_MS), to: String(Math.ceil(startMs + durationMs) + TRACE_LOG_MARGIN_MS) });
}

type LabelPlace = 'after' | 'before' | 'inside';

/** Where a bar's duration goes: after the bar when there is room, else before it, else inside its end. */
function labelAt(left: number, width: number): LabelPlace {
  if (left + width < 86) return 'after';
  return left > 14 ? 'before' : 'inside';
}
function labelStyle(left: number, width: number): Record<string, string> {
  const place = labelAt(left, width);
  if (place === 'after') return { left: `${left + width + 0.5}%` };
  if (place === 'before') return { right: `${100 - left + 0.5}%` };
  return { right: `${100 - left - width + 0.5}%` };
}

function isError(span: SpanView): boolean {
  return span.statusCode.toLowerCase().includes('error');
}

function SpanDetail({ span, traceStartNs, onClose }: { span: SpanView; traceStartNs: bigint; onClose: () => void }) {
  const spanStart = nanoseconds(span.startNs);
  return (
    <aside class="detail" data-testid="span-detail" aria-label="Span">
      <div class="detail-head">
        <h2>{span.name}</h2>
        <button type="button" class="small-button" onClick={onClose} data-testid="span-detail-close">Close</button>
      </div>
      <dl class="fields">
        <dt>Service</dt><dd>{span.service}</dd>
        <dt>Kind</dt><dd>{span.kind || '–'}</dd>
        <dt>Status</dt><dd class={isError(span) ? 'bad' : ''}>{span.statusCode || 'unset'}{span.statusMessage && `: ${span.statusMessage}`}</dd>
        <dt>Duration</dt><dd>{formatDuration(Number(nanoseconds(span.durationNs)) / 1e6)}</dd>
        <dt>Starts</dt><dd>+{formatDuration(Number(spanStart - traceStartNs) / 1e6)} · {formatDateTime(Number(spanStart / 1_000_000n))}</dd>
        <dt>Span id</dt><dd><code>{span.spanId}</code></dd>
        {span.parentSpanId && <><dt>Parent</dt><dd><code>{span.parentSpanId}</code></dd></>}
        {span.scope && <><dt>Scope</dt><dd>{span.scope}</dd></>}
      </dl>
      <h3>Attributes</h3>
      <KeyValues values={span.attributes} testid="span-attributes" />
      <h3>Resource</h3>
      <KeyValues values={span.resource} testid="span-resource" />
      <h3>Events</h3>
      {span.events.length === 0 ? <p class="muted small">none</p> : (
        <ul class="events" data-testid="span-events">
          {span.events.map((event, i) => (
            <li key={i}>
              <strong>{event.name}</strong> <span class="muted small">+{formatDuration(Number(nanoseconds(event.timeNs) - spanStart) / 1e6)}</span>
              <KeyValues values={event.attributes} empty="" />
            </li>
          ))}
        </ul>
      )}
      <h3>Links</h3>
      {span.links.length === 0 ? <p class="muted small">none</p> : (
        <ul class="events" data-testid="span-links">
          {span.links.map((link, i) => (
            <li key={i}>
              <Link href={`/traces/${link.traceId}?span=${encodeURIComponent(link.spanId)}`}><code>{link.traceId}</code></Link> span <code>{link.spanId}</code>
              <KeyValues values={link.attributes} empty="" />
            </li>
          ))}
        </ul>
      )}
    </aside>
  );
}

export function TracePage({ place, params }: { place: Place; params: Record<string, string> }) {
  const traceId = params.traceId!;
  useTitle(`Trace ${traceId.slice(0, 8)}`);
  // null: the server has no such trace (404), which is an answer to show, not an error.
  const trace = useLoad((signal) => api.trace(traceId, signal).catch((err: unknown) => {
    if (err instanceof ApiFailure && err.status === 404) return null;
    throw err;
  }), [traceId]);
  const [folded, setFolded] = useState<ReadonlySet<string>>(new Set());
  const spans = trace.data?.spans ?? [];
  const waterfall = useMemo(() => layoutWaterfall(spans, folded), [trace.data, folded]);
  const selectedId = place.query.get('span');
  const selected = spans.find((span) => span.spanId === selectedId);
  const select = (spanId: string | undefined) => navigate(withQuery({ span: spanId }), { replace: true });
  const fold = (spanId: string) => {
    const next = new Set(folded);
    if (!next.delete(spanId)) next.add(spanId);
    setFolded(next);
  };

  const root = waterfall.rows[0]?.span;
  const total = Math.max(waterfall.totalMs, 0.001);
  const services = [...new Set(spans.map((span) => span.service))];
  const serviceColour = useMemo(() => serviceColours(waterfall.rows.map((row) => row.span)), [trace.data]);
  const ticks = [0, 0.25, 0.5, 0.75, 1];

  return (
    <>
      <div class="page-head">
        <div>
          <p class="crumbs"><Link href="/traces">Traces</Link> /</p>
          <h1>{root ? <><span class="muted">{root.service}</span> {root.name}</> : 'Trace'}</h1>
        </div>
      </div>
      <ErrorNote error={trace.error} />
      {trace.data === null && (
        <section class="empty" data-testid="trace-not-found">
          <p>No trace <code>{traceId}</code> in storage: it may have expired, or its spans have not arrived yet.</p>
        </section>
      )}
      {trace.loading && !trace.data && <Loading what="Loading the trace" />}
      {trace.data && (
        <>
          <p class="summary" data-testid="trace-summary">
            <span>{formatDuration(waterfall.totalMs)}</span>
            <span>{counted(spans.length, 'span')}</span>
            <span>{counted(spans.filter(isError).length, 'error')}</span>
            <span>{counted(services.length, 'service')}</span>
            {root && <span>{formatDateTime(Number(waterfall.startNs / 1_000_000n))}</span>}
            <code class="small">{traceId}</code>
            <Link href={traceLogs(traceId, Number(waterfall.startNs / 1_000_000n), waterfall.totalMs)} data-testid="trace-logs">Logs of this trace</Link>
          </p>
          <div class={selected ? 'split' : ''}>
            <div class="waterfall" data-testid="waterfall" role="tree" aria-label="Spans">
              <div class="wf-axis" aria-hidden="true">
                <div class="wf-name" />
                <div class="wf-track">
                  {ticks.map((tick) => <span key={tick} class="wf-tick" style={{ left: `${tick * 100}%` }}>{formatDuration(total * tick)}</span>)}
                </div>
              </div>
              {waterfall.rows.map((row) => {
                const { span } = row;
                const left = (row.offsetMs / total) * 100;
                const width = Math.max((row.durationMs / total) * 100, 0.3);
                return (
                  <div key={span.spanId} class={`wf-row${span.spanId === selectedId ? ' selected' : ''}${isError(span) ? ' error' : ''}`} role="treeitem" aria-level={row.depth + 1} aria-selected={span.spanId === selectedId} data-testid="waterfall-row" onClick={() => select(span.spanId)}>
                    <div class="wf-name" style={{ paddingLeft: `${row.depth * 14 + 4}px` }}>
                      {row.children > 0 ? (
                        <button type="button" class="wf-fold" aria-expanded={!folded.has(span.spanId)} aria-label={folded.has(span.spanId) ? 'Show children' : 'Hide children'} onClick={(event) => { event.stopPropagation(); fold(span.spanId); }}>
                          {folded.has(span.spanId) ? '▸' : '▾'}
                        </button>
                      ) : <span class="wf-fold-space" />}
                      <button type="button" class="link-button wf-label" onClick={(event) => { event.stopPropagation(); select(span.spanId); }} data-testid="waterfall-span">
                        <span class="wf-swatch" style={{ background: serviceColour(span.service) }} aria-hidden="true" /><span class="wf-service">{span.service}</span> {span.name}
                      </button>
                    </div>
                    <div class="wf-track">
                      <span class="wf-bar" style={{ left: `${left}%`, width: `${width}%`, background: isError(span) ? '#dc2626' : serviceColour(span.service) }} />
                      <span class={`wf-duration${labelAt(left, width) === 'inside' ? ' inside' : ''}`} style={labelStyle(left, width)}>{formatDuration(row.durationMs)}</span>
                    </div>
                  </div>
                );
              })}
            </div>
            {selected && <SpanDetail span={selected} traceStartNs={waterfall.startNs} onClose={() => select(undefined)} />}
          </div>
        </>
      )}
    </>
  );
}
