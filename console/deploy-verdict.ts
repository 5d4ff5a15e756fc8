/**
 * Did a deploy make a service worse? Its requests (server and consumer spans) in a window after
 * the deploy against the same window before it, on two signals:
 *
 * - errors: the share of requests that failed, by a one-sided Fisher exact test;
 * - latency: the requests' durations, by a one-sided Mann-Whitney U test (ranks, so a few huge
 *   outliers do not decide it) on a random sample of each window.
 *
 * A difference counts only when it is both unlikely to be chance (p < ALPHA) and large enough to
 * matter (error rate up by at least 1 point and by half; median or p95 up by a fifth), so noise
 * and tiny traffic give "no change" or "not enough data", not a verdict. Fewer than
 * MIN_REQUESTS in either window is not enough data.
 */

/** What one window holds: request and error counts, percentiles, and a sample of durations. */
export interface WindowStats {
  requests: number;
  errors: number;
  /** Milliseconds. */
  p50: number;
  p95: number;
  p99: number;
  /** Durations (ms) of a random sample of the window's requests. */
  sample: number[];
}

export type Verdict = 'regression' | 'improvement' | 'no change' | 'not enough data';

export interface SignalChange {
  /** worse, better, or neither (not significant, or too small to matter). */
  change: 'worse' | 'better' | 'same';
  /** One-sided p-value of the direction seen. */
  p: number;
}

export interface DeployJudgement {
  verdict: Verdict;
  /** Present when there was enough data. */
  errors?: SignalChange;
  latency?: SignalChange;
  /** Why, in a sentence: what the console shows beside the verdict. */
  reason: string;
}

export const MIN_REQUESTS = 30;
export const ALPHA = 0.01;
/** The smallest error-rate rise that matters: this many points, and this factor. */
const MIN_ERROR_RISE = 0.01;
const MIN_ERROR_FACTOR = 1.5;
/** The smallest latency change that matters: median or p95 by this factor. */
const MIN_LATENCY_FACTOR = 1.2;

export function judgeDeploy(before: WindowStats, after: WindowStats): DeployJudgement {
  if (before.requests < MIN_REQUESTS || after.requests < MIN_REQUESTS) {
    return { verdict: 'not enough data', reason: `fewer than ${MIN_REQUESTS} requests in a window (${before.requests} before, ${after.requests} after)` };
  }
  const errors = compareErrorRates(before, after);
  const latency = compareLatency(before, after);
  const worse = [errors.change === 'worse' && 'error rate', latency.change === 'worse' && 'latency'].filter(Boolean);
  const better = [errors.change === 'better' && 'error rate', latency.change === 'better' && 'latency'].filter(Boolean);
  if (worse.length > 0) return { verdict: 'regression', errors, latency, reason: `${worse.join(' and ')} worse after the deploy` };
  if (better.length > 0) return { verdict: 'improvement', errors, latency, reason: `${better.join(' and ')} better after the deploy` };
  return { verdict: 'no change', errors, latency, reason: 'no difference that is both significant and large enough' };
}

/**
 * Fisher's exact test, one-sided in the direction seen (the normal approximation calls too much
 * at the small error counts of small services); which way the rate moved, if it moved enough.
 */
export function compareErrorRates(before: Pick<WindowStats, 'requests' | 'errors'>, after: Pick<WindowStats, 'requests' | 'errors'>): SignalChange {
  const rateBefore = before.errors / before.requests;
  const rateAfter = after.errors / after.requests;
  if (rateBefore === rateAfter) return { change: 'same', p: 1 };
  const worse = rateAfter > rateBefore;
  const p = hypergeometricTail(before.requests + after.requests, before.errors + after.errors, after.requests, after.errors, worse);
  const [low, high] = worse ? [rateBefore, rateAfter] : [rateAfter, rateBefore];
  const matters = high - low >= MIN_ERROR_RISE && high >= low * MIN_ERROR_FACTOR;
  if (p >= ALPHA || !matters) return { change: 'same', p };
  return { change: worse ? 'worse' : 'better', p };
}

