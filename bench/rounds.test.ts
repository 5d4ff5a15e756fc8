import { describe, expect, it } from 'vitest';
import type { Row } from './measure.ts';
import { medianRounds, rowLabel } from './rounds.ts';

const row = (target: string, cpuSecondsPerItems: number, more: Partial<Row> = {}): Row =>
  ({ target, cpuSecondsPerItems, itemsPerSec: 1000 / cpuSecondsPerItems, verified: true, storedItems: 10, acknowledgedItems: 10, ...more }) as Row;

describe('medianRounds', () => {
  it('shows each target\'s median round whole, with every round\'s figures beside it', () => {
    const rounds = [
      [row('sluice', 9.1, { p99Ms: 30 }), row('naive', 160)],
      [row('naive', 170), row('sluice', 12.3, { p99Ms: 45 })],
      [row('sluice', 8.2, { p99Ms: 28 }), row('naive', 150)],
    ];
    const [sluice, naive] = medianRounds(rounds);
    expect(sluice).toMatchObject({ target: 'sluice', cpuSecondsPerItems: 9.1, p99Ms: 30 });
    expect(sluice!.rounds!.map((r) => r.cpuSecondsPerItems)).toEqual([9.1, 12.3, 8.2]);
    expect(naive).toMatchObject({ target: 'naive', cpuSecondsPerItems: 160 });
  });

  it('keeps a target measured with two transcoders as two rows', () => {
    const rounds = [
      [row('sluice', 9, { transcoder: 'js' }), row('sluice', 6, { transcoder: 'wasm' })],
      [row('sluice', 11, { transcoder: 'js' }), row('sluice', 7, { transcoder: 'wasm' })],
    ];
    expect(medianRounds(rounds).map((r) => [rowLabel(r), r.cpuSecondsPerItems])).toEqual([['sluice (js)', 9], ['sluice (wasm)', 6]]);
  });

  it('takes the lower of the middle two for an even count', () => {
    const [only] = medianRounds([[row('sluice', 10)], [row('sluice', 8)], [row('sluice', 12)], [row('sluice', 9)]]);
    expect(only!.cpuSecondsPerItems).toBe(9);
  });

  it('shows a round that stored other than it acknowledged, and a failure, instead of the median', () => {
    const unverified = row('sluice', 11, { verified: false, storedItems: 9 });
    const [shown] = medianRounds([[row('sluice', 9)], [unverified], [row('sluice', 10)]]);
    expect(shown).toMatchObject({ cpuSecondsPerItems: 11, verified: false, storedItems: 9 });
    const [failed] = medianRounds([[row('sluice', 9)], [{ target: 'sluice', error: 'did not start' } as Row]]);
    expect(failed!.error).toBe('did not start (in one of 2 rounds)');
  });

  it('leaves a single round as it is', () => {
    const rows = [row('sluice', 9)];
    expect(medianRounds([rows])).toBe(rows);
  });
});
