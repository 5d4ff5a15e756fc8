/**
 * The trace page's layout: spans under their parents in start order, offsets exact to the
 * nanosecond (epoch nanoseconds do not fit a double), orphans and parent loops shown rather than
 * lost, folded subtrees hidden.
 */
import { describe, expect, it } from 'vitest';
import type { SpanView } from '../api.ts';
import { layoutWaterfall } from './waterfall.ts';

const T0 = 1_767_607_200_123_456_789n;

function span(spanId: string, parentSpanId: string, startOffsetNs: bigint, durationNs: bigint): SpanView {
  return {
    traceId: 't', spanId, parentSpanId, name: spanId, kind: 'Internal', service: 'svc', startNs: String(T0 + startOffsetNs),
    durationNs: String(durationNs), statusCode: 'Unset', statusMessage: '', attributes: {}, resource: {}, scope: '', events: [], links: [],
  };
}

const shape = (spans: SpanView[], folded?: Set<string>) =>
  layoutWaterfall(spans, folded).rows.map((row) => `${'  '.repeat(row.depth)}${row.span.spanId}`);

describe('layoutWaterfall', () => {
  // root ─┬─ a ── a1
  //       └─ b        (b starts before a, so it comes first)
  const spans = [
    span('a1', 'a', 3_000n, 1_000n),
    span('a', 'root', 2_000n, 5_000n),
    span('root', '', 0n, 10_000_000n),
    span('b', 'root', 1_500n, 500n),
  ];

  it('puts each span under its parent, children by start time, depth first', () => {
    expect(shape(spans)).toEqual(['root', '  b', '  a', '    a1']);
  });

  it('measures offsets and durations from exact nanoseconds', () => {
    const { rows, totalMs, startNs } = layoutWaterfall(spans);
    expect(startNs).toBe(T0);
    expect(totalMs).toBe(10);
    const b = rows.find((row) => row.span.spanId === 'b')!;
    // 1,500 ns after a start of ~1.7e18 ns: a double holding the epoch value could not tell them apart.
    expect(b.offsetMs).toBe(0.0015);
    expect(b.durationMs).toBe(0.0005);
    expect(rows.find((row) => row.span.spanId === 'root')!.children).toBe(2);
  });

  it('shows a span whose parent is missing as a root of its own', () => {
    const withOrphan = [...spans, span('late', 'not-here', 500n, 10n)];
    expect(shape(withOrphan)).toEqual(['root', '  b', '  a', '    a1', 'late']);
  });

  it('hides what is under a folded span and keeps the span with its child count', () => {
    const { rows } = layoutWaterfall(spans, new Set(['a']));
    expect(rows.map((row) => row.span.spanId)).toEqual(['root', 'b', 'a']);
    expect(rows.find((row) => row.span.spanId === 'a')!.children).toBe(1);
  });

  it('places every span of a parent loop once', () => {
    const loop = [span('x', 'y', 0n, 10n), span('y', 'x', 5n, 10n), span('self', 'self', 1n, 1n)];
    expect(shape(loop)).toEqual(['self', 'x', '  y']);
  });

  it('lays out an empty trace as nothing', () => {
    expect(layoutWaterfall([])).toEqual({ rows: [], totalMs: 0, startNs: 0n });
  });
});