/**
 * P(X >= k) (`upper`) or P(X <= k) for X the errors among `draws` of `total` requests of which
 * `errors` failed (hypergeometric), summed from the observed count outwards in log space.
 */
function hypergeometricTail(total: number, errors: number, draws: number, k: number, upper: boolean): number {
  const lowest = Math.max(0, draws - (total - errors));
  const highest = Math.min(errors, draws);
  const logChoose = (n: number, r: number) => logFactorial(n) - logFactorial(r) - logFactorial(n - r);
  const logDenominator = logChoose(total, draws);
  let sum = 0;
  for (let x = k; upper ? x <= highest : x >= lowest; x += upper ? 1 : -1) {
    const term = Math.exp(logChoose(errors, x) + logChoose(total - errors, draws - x) - logDenominator);
    sum += term;
    // The terms fall off fast past the peak: the rest cannot change the answer.
    if (term < sum * 1e-12) break;
  }
  return Math.min(1, sum);
}

/** ln(n!) by Stirling's series (exact to double precision for n >= 10), a product below. */
function logFactorial(n: number): number {
  if (n < 10) {
    let product = 1;
    for (let i = 2; i <= n; i++) product *= i;
    return Math.log(product);
  }
  return n * Math.log(n) - n + 0.5 * Math.log(2 * Math.PI * n) + 1 / (12 * n) - 1 / (360 * n ** 3) + 1 / (1260 * n ** 5);
}

/** Mann-Whitney U on the samples (ties averaged, the variance corrected for them); the percentiles say whether it matters. */
export function compareLatency(before: Pick<WindowStats, 'p50' | 'p95' | 'sample'>, after: Pick<WindowStats, 'p50' | 'p95' | 'sample'>): SignalChange {
  const n1 = before.sample.length;
  const n2 = after.sample.length;
  if (n1 === 0 || n2 === 0) return { change: 'same', p: 1 };
  const all = [...before.sample.map((value) => ({ value, after: false })), ...after.sample.map((value) => ({ value, after: true }))].sort((a, b) => a.value - b.value);
  let rankSumAfter = 0;
  let tieTerm = 0;
  for (let i = 0; i < all.length;) {
    let j = i;
    while (j < all.length && all[j]!.value === all[i]!.value) j++;
    const rank = (i + 1 + j) / 2; // the average of ranks i+1 … j
    for (let k = i; k < j; k++) if (all[k]!.after) rankSumAfter += rank;
    const tied = j - i;
    tieTerm += tied ** 3 - tied;
    i = j;
  }
  const n = n1 + n2;
  const u = rankSumAfter - (n2 * (n2 + 1)) / 2; // how often an "after" duration exceeds a "before" one
  const mean = (n1 * n2) / 2;
  const variance = ((n1 * n2) / 12) * (n + 1 - tieTerm / (n * (n - 1)));
  if (variance <= 0) return { change: 'same', p: 1 };
  const z = (Math.abs(u - mean) - 0.5) / Math.sqrt(variance);
  const p = normalTail(Math.max(0, z));
  const slower = u > mean;
  const ratio = (a: number, b: number) => (b > 0 ? a / b : a > 0 ? Infinity : 1);
  const factor = slower ? Math.max(ratio(after.p50, before.p50), ratio(after.p95, before.p95)) : Math.max(ratio(before.p50, after.p50), ratio(before.p95, after.p95));
  if (p >= ALPHA || factor < MIN_LATENCY_FACTOR) return { change: 'same', p };
  return { change: slower ? 'worse' : 'better', p };
}

/** P(Z > z) for a standard normal Z (z >= 0): erfc by Abramowitz and Stegun 7.1.26 (error < 1.5e-7). */
export function normalTail(z: number): number {
  const x = z / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return 0.5 * poly * Math.exp(-x * x);
}
