/**
 * Time ranges as the URL holds them (`range=1h`, or `from` and `to` in Unix ms) and times as the
 * user reads them: in the browser's time zone and locale, through Intl.
 */
import type { TimeRange } from '../api.ts';

export interface Preset {
  key: string;
  label: string;
  ms: number;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
export const PRESETS: Preset[] = [
  { key: '15m', label: 'Last 15 minutes', ms: 15 * MINUTE },
  { key: '1h', label: 'Last hour', ms: HOUR },
  { key: '6h', label: 'Last 6 hours', ms: 6 * HOUR },
  { key: '24h', label: 'Last 24 hours', ms: 24 * HOUR },
  { key: '7d', label: 'Last 7 days', ms: 7 * 24 * HOUR },
];

/** What the URL asks for: a window ending now, or fixed bounds. */
export type RangeChoice = { kind: 'relative'; preset: Preset } | { kind: 'absolute'; from: number; to: number };

/** The choice in `query`; `fallback` (a preset key) when it names none or a broken one. */
export function rangeFromQuery(query: URLSearchParams, fallback = '1h'): RangeChoice {
  const from = Number(query.get('from'));
  const to = Number(query.get('to'));
  if (query.has('from') && query.has('to') && Number.isFinite(from) && Number.isFinite(to) && from < to) return { kind: 'absolute', from, to };
  const preset = PRESETS.find((one) => one.key === query.get('range')) ?? PRESETS.find((one) => one.key === fallback) ?? PRESETS[1]!;
  return { kind: 'relative', preset };
}

/** The query parameters of a choice (the others set to undefined, so they are removed). */
export function rangeParams(choice: RangeChoice): Record<string, string | undefined> {
  return choice.kind === 'relative'
    ? { range: choice.preset.key, from: undefined, to: undefined }
    : { range: undefined, from: String(Math.round(choice.from)), to: String(Math.round(choice.to)) };
}

export function resolveRange(choice: RangeChoice, now: number): TimeRange {
  return choice.kind === 'relative' ? { from: now - choice.preset.ms, to: now } : { from: choice.from, to: choice.to };
}

export const TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;

const dateTime = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const day = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric' });

/** "Mar 5, 14:03:22" in the user's time zone. */
export function formatDateTime(ms: number): string {
  return dateTime.format(ms);
}

const axisClock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const axisDay = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });

/** A time axis label: the clock within a day or so, the date (and the clock off midnight) beyond. */
export function formatAxisTime(ms: number, spanMs: number): string {
  // Ticks seconds apart (a chart of a few minutes) differ only in their seconds.
  if (spanMs <= 15 * 60_000) return clock.format(ms);
  if (spanMs <= 36 * HOUR) return axisClock.format(ms);
  const date = new Date(ms);
  const midnight = date.getHours() === 0 && date.getMinutes() === 0;
  return midnight ? axisDay.format(ms) : `${axisDay.format(ms)} ${axisClock.format(ms)}`;
}

/** "14:03:22.123" — log lines, where milliseconds tell neighbours apart. */
export function formatClock(ms: number, withMs = false): string {
  const text = clock.format(ms);
  return withMs ? `${text}.${String(Math.floor(ms) % 1000).padStart(3, '0')}` : text;
}

/** A log line's time: the clock with milliseconds, after the date when it is not today. */
export function formatStamp(ms: number, now = Date.now()): string {
  const today = new Date(now).toDateString() === new Date(ms).toDateString();
  return today ? formatClock(ms, true) : `${axisDay.format(ms)} ${formatClock(ms, true)}`;
}

export function formatDay(ms: number): string {
  return day.format(ms);
}

/** 0.4 ms, 12 ms, 1.25 s, 3.5 min. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
  if (ms < MINUTE) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  if (ms < HOUR) return `${(ms / MINUTE).toFixed(1)} min`;
  return `${(ms / HOUR).toFixed(1)} h`;
}

/** "just now", "3 min ago", "2 h ago", "4 days ago". */
export function formatAgo(ms: number, now = Date.now()): string {
  const seconds = Math.max(0, Math.round((now - ms) / 1000));
  if (seconds < 45) return 'just now';
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)} h ago`;
  const days = Math.round(seconds / 86_400);
  return days === 1 ? 'a day ago' : `${days} days ago`;
}

/** The value of an `<input type="datetime-local">` (local time) for `ms`, and back. */
export function toLocalInput(ms: number): string {
  const date = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}
export function fromLocalInput(value: string): number {
  return new Date(value).getTime();
}
