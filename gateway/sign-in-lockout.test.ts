import { describe, expect, it } from 'vitest';
import { BackoffLockout } from './lockout.ts';
import { SignInLockout } from './sign-in-lockout.ts';

describe('SignInLockout', () => {
  const minute = 60_000;
  /** The defaults: 10 failures, 60 s doubling up to 15 minutes; on a clock the case moves. */
  const withClock = () => {
    const clock = { at: 0 };
    const lockout = new SignInLockout(new BackoffLockout({ failures: 10, lockoutMs: minute, maxLockoutMs: 15 * minute }, () => clock.at));
    return { clock, lockout };
  };
  const attempts = async (lockout: SignInLockout, email: string, times: number) => {
    const allowed: boolean[] = [];
    for (let i = 0; i < times; i++) allowed.push((await lockout.attempt(email)).allowed);
    return allowed;
  };

  it('locks the account out after the threshold, and lets the right password in once the lockout is over', async () => {
    const { clock, lockout } = withClock();
    expect(await attempts(lockout, 'ada@example.com', 10)).toEqual(Array(10).fill(true));
    expect(await lockout.attempt('ada@example.com')).toEqual({ allowed: false, retryAfterSeconds: 60 });
    clock.at += 59_000;
    expect(await lockout.attempt('ada@example.com')).toEqual({ allowed: false, retryAfterSeconds: 1 });
    clock.at += 1000;
    // Over: this attempt is checked, and it was the right password.
    expect((await lockout.attempt('ada@example.com')).allowed).toBe(true);
    await lockout.succeeded('ada@example.com');
    // The success forgot the backoff too: the next lockout is the first again.
    expect(await attempts(lockout, 'ada@example.com', 10)).toEqual(Array(10).fill(true));
    expect(await lockout.attempt('ada@example.com')).toEqual({ allowed: false, retryAfterSeconds: 60 });
  });

  it('is one account whatever the case of the email, and leaves other accounts alone', async () => {
    const { lockout } = withClock();
    for (let i = 0; i < 10; i++) await lockout.attempt(i % 2 === 0 ? 'Ada@Example.com' : ' ada@example.com');
    expect((await lockout.attempt('ADA@EXAMPLE.COM')).allowed).toBe(false);
    expect((await lockout.attempt('bob@example.com')).allowed).toBe(true);
  });

  it('tells of every attempt refused by a lockout (sluice_sign_in_locked_out_total)', async () => {
    let refused = 0;
    const lockout = new SignInLockout(new BackoffLockout({ failures: 2, lockoutMs: minute, maxLockoutMs: 15 * minute }, () => 0), () => refused++);
    expect(await attempts(lockout, 'ada@example.com', 5)).toEqual([true, true, false, false, false]);
    expect(refused).toBe(3);
  });
});
