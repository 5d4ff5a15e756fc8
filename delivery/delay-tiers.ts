/**
 * The waits of the JetStream delivery queue's waiting stream (jetstream-queue.ts): a subject per
 * tier of fixed delay, so a tier's messages fall due in the order they were published. A wait is
 * put in the longest tier not longer than it, and goes on to a shorter tier when that is done:
 * a 90-minute backoff waits 1 h, 10 min ×3, 2 min ×5 — a handful of hops, never late by more
 * than the shortest tier. New jobs wait in a tier of no delay (`new`): they are due at once.
 */
export interface DelayTier {
  /** Part of the subject and consumer names. */
  name: string;
  ms: number;
}

/** Where intake puts new jobs: due at once, moved on (and a bundle split) by its consumer. */
export const NEW_JOBS: DelayTier = { name: 'new', ms: 0 };

export const DELAY_TIERS: readonly DelayTier[] = [
  { name: '250ms', ms: 250 },
  { name: '1s', ms: 1_000 },
  { name: '5s', ms: 5_000 },
  { name: '30s', ms: 30_000 },
  { name: '2m', ms: 120_000 },
  { name: '10m', ms: 600_000 },
  { name: '1h', ms: 3_600_000 },
];

/** The longest tier not longer than `waitMs` (the shortest for a shorter wait). */
export function tierFor(waitMs: number): DelayTier {
  let chosen = DELAY_TIERS[0]!;
  for (const tier of DELAY_TIERS) if (tier.ms <= waitMs) chosen = tier;
  return chosen;
}

/** How long a job waits for a slot the `deferrals`-th time in a row: 1 s, doubling, at most 30 s. */
export function deferralDelay(deferrals: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.min(5, Math.max(0, deferrals - 1)));
}
