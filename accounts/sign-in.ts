/**
 * Which account an email and password open. An email is unique within a tenant, not across
 * them (a tenant admin who adds a user must not learn that the address has an account
 * elsewhere), so one email may have accounts in several tenants, each with its own password.
 *
 * The password is checked against every account of the email at once (argon2 runs on the
 * thread pool), so the answer's time depends little on how many there are; an unknown email
 * is checked against a decoy. When the password opens accounts in more than one tenant, the
 * caller names the tenant: only someone who knows that password learns the tenants' names.
 */
import type { Tenant, User } from './model.ts';
import { checkPassword } from './passwords.ts';
import type { AccountStore } from './store.ts';

export type SignInOutcome =
  | { kind: 'signed-in'; user: User; tenant: Tenant }
  | { kind: 'choose-tenant'; tenants: Tenant[] }
  | { kind: 'refused' };

export const CHOOSE_TENANT_MESSAGE = 'This email and password open accounts in several tenants: sign in again with the tenantId of one';

/** `tenantId`: the tenant to sign in to, when the caller knows it. Deactivated users and tenants that are gone are refused alike. */
export async function signIn(accounts: AccountStore, input: { email: string; password: string; tenantId?: string }): Promise<SignInOutcome> {
  const candidates = accounts.usersByEmail(input.email).filter((user) => input.tenantId === undefined || user.tenantId === input.tenantId);
  if (candidates.length === 0) {
    await checkPassword(undefined, input.password);
    return { kind: 'refused' };
  }
  const verdicts = await Promise.all(candidates.map((user) => checkPassword(user, input.password)));
  const opened = candidates.flatMap((user, i) => {
    const active = verdicts[i] ? accounts.activeUser(user.id) : undefined;
    return active ? [active] : [];
  });
  if (opened.length === 0) return { kind: 'refused' };
  if (opened.length === 1) return { kind: 'signed-in', ...opened[0]! };
  return { kind: 'choose-tenant', tenants: opened.map(({ tenant }) => tenant).sort((a, b) => a.name.localeCompare(b.name)) };
}
