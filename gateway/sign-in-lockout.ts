/**
 * Sign-in attempts per account: the console's and the relay's sign-in share one, as they share
 * the accounts. The per-client-IP limit slows one network down; this one holds, wherever the
 * guesses come from, for the account they are aimed at: after SLUICE_SIGN_IN_LOCKOUT_FAILURES
 * failures the account is locked out for a while, doubling each time in a row up to a cap
 * (gateway/lockout.ts), so a lockout an attacker causes always ends.
 *
 * It is keyed by the email as typed (lower-cased), whether or not such a user exists, so an
 * unknown email is answered exactly like a known one. Keys are digests: no email is kept in
 * memory or Redis.
 */
import { sha256Hex } from '../core/hash.ts';
import type { LimitDecision } from './limiter.ts';
import type { Lockout } from './lockout.ts';

export class SignInLockout {
  /** `onRefused`: told of every attempt refused because its account is locked out (a metric). */
  constructor(private readonly lockout: Lockout, private readonly onRefused: () => void = () => {}) {}

  /**
   * Counts an attempt at `email`'s password, before it is checked; refused (allowed: false,
   * with the seconds left) while the account is locked out. Call `succeeded` once the password
   * was right.
   */
  async attempt(email: string): Promise<LimitDecision> {
    const decision = await this.lockout.take(accountKey(email));
    if (!decision.allowed) this.onRefused();
    return decision;
  }

  /** The password was right: the account's failures and backoff are forgotten. */
  async succeeded(email: string): Promise<void> {
    await this.lockout.reset(accountKey(email));
  }

  shutdown(): Promise<void> {
    return this.lockout.shutdown();
  }
}

function accountKey(email: string): string {
  return sha256Hex(email.trim().toLowerCase());
}
