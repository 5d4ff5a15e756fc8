/**
 * Several rounds of the same targets (`--rounds N`): on a shared or virtual machine one run's
 * CPU per item moves by ±20 % from one minute to the next, so a single figure can make a
 * change look better or worse than it is. The report shows each target's median round, the one
 * whose CPU per item is the median (the lower of the middle two for an even count), whole: its
 * figures stay consistent with one another. Beside it, the range over every round. A round that
 * stored other than it acknowledged is shown instead, so that the failure is not hidden.
 */
import type { Row } from './measure.ts';

/** One round's headline figures, kept with the median row. */
export interface RoundFigures {
  cpuSecondsPerItems: number;
  itemsPerSec: number;
  /** The open-loop run's p99, if there was one. */
  openP99Ms?: number;
  verified: boolean;
}

/** A row's name in a report: its target, and its transcoder where the run compared them. */
export function rowLabel(row: Pick<Row, 'target' | 'transcoder'>): string {
  return row.transcoder ? `${row.target} (${row.transcoder})` : row.target;
}

export type RoundedRow = Row & { rounds?: RoundFigures[] };

/**
 * One row per target from the rounds' rows (each round: one row per target, in any order). A
 * target that failed in a round is reported failed: the error of its first failure.
 */
export function medianRounds(rounds: Row[][]): RoundedRow[] {
  if (rounds.length === 1) return rounds[0]!;
  const labels = [...new Set(rounds.flat().map(rowLabel))];
  return labels.map((label) => {
    const rows = rounds.flatMap((round) => round.filter((row) => rowLabel(row) === label));
    const failed = rows.find((row) => row.error);
    if (failed) return { ...failed, error: `${failed.error} (in one of ${rows.length} rounds)` };
    const sorted = [...rows].sort((a, b) => a.cpuSecondsPerItems - b.cpuSecondsPerItems);
    // A round whose stored count did not match what was acknowledged is the one to show.
    const shown = rows.find((row) => !row.verified) ?? sorted[Math.floor((sorted.length - 1) / 2)]!;
    return {
      ...shown,
      rounds: rows.map((row) => ({
        cpuSecondsPerItems: row.cpuSecondsPerItems,
        itemsPerSec: row.itemsPerSec,
        openP99Ms: row.open?.result.latencyMs.p99,
        verified: row.verified,
      })),
    };
  });
}
