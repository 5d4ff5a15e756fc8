/**
 * The contract every Lockout driver passes (BackoffLockout in process, RedisBackoffLockout for
 * the cluster). Call describeLockout from a driver's test file with its harness.
 * No case assumes how fast the machine is: where real time must pass, the case polls with a
 * deadline, and times are only compared in the direction load cannot break.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Lockout, LockoutOptions } from './lockout.ts';
import type { LimiterClock } from './window-limiter.suite.ts';

export interface LockoutHarness extends LimiterClock {
  /** A fresh lockout with keys of its own. */
  create(options: LockoutOptions): Promise<Lockout> | Lockout;
  /** The first lockout of the cases that wait one out: short where real time has to pass. */
  shortLockoutMs: number;
  /** Called with each lockout after its case (Redis: checks Redis decided, not the fallback). */
  verify?(lockout: Lockout): void;
}

export function describeLockout(driver: string, harness: LockoutHarness): void {
  describe(`Lockout contract: ${driver}`, () => {
    const made: Lockout[] = [];
    const fresh = async (options: LockoutOptions) => {
      const lockout = await harness.create(options);
      made.push(lockout);
      return lockout;
    };
    afterEach(async () => {
      for (const lockout of made.splice(0)) {
        harness.verify?.(lockout);
        await lockout.shutdown();
      }
    });

    const allowedOf = async (lockout: Lockout, key: string, times: number) => {
      const allowed: boolean[] = [];
      for (let i = 0; i < times; i++) allowed.push((await lockout.take(key)).allowed);
      return allowed;
    };

    /** Takes on `key` every `stepMs` until one is allowed; returns when, fails after `deadlineMs`. */
    const takeUntilAllowed = async (lockout: Lockout, key: string, stepMs: number, deadlineMs: number) => {
      const deadline = harness.now() + deadlineMs;
      for (;;) {
        if ((await lockout.take(key)).allowed) return harness.now();
        if (harness.now() > deadline) throw new Error(`still locked out after ${deadlineMs} ms`);
        await harness.pass(stepMs);
      }
    };

    it('allows `failures` takes, then refuses with Retry-After within the lockout', async () => {
      // A minute: the lockout does not end during the case however slow the machine is.
      const lockout = await fresh({ failures: 3, lockoutMs: 60_000, maxLockoutMs: 600_000 });
      expect(await allowedOf(lockout, 'account', 3)).toEqual([true, true, true]);
      for (let i = 0; i < 3; i++) {
        const refused = await lockout.take('account');
        expect(refused.allowed).toBe(false);
        expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
        expect(refused.retryAfterSeconds).toBeLessThanOrEqual(60);
      }
    });

    it('keeps keys apart', async () => {
      const lockout = await fresh({ failures: 2, lockoutMs: 60_000, maxLockoutMs: 600_000 });
      expect(await allowedOf(lockout, 'a', 3)).toEqual([true, true, false]);
      expect(await allowedOf(lockout, 'b', 3)).toEqual([true, true, false]);
    });

    it('forgets the failures of a key that is reset, and a reset unlocks it', async () => {
      const lockout = await fresh({ failures: 3, lockoutMs: 60_000, maxLockoutMs: 600_000 });
      expect(await allowedOf(lockout, 'account', 2)).toEqual([true, true]);
      await lockout.reset('account');
      expect(await allowedOf(lockout, 'account', 4)).toEqual([true, true, true, false]);
      await lockout.reset('account');
      expect(await allowedOf(lockout, 'account', 1)).toEqual([true]);
    });

    it('ends a lockout, and doubles the next one in a row', async () => {
      const lockoutMs = harness.shortLockoutMs;
      const lockout = await fresh({ failures: 2, lockoutMs, maxLockoutMs: 100 * lockoutMs });
      const firstFrom = harness.now();
      expect(await allowedOf(lockout, 'account', 3)).toEqual([true, true, false]);
      const firstEnded = await takeUntilAllowed(lockout, 'account', lockoutMs / 10, Math.max(10_000, 20 * lockoutMs));
      expect(firstEnded - firstFrom).toBeGreaterThanOrEqual(lockoutMs);
      // That take was the first failure of the next round; one more locks the key again.
      const secondFrom = harness.now();
      expect(await allowedOf(lockout, 'account', 2)).toEqual([true, false]);
      const secondEnded = await takeUntilAllowed(lockout, 'account', lockoutMs / 10, Math.max(20_000, 40 * lockoutMs));
      expect(secondEnded - secondFrom).toBeGreaterThanOrEqual(2 * lockoutMs);
    });

    it('never locks out for longer than maxLockoutMs', async () => {
      const lockout = await fresh({ failures: 1, lockoutMs: 90_000, maxLockoutMs: 60_000 });
      expect(await allowedOf(lockout, 'account', 1)).toEqual([true]);
      const refused = await lockout.take('account');
      expect(refused.allowed).toBe(false);
      expect(refused.retryAfterSeconds).toBeLessThanOrEqual(60);
    });
  });
}
