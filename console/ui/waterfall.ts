/**
 * A trace as waterfall rows: each span under its parent (children by start time), with its offset
 * from the trace's start and its duration in milliseconds. Span times are exact nanoseconds as
 * strings, so they are subtracted as BigInt before they become (rounded) milliseconds.
 */
import type { SpanView } from '../api.ts';

export interface WaterfallRow {
  span: SpanView;
  depth: number;
  offsetMs: number;
  durationMs: number;
  /** Spans under this one (shown or folded). */
  children: number;
}

export interface Waterfall {
  rows: WaterfallRow[];
  /** From the earliest start to the latest end. */
  totalMs: number;
  startNs: bigint;
}

/** A nanosecond column's text as a BigInt; 0 for text that is not an integer. */
export function nanoseconds(text: string): bigint {
  try {
    return BigInt(text);
  } catch {
    return 0n;
  }
}

/**
 * Lays out `spans`. Spans whose parent is not in the trace (not yet arrived, or sampled out) start
 * trees of their own; a span in `folded` is shown, its subtree is not. A parent loop cannot hang
 * the page: a span is placed once.
 */
export function layoutWaterfall(spans: SpanView[], folded: ReadonlySet<string> = new Set()): Waterfall {
  if (spans.length === 0) return { rows: [], totalMs: 0, startNs: 0n };
  const starts = new Map(spans.map((span) => [span, nanoseconds(span.startNs)]));
  let first = starts.get(spans[0]!)!;
  let last = first;
  for (const span of spans) {
    const start = starts.get(span)!;
    const end = start + nanoseconds(span.durationNs);
    if (start < first) first = start;
    if (end > last) last = end;
  }
  const byStart = (a: SpanView, b: SpanView) => {
    const diff = starts.get(a)! - starts.get(b)!;
    return diff < 0n ? -1 : diff > 0n ? 1 : a.name.localeCompare(b.name);
  };

  const ids = new Set(spans.map((span) => span.spanId));
  const children = new Map<string, SpanView[]>();
  const roots: SpanView[] = [];
  for (const span of spans) {
    if (span.parentSpanId && span.parentSpanId !== span.spanId && ids.has(span.parentSpanId)) {
      children.set(span.parentSpanId, [...(children.get(span.parentSpanId) ?? []), span]);
    } else roots.push(span);
  }
  for (const list of children.values()) list.sort(byStart);
  roots.sort(byStart);

  const rows: WaterfallRow[] = [];
  const placed = new Set<SpanView>();
  const toMs = (ns: bigint) => Number(ns) / 1e6;
  // Depth first without recursion: a trace may be thousands of spans deep.
  const stack: Array<[SpanView, number]> = roots.reverse().map((span) => [span, 0]);
  const visit = () => {
    while (stack.length > 0) {
      const [span, depth] = stack.pop()!;
      if (placed.has(span)) continue;
      placed.add(span);
      const below = children.get(span.spanId) ?? [];
      rows.push({ span, depth, offsetMs: toMs(starts.get(span)! - first), durationMs: toMs(nanoseconds(span.durationNs)), children: below.length });
      if (!folded.has(span.spanId)) for (let i = below.length - 1; i >= 0; i--) stack.push([below[i]!, depth + 1]);
    }
  };
  visit();
  // Spans only reachable through a parent loop: shown at the top level rather than lost.
  const parents = new Map(spans.map((span) => [span.spanId, span.parentSpanId]));
  for (const span of [...spans].sort(byStart)) {
    if (placed.has(span) || isUnderFolded(span, parents, folded)) continue;
    stack.push([span, 0]);
    visit();
  }
  return { rows, totalMs: toMs(last - first), startNs: first };
}

/** Whether a folded span sits above `span` (its subtree is hidden on purpose, not lost). */
function isUnderFolded(span: SpanView, parents: Map<string, string>, folded: ReadonlySet<string>): boolean {
  if (folded.size === 0) return false;
  const seen = new Set<string>();
  let parent = span.parentSpanId;
  while (parent && !seen.has(parent)) {
    if (folded.has(parent)) return true;
    seen.add(parent);
    parent = parents.get(parent) ?? '';
  }
  return false;
}
