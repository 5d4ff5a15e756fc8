/**
 * Quantiles of explicit-bucket histograms (OTLP Histogram: BucketCounts over ExplicitBounds),
 * interpolated as Prometheus's histogram_quantile does: observations are taken as spread evenly
 * inside their bucket; the first bucket starts at 0 when its upper bound is positive (else its
 * observations are at that bound); observations above the last bound are at the last bound.
 *
 * Series of one group may use different bounds (two SDK versions, a changed view). Their
 * distributions are added as cumulative distribution functions, which are piecewise linear
 * under that assumption: the sum is linear between the union of all bounds, so the quantile is
 * exact (for the assumption) without re-bucketing anything.
 */

/** Observations per bucket: `counts` has one more entry than `bounds` (the last is above the last bound). */
export interface BucketSet {
  bounds: readonly number[];
  counts: readonly number[];
}

/** One bucket as a piece of the cumulative distribution: its mass spread over (lo, hi], or all at hi when lo === hi. */
interface Piece { lo: number; hi: number; count: number }

function pieces({ bounds, counts }: BucketSet): Piece[] {
  const result: Piece[] = [];
  if (bounds.length === 0 || counts.length !== bounds.length + 1) return result;
  for (let i = 0; i < counts.length; i++) {
    const count = counts[i]!;
    if (!(count > 0)) continue;
    if (i === 0) result.push({ lo: bounds[0]! > 0 ? 0 : bounds[0]!, hi: bounds[0]!, count });
    else if (i === bounds.length) result.push({ lo: bounds[i - 1]!, hi: bounds[i - 1]!, count });
    else result.push({ lo: bounds[i - 1]!, hi: bounds[i]!, count });
  }
  return result;
}

/** Observations at or below x; `strict`: below x, plus the spread part up to x (the left limit). */
function cumulative(all: readonly Piece[], x: number, strict: boolean): number {
  let total = 0;
  for (const { lo, hi, count } of all) {
    if (x > hi || (!strict && x === hi)) total += count;
    else if (x > lo) total += (count * (x - lo)) / (hi - lo);
  }
  return total;
}

/**
 * The q-quantile (0 < q < 1) of the observations of all the sets together; null when there are
 * none, or when no set has a finite bound to place them by.
 */
export function histogramQuantile(q: number, sets: readonly BucketSet[]): number | null {
  const all = sets.flatMap(pieces);
  const total = all.reduce((sum, piece) => sum + piece.count, 0);
  if (total === 0) return null;
  const rank = q * total;
  const xs = [...new Set(all.flatMap(({ lo, hi }) => [lo, hi]))].sort((a, b) => a - b);
  let previousX = xs[0]!;
  let previousF = 0;
  for (const x of xs) {
    // Between the previous point and x the distribution is linear; at x it may jump (mass held at x).
    const left = cumulative(all, x, true);
    if (rank <= left && left > previousF) return previousX + ((x - previousX) * (rank - previousF)) / (left - previousF);
    const at = cumulative(all, x, false);
    if (rank <= at) return x;
    previousX = x;
    previousF = at;
  }
  return xs[xs.length - 1]!;
}
