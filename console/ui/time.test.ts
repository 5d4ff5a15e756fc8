import { describe, expect, it } from 'vitest';
import { formatAxisTime } from './time.ts';

describe('formatAxisTime', () => {
  const at = Date.UTC(2026, 10, 29, 6, 5, 14);
  it('names the seconds on a chart of a few minutes, where ticks are seconds apart', () => {
    expect(formatAxisTime(at, 60_000)).toMatch(/\d{2}:\d{2}:\d{2}/);
    expect(formatAxisTime(at, 15 * 60_000)).toMatch(/\d{2}:\d{2}:\d{2}/);
  });

  it('names hours and minutes up to a day and a half, and the day beyond', () => {
    expect(formatAxisTime(at, 3_600_000)).not.toMatch(/\d{2}:\d{2}:\d{2}/);
    expect(formatAxisTime(at, 3_600_000)).toMatch(/\d{2}:\d{2}/);
    expect(formatAxisTime(at, 7 * 86_400_000)).toMatch(/Nov/);
  });
});
