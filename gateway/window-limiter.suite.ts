/**
 * The contract every sliding-window Limiter driver passes (SlidingWindowLimiter in process,
 * RedisSlidingWindowLimiter for the cluster). Call describeSlidingWindowLimiter from a driver's
 * test file with its harness.
 * No case assumes how fast the machine is: where real time must pass, the case polls with a
 * deadline, and times are only compared in the direction load cannot break.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Limiter } from './limiter.ts';
import type { SlidingWindowOptions } from './window-limiter.ts';

/** The limiter's clock, as a test sees it. */
export interface LimiterClock {
  /** Now in ms on the limiter's clock (for Redis: Date.now(), the wall clock Redis's TIME reads). */
  now(): number;
  /** Lets about `ms` pass on that clock: moves an injected clock, or sleeps. */
  pass(ms: number): Promise<void>;
}

/** An injected clock: the cases run without sleeping and decide the same way every run. */
export function manualClock(): LimiterClock & { at: number } {
  const clock = {
    at: 0,
    now: () => clock.at,
    pass: async (ms: number) => {
      clock.at += ms;
    },
  };
  return clock;
}

export interface SlidingWindowHarness extends LimiterClock {
  /** A fresh limiter with keys of its own. */
  create(options: SlidingWindowOptions): Promise<Limiter> | Limiter;
  /** The window of the cases that wait one out: short where real time has to pass. */
  shortWindowMs: number;
  /** Called with each limiter after its case (Redis: checks Redis decided, not the fallback). */
  verify?(limiter: Limiter): void;
}

/** An accepted take, decided somewhere between `from` and `to` on the limiter's clock. */
export interface AcceptedTake {
  from: number;
  to: number;
}

/**
 * Pairs of accepted takes (indexes) proving that some window held more than `limit`: take i
 * and take i + limit decided less than `windowMs` apart. The bounds make takes look further
 * apart than they were, never closer, so a correct limiter gives [] however loaded the machine.
 */
export function overfullWindows(accepted: AcceptedTake[], limit: number, windowMs: number): Array<[number, number]> {
  const overfull: Array<[number, number]> = [];
  for (let i = 0; i + limit < accepted.length; i++) {
    if (accepted[i + limit]!.to - accepted[i]!.from < windowMs) overfull.push([i, i + limit]);
  }
  return overfull;
}

/**
 * `rounds` bursts of `limit` takes, half a window apart: each burst lands at the end of the
 * window the previous one opened. Returns the accepted takes and how many each burst got.
 */
export async function burstsHalfAWindowApart(limiter: Limiter, clock: LimiterClock, key: string, options: SlidingWindowOptions, rounds: number): Promise<{ accepted: AcceptedTake[]; perBurst: number[] }> {
  const accepted: AcceptedTake[] = [];
  const perBurst: number[] = [];
  for (let round = 0; round < rounds; round++) {
    if (round > 0) await clock.pass(options.windowMs / 2);
    let count = 0;
    for (let i = 0; i < options.limit; i++) {
      const from = clock.now();
      const decision = await limiter.take(key);
      if (!decision.allowed) continue;
      accepted.push({ from, to: clock.now() });
      count++;
    }
    perBurst.push(count);
  }
  return { accepted, perBurst };
}

export function describeSlidingWindowLimiter(driver: string, harness: SlidingWindowHarness): void {
  describe(`sliding-window Limiter contract: ${driver}`, () => {
    const limiters: Limiter[] = [];
    const fresh = async (options: SlidingWindowOptions) => {
      const limiter = await harness.create(options);
      limiters.push(limiter);
      return limiter;
    };
    afterEach(async () => {
      for (const limiter of limiters.splice(0)) {
        harness.verify?.(limiter);
        await limiter.shutdown();
      }
    });

    /** Takes on `key` every `stepMs` until one is allowed; returns when (bounds), fails after `deadlineMs`. */
    const takeUntilAllowed = async (limiter: Limiter, key: string, stepMs: number, deadlineMs: number) => {
      const deadline = harness.now() + deadlineMs;
      let refused = 0;
      for (;;) {
        if ((await limiter.take(key)).allowed) return { at: harness.now(), refused };
        refused++;
        if (harness.now() > deadline) throw new Error(`still refused after ${deadlineMs} ms (${refused} takes)`);
        await harness.pass(stepMs);
      }
    };

    it('refuses once `limit` takes were accepted in the window, with Retry-After within the window', async () => {
      // A minute: no take leaves the window during the case however slow the machine is.
      const limiter = await fresh({ limit: 3, windowMs: 60_000 });
      const decisions = [];
      for (let i = 0; i < 5; i++) decisions.push(await limiter.take('198.51.100.7'));
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
      for (const refused of decisions.slice(3)) {
        expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
        expect(refused.retryAfterSeconds).toBeLessThanOrEqual(60);
      }
    });

    it('keeps keys apart', async () => {
      const limiter = await fresh({ limit: 2, windowMs: 60_000 });
      const take = async (key: string) => (await limiter.take(key)).allowed;
      expect([await take('a'), await take('a'), await take('a')]).toEqual([true, true, false]);
      expect([await take('b'), await take('b'), await take('b')]).toEqual([true, true, false]);
      expect(await take('a')).toBe(false);
    });

    it('does not let refused takes extend the window', async () => {
      // Refused takes every fifth of a window: if they counted, the key would never be let in again.
      const windowMs = harness.shortWindowMs;
      const limiter = await fresh({ limit: 1, windowMs });
      const start = harness.now();
      expect((await limiter.take('ip')).allowed).toBe(true);
      const { at, refused } = await takeUntilAllowed(limiter, 'ip', windowMs / 5, Math.max(10_000, 10 * windowMs));
      expect(refused).toBeGreaterThanOrEqual(1);
      expect(at - start).toBeGreaterThanOrEqual(windowMs);
    });

    it('lets a take in again once the window has passed since the oldest accepted take', async () => {
      const windowMs = harness.shortWindowMs;
      const limiter = await fresh({ limit: 2, windowMs });
      const start = harness.now();
      expect((await limiter.take('ip')).allowed).toBe(true);
      await harness.pass(windowMs / 2);
      expect((await limiter.take('ip')).allowed).toBe(true);
      const { at } = await takeUntilAllowed(limiter, 'ip', windowMs / 10, Math.max(10_000, 10 * windowMs));
      // Not before the first take left the window (load can only make `at` later).
      expect(at - start).toBeGreaterThanOrEqual(windowMs);
    });

    it('never accepts more than `limit` in any window across bursts either side of a window boundary', async () => {
      // What a token bucket fails: it refills during the window and lets the next burst in.
      const options = { limit: 10, windowMs: harness.shortWindowMs };
      const limiter = await fresh(options);
      const { accepted, perBurst } = await burstsHalfAWindowApart(limiter, harness, 'ip', options, 4);
      expect(perBurst[0]).toBe(10);
      expect(overfullWindows(accepted, options.limit, options.windowMs)).toEqual([]);
      // The first burst left the window before the last one: the window moved on.
      expect(accepted.length).toBeGreaterThan(options.limit);
    });
  });
}
