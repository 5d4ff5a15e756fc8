/**
 * Tenants and signing in, for the admin API and the CLI: onboarding a tenant with its first
 * owner (operator only), the tenant itself (owners change it), and a user's sign-in and
 * password change, each of which hands out a session token.
 */
import { CHOOSE_TENANT_MESSAGE, checkPassword, hashPassword, newId as id, oneTimePassword, signIn, type Tenant, type User } from '../../accounts/index.ts';
import { RelayError, unauthorized } from '../errors.ts';
import { now, type Actor, type AdminContext } from './context.ts';
import { userView } from './views.ts';

interface OnboardBody { name: string; owner: { email: string; name?: string; password?: string } }

export class TenantAdmin {
  constructor(private readonly c: AdminContext) {}

  /** Creates a tenant and its first owner (operator only). Without a password, one is made up and returned once. */
  async onboard(body: unknown) {
    const { name, owner } = this.c.validateBody<OnboardBody>('OnboardTenant', body);
    const email = owner.email.toLowerCase();
    const tenant: Tenant = { id: id('ten'), name, createdAt: now(), updatedAt: now() };
    const password = owner.password ?? oneTimePassword();
    // The owner first, then the tenant: a tenant is never seen without its owner.
    const user = await this.c.putNewUser(tenant.id, { email, name: owner.name ?? '', role: 'owner' }, password, owner.password === undefined);
    await this.c.store.accounts.tenants.put(tenant);
    return { tenant, owner: userView(user), ...(owner.password === undefined ? { oneTimePassword: password } : {}) };
  }

  list() {
    return this.c.store.accounts.tenants.values();
  }

  get(actor: Actor) {
    return this.c.tenant(actor);
  }

  async update(actor: Actor, body: unknown) {
    this.c.require(actor, 'owner');
    const { name } = this.c.validateBody<{ name: string }>('UpdateTenant', body);
    return this.c.change(this.c.store.accounts.tenants, this.c.tenant(actor).id, 'Tenant', (tenant) => ({ ...tenant, name }));
  }

  async login(body: unknown) {
    const input = this.c.validateBody<{ email: string; password: string; tenantId?: string }>('Login', body);
    const lockout = await this.admitAccount(input.email);
    const outcome = await signIn(this.c.store.accounts, input);
    // One answer for an unknown email, a wrong password and a deactivated user.
    if (outcome.kind === 'refused') throw unauthorized('Invalid email or password');
    await lockout.succeeded(input.email);
    if (outcome.kind === 'choose-tenant') throw new RelayError(409, CHOOSE_TENANT_MESSAGE, { tenants: outcome.tenants.map(({ id, name }) => ({ id, name })) });
    return { ...(await this.c.sessions.issue(outcome.user)), user: userView(outcome.user) };
  }

  async changePassword(user: User, body: unknown) {
    const { currentPassword, newPassword } = this.c.validateBody<{ currentPassword: string; newPassword: string }>('ChangePassword', body);
    // A wrong current password counts as a failed sign-in: a stolen session cannot guess it at will.
    const lockout = await this.admitAccount(user.email);
    if (!(await checkPassword(user, currentPassword))) throw unauthorized('Current password is wrong');
    await lockout.succeeded(user.email);
    const passwordHash = await hashPassword(newPassword);
    const updated = await this.c.change(this.c.store.accounts.users, user.id, 'User', (current) => ({
      ...current,
      passwordHash,
      mustChangePassword: false,
      sessionVersion: current.sessionVersion + 1,
    }));
    // Every other session ends; this one gets a fresh token.
    return { ...(await this.c.sessions.issue(updated)), user: userView(updated) };
  }

  /**
   * Counts an attempt at the account's password (sign-in, or the current password of a change)
   * before it is checked, whoever guesses: 429 while it is locked out. The right password clears
   * it (`succeeded`).
   */
  private async admitAccount(email: string) {
    const lockout = await this.c.signInLockout();
    const attempt = await lockout.attempt(email);
    if (!attempt.allowed) throw new RelayError(429, 'ThrottlerException: Too Many Requests', { retryAfterSeconds: attempt.retryAfterSeconds });
    return lockout;
  }
}
