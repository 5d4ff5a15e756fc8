import { describe, expect, it } from 'vitest';
import { compareErrorRates, compareLatency, judgeDeploy, MIN_REQUESTS, normalTail, type WindowStats } from './deploy-verdict.ts';
import { seededRandom } from '../test/seeded-random.ts';

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** A window of `requests` requests with durations from `duration()` and errors at `errorRate`. */
function windowOf(requests: number, errorRate: number, duration: () => number, random: () => number): WindowStats {
  const sample = Array.from({ length: requests }, duration);
  const sorted = [...sample].sort((a, b) => a - b);
  let errors = 0;
  for (let i = 0; i < requests; i++) if (random() < errorRate) errors++;
  return { requests, errors, p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95), p99: quantile(sorted, 0.99), sample };
}

describe('normalTail', () => {
  it('is the standard normal upper tail', () => {
    expect(normalTail(0)).toBeCloseTo(0.5, 6);
    expect(normalTail(1.959964)).toBeCloseTo(0.025, 5);
    expect(normalTail(2.326348)).toBeCloseTo(0.01, 5);
    expect(normalTail(5)).toBeLessThan(1e-6);
  });
});

describe('compareLatency', () => {
  it('gives the Mann-Whitney p-value of a small worked example', () => {
    // U = 9 of 9, mean 4.5, variance 5.25: z = (4.5 - 0.5) / 2.2913 = 1.7457, one-sided p = 0.0404.
    const result = compareLatency({ p50: 2, p95: 3, sample: [1, 2, 3] }, { p50: 5, p95: 6, sample: [4, 5, 6] });
    expect(result.p).toBeCloseTo(0.0404, 3);
    expect(result.change).toBe('same'); // 0.04 is not below 0.01
  });

  it('corrects for ties: all durations equal is no evidence at all', () => {
    expect(compareLatency({ p50: 5, p95: 5, sample: Array(50).fill(5) }, { p50: 5, p95: 5, sample: Array(50).fill(5) })).toEqual({ change: 'same', p: 1 });
  });
});

describe('compareErrorRates', () => {
  it('calls a rise from 2 % to 12 % over 150 requests worse, and 2 % to 3 % the same', () => {
    expect(compareErrorRates({ requests: 150, errors: 3 }, { requests: 150, errors: 18 }).change).toBe('worse');
    expect(compareErrorRates({ requests: 150, errors: 3 }, { requests: 150, errors: 5 }).change).toBe('same');
    expect(compareErrorRates({ requests: 150, errors: 18 }, { requests: 150, errors: 3 }).change).toBe('better');
  });

  it("gives Fisher's exact p-value: 1 of 10 failing before, 9 of 10 after, is (C(10,9)·C(10,1) + 1) / C(20,10)", () => {
    expect(compareErrorRates({ requests: 10, errors: 1 }, { requests: 10, errors: 9 }).p).toBeCloseTo(101 / 184_756, 8);
  });

  it('does not call a significant but tiny rise worse: 2.0 % to 2.5 % over a million requests', () => {
    const result = compareErrorRates({ requests: 1_000_000, errors: 20_000 }, { requests: 1_000_000, errors: 25_000 });
    expect(result.p).toBeLessThan(1e-6);
    expect(result.change).toBe('same');
  });
});

describe('judgeDeploy', () => {
  it("calls the demo's payment release a regression: slower (40-130 ms to 180-600 ms) and failing more (2 % to 12 %)", () => {
    const random = seededRandom(1);
    const before = windowOf(140, 0.02, () => 40 + random() * 90, random);
    const after = windowOf(140, 0.12, () => 180 + random() * 420, random);
    const judged = judgeDeploy(before, after);
    expect(judged.verdict).toBe('regression');
    expect(judged.latency!.change).toBe('worse');
    expect(judged.reason).toContain('latency');
  });

  it(`says "not enough data" under ${MIN_REQUESTS} requests in a window, however different`, () => {
    const random = seededRandom(2);
    const judged = judgeDeploy(windowOf(MIN_REQUESTS - 1, 0, () => 10, random), windowOf(500, 0.5, () => 900, random));
    expect(judged.verdict).toBe('not enough data');
  });

  it('calls a harmless deploy "no change" almost always: 300 simulated deploys with the same traffic before and after, small services too', () => {
    const random = seededRandom(3);
    const verdicts = new Map<string, number>();
    for (let i = 0; i < 300; i++) {
      const duration = () => 4 + random() * 20 + (random() < 0.05 ? random() * 200 : 0);
      const judged = judgeDeploy(windowOf(60 + Math.floor(random() * 400), 0.03, duration, random), windowOf(60 + Math.floor(random() * 400), 0.03, duration, random));
      verdicts.set(judged.verdict, (verdicts.get(judged.verdict) ?? 0) + 1);
    }
    // Two signals, each tested at 1 % a direction: false regressions at most 2 % (6 of 300), and as many false improvements.
    expect(verdicts.get('regression') ?? 0).toBeLessThanOrEqual(6);
    expect(verdicts.get('no change')).toBeGreaterThanOrEqual(288);
  });

  it('calls a faster release an improvement', () => {
    const random = seededRandom(4);
    expect(judgeDeploy(windowOf(200, 0.02, () => 100 + random() * 100, random), windowOf(200, 0.02, () => 50 + random() * 50, random)).verdict).toBe('improvement');
  });
});
