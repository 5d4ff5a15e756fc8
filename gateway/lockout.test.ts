import { describe, expect, it } from 'vitest';
import { BackoffLockout } from './lockout.ts';
import { describeLockout } from './lockout.suite.ts';
import { manualClock } from './window-limiter.suite.ts';

const shared = manualClock();
describeLockout('in-process', {
  ...shared,
  create: (options) => new BackoffLockout(options, shared.now),
  shortLockoutMs: 1000,
});

describe('BackoffLockout', () => {
  const minute = 60_000;

  /** Fails `failures` times, then reads the lockout that follows (in seconds). */
  const lockoutAfter = (lockout: BackoffLockout, failures: number) => {
    for (let i = 0; i < failures; i++) expect(lockout.take('account').allowed).toBe(true);
    const refused = lockout.take('account');
    expect(refused.allowed).toBe(false);
    return refused.retryAfterSeconds;
  };

  it('doubles each lockout in a row up to the cap, exactly', () => {
    const clock = manualClock();
    const lockout = new BackoffLockout({ failures: 10, lockoutMs: minute, maxLockoutMs: 15 * minute }, clock.now);
    const lengths: number[] = [];
    for (let round = 0; round < 6; round++) {
      const seconds = lockoutAfter(lockout, 10);
      lengths.push(seconds);
      clock.at += seconds * 1000; // the lockout has just ended
    }
    expect(lengths).toEqual([60, 120, 240, 480, 900, 900]);
  });

  it('starts the backoff over once a key was quiet for the longest lockout', () => {
    const clock = manualClock();
    const lockout = new BackoffLockout({ failures: 3, lockoutMs: minute, maxLockoutMs: 15 * minute }, clock.now);
    expect(lockoutAfter(lockout, 3)).toBe(60);
    clock.at += minute;
    expect(lockoutAfter(lockout, 3)).toBe(120);
    // Quiet for just under the cap after the lockout ended: still remembered.
    clock.at += 2 * minute + 15 * minute - 1;
    expect(lockoutAfter(lockout, 3)).toBe(240);
    clock.at += 4 * minute + 15 * minute;
    expect(lockoutAfter(lockout, 3)).toBe(60);
    expect(lockout.size).toBe(1);
  });

  it('forgets failures spread out more than the longest lockout apart', () => {
    const clock = manualClock();
    const lockout = new BackoffLockout({ failures: 3, lockoutMs: minute, maxLockoutMs: 15 * minute }, clock.now);
    for (let i = 0; i < 10; i++) {
      expect(lockout.take('account').allowed).toBe(true);
      clock.at += 15 * minute;
    }
  });

  it('holds at most maxKeys keys, forgetting the least recently tried', async () => {
    const clock = manualClock();
    const lockout = new BackoffLockout({ failures: 2, lockoutMs: minute, maxLockoutMs: 15 * minute }, clock.now, 3);
    lockout.take('victim');
    lockout.take('victim');
    expect(lockout.take('victim').allowed).toBe(false);
    for (const key of ['a', 'b']) lockout.take(key);
    expect(lockout.size).toBe(3);
    lockout.take('victim'); // tried again: the most recent now
    lockout.take('c');
    expect(lockout.size).toBe(3);
    expect(lockout.take('victim').allowed).toBe(false);
    await lockout.shutdown();
  });
});
