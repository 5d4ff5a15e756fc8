/**
 * The time range of a page: read from the URL, resolved against the clock when the URL changes or
 * the user presses Refresh, and changed by the picker (a new history entry, so Back undoes it).
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { TimeRange } from '../api.ts';
import { navigate, withQuery, type Place } from './router.tsx';
import {
  PRESETS, TIME_ZONE, formatDateTime, fromLocalInput, rangeFromQuery, rangeParams, resolveRange, toLocalInput, type RangeChoice,
} from './time.ts';

export interface PageRange {
  choice: RangeChoice;
  range: TimeRange;
  /** Resolves a relative range again ("last hour" from now). */
  refresh: () => void;
}

export function useTimeRange(place: Place, fallback = '1h'): PageRange {
  const choice = rangeFromQuery(place.query, fallback);
  const key = choice.kind === 'relative' ? choice.preset.key : `${choice.from}-${choice.to}`;
  const [tick, setTick] = useState(0);
  const range = useMemo(() => resolveRange(choice, Date.now()), [key, tick]);
  return { choice, range, refresh: () => setTick((n) => n + 1) };
}

/**
 * Moves a relative range ("last hour") forward every `ms` while the page is open, so a page
 * meant to be watched keeps up with what arrives; a fixed range stays put.
 */
export function useFollowNow(page: PageRange, ms: number): void {
  const relative = page.choice.kind === 'relative';
  useEffect(() => {
    if (!relative) return;
    const timer = setInterval(page.refresh, ms);
    return () => clearInterval(timer);
  }, [relative, ms]);
}

/** Makes `range` the page's range, as a fixed one (a chart dragged across): a new history entry, so Back undoes it. */
export function zoomTo(range: TimeRange): void {
  navigate(withQuery(rangeParams({ kind: 'absolute', from: range.from, to: range.to })));
}

/** Query parameters that carry the current time range to another page (the nav links keep it). */
export function rangeQuery(place: Place): Record<string, string | undefined> {
  return { range: place.query.get('range') ?? undefined, from: place.query.get('from') ?? undefined, to: place.query.get('to') ?? undefined };
}

/** A page's title and its time range picker. */
export function RangePageHead({ title, page }: { title: string; page: PageRange }) {
  return (
    <div class="page-head">
      <h1>{title}</h1>
      <TimeRangePicker page={page} />
    </div>
  );
}

const CUSTOM = 'custom';

export function TimeRangePicker({ page }: { page: PageRange }) {
  const { choice, range } = page;
  const [custom, setCustom] = useState(choice.kind === 'absolute');
  const [from, setFrom] = useState(toLocalInput(range.from));
  const [to, setTo] = useState(toLocalInput(range.to));
  const [error, setError] = useState('');
  // Back and Forward change the URL under the picker: it shows what the URL now says.
  const key = choice.kind === 'relative' ? choice.preset.key : `${choice.from}-${choice.to}`;
  useEffect(() => {
    setCustom(choice.kind === 'absolute');
    setFrom(toLocalInput(range.from));
    setTo(toLocalInput(range.to));
  }, [key]);

  const pick = (value: string) => {
    if (value === CUSTOM) {
      setFrom(toLocalInput(range.from));
      setTo(toLocalInput(range.to));
      setCustom(true);
      return;
    }
    setCustom(false);
    const preset = PRESETS.find((one) => one.key === value)!;
    navigate(withQuery(rangeParams({ kind: 'relative', preset })));
  };
  const apply = (event: Event) => {
    event.preventDefault();
    const start = fromLocalInput(from);
    const end = fromLocalInput(to);
    if (!Number.isFinite(start) || !Number.isFinite(end) || start >= end) {
      setError('The start must be before the end.');
      return;
    }
    setError('');
    navigate(withQuery(rangeParams({ kind: 'absolute', from: start, to: end })));
  };

  return (
    <div class="time-range" data-testid="time-range">
      <label class="inline">
        <span class="sr-only">Time range</span>
        <select data-testid="time-range-select" value={custom ? CUSTOM : choice.kind === 'relative' ? choice.preset.key : CUSTOM} onChange={(event) => pick(event.currentTarget.value)}>
          {PRESETS.map((preset) => <option key={preset.key} value={preset.key}>{preset.label}</option>)}
          <option value={CUSTOM}>Custom range…</option>
        </select>
      </label>
      {custom && (
        <form class="time-range-custom" onSubmit={apply}>
          <label class="inline">From <input type="datetime-local" value={from} onInput={(event) => setFrom(event.currentTarget.value)} data-testid="time-range-from" required /></label>
          <label class="inline">to <input type="datetime-local" value={to} onInput={(event) => setTo(event.currentTarget.value)} data-testid="time-range-to" required /></label>
          <button type="submit">Apply</button>
          {error && <span class="error-text" role="alert">{error}</span>}
        </form>
      )}
      <button type="button" class="icon-button" onClick={page.refresh} title={`Refresh (${formatDateTime(range.from)} – ${formatDateTime(range.to)})`} data-testid="time-range-refresh">
        ↻<span class="sr-only">Refresh</span>
      </button>
      <span class="muted small" title="Times are shown in this time zone">{TIME_ZONE}</span>
    </div>
  );
}
