/** Passwords hashed with argon2id (@node-rs/argon2, its defaults: 19 MiB, 2 passes). */
import { hash, verify } from '@node-rs/argon2';
import { randomBytes } from 'node:crypto';
import type { User } from './model.ts';

/** What a chosen password must be, wherever one is set (relay admin API, console). */
export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

export function hashPassword(password: string): Promise<string> {
  return hash(password);
}

/** A random password for invitations and onboarding, shown once. */
export function oneTimePassword(): string {
  return randomBytes(18).toString('base64url');
}

/** An argon2 hash of nothing anyone knows: sign-in checks it for unknown emails too, so timing tells nothing. */
let decoyHash: Promise<string> | undefined;

export async function checkPassword(user: User | undefined, password: string): Promise<boolean> {
  if (!user) {
    decoyHash ??= hash(randomBytes(16).toString('hex'));
    await verify(await decoyHash, password);
    return false;
  }
  return verify(user.passwordHash, password);
}
