import { describe, expect, it } from 'vitest';
import { histogramQuantile } from './histogram.ts';

describe('histogramQuantile', () => {
  it('interpolates inside the bucket that holds the rank, as histogram_quantile does', () => {
    const set = { bounds: [10, 20, 30], counts: [0, 10, 0, 0] };
    expect(histogramQuantile(0.5, [set])).toBe(15);
    expect(histogramQuantile(0.95, [set])).toBeCloseTo(19.5, 10);
    expect(histogramQuantile(0.99, [set])).toBeCloseTo(19.9, 10);
  });

  it('gives the exact percentiles of evenly spread observations: 1..100 in buckets of 10', () => {
    const bounds = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
    const set = { bounds, counts: [...bounds.map(() => 10), 0] };
    expect(histogramQuantile(0.5, [set])).toBeCloseTo(50, 10);
    expect(histogramQuantile(0.95, [set])).toBeCloseTo(95, 10);
    expect(histogramQuantile(0.99, [set])).toBeCloseTo(99, 10);
  });

  it('starts the first bucket at 0 when its bound is positive, else holds its observations at the bound', () => {
    expect(histogramQuantile(0.5, [{ bounds: [100], counts: [4, 0] }])).toBe(50);
    expect(histogramQuantile(0.5, [{ bounds: [-5, 0, 5], counts: [2, 0, 0, 0] }])).toBe(-5);
  });

  it('places observations above the last bound at the last bound', () => {
    expect(histogramQuantile(0.5, [{ bounds: [10], counts: [0, 5] }])).toBe(10);
    // Half below 10 (spread over 0..10), half above: p25 inside, p75 at the bound.
    expect(histogramQuantile(0.25, [{ bounds: [10], counts: [5, 5] }])).toBe(5);
    expect(histogramQuantile(0.75, [{ bounds: [10], counts: [5, 5] }])).toBe(10);
  });

  it('adds series with the same bounds as if their counts were added', () => {
    const a = { bounds: [10, 20, 30], counts: [3, 1, 0, 0] };
    const b = { bounds: [10, 20, 30], counts: [1, 5, 2, 0] };
    const added = { bounds: [10, 20, 30], counts: [4, 6, 2, 0] };
    for (const q of [0.1, 0.5, 0.9, 0.99]) expect(histogramQuantile(q, [a, b])).toBeCloseTo(histogramQuantile(q, [added])!, 10);
  });

  it('adds series with different bounds as distributions: 0..10 and 10..20 evenly make 0..20 evenly', () => {
    const low = { bounds: [10], counts: [10, 0] };
    const high = { bounds: [10, 20], counts: [0, 10, 0] };
    expect(histogramQuantile(0.25, [low, high])).toBeCloseTo(5, 10);
    expect(histogramQuantile(0.5, [low, high])).toBeCloseTo(10, 10);
    expect(histogramQuantile(0.75, [low, high])).toBeCloseTo(15, 10);
    // Bounds that cut each other's buckets: 0..10 evenly and 0..5 / 5..20.
    const other = { bounds: [5, 20], counts: [5, 15, 0] };
    // Together: density 2 on 0..10 (10 below 5, 20 below 10) and 1 on 10..20, 30 in all.
    expect(histogramQuantile(10 / 30, [low, other])).toBeCloseTo(5, 10);
    expect(histogramQuantile(0.5, [low, other])).toBeCloseTo(7.5, 10);
    expect(histogramQuantile(20 / 30, [low, other])).toBeCloseTo(10, 10);
    expect(histogramQuantile(25 / 30, [low, other])).toBeCloseTo(15, 10);
  });

  it('answers null without observations or without a bound to place them by', () => {
    expect(histogramQuantile(0.5, [])).toBeNull();
    expect(histogramQuantile(0.5, [{ bounds: [10, 20], counts: [0, 0, 0] }])).toBeNull();
    expect(histogramQuantile(0.5, [{ bounds: [], counts: [7] }])).toBeNull();
  });
});
