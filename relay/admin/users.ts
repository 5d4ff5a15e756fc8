/**
 * A tenant's users: invited with a role (a one-time password when none is given), changed and
 * deactivated by those with the rights over both the old and the new role; a tenant always
 * keeps one active owner, and a deactivation ends the user's sessions.
 */
import { changeUser, oneTimePassword, requireRightsOver, type Role } from '../../accounts/index.ts';
import type { Actor, AdminContext } from './context.ts';
import { userView } from './views.ts';

interface UserBody { email?: string; name?: string; role?: Role; password?: string; active?: boolean }

export class UserAdmin {
  constructor(private readonly c: AdminContext) {}

  /** Creates (invites) a user; without a password, a one-time password is returned once. */
  async create(actor: Actor, body: unknown) {
    const input = this.c.validateBody<UserBody>('CreateUser', body);
    requireRightsOver(actor, input.role!);
    const email = input.email!.toLowerCase();
    const password = input.password ?? oneTimePassword();
    const user = await this.c.putNewUser(actor.tenantId, { email, name: input.name ?? '', role: input.role! }, password, input.password === undefined);
    return { user: userView(user), ...(input.password === undefined ? { oneTimePassword: password } : {}) };
  }

  list(actor: Actor) {
    return this.c.store.accounts.users.filter((user) => user.tenantId === actor.tenantId).map(userView);
  }

  get(actor: Actor, userId: string) {
    return userView(this.c.user(actor, userId));
  }

  async update(actor: Actor, userId: string, body: unknown) {
    const input = this.c.validateBody<UserBody>('UpdateUser', body);
    return userView(await changeUser(this.c.store.accounts, actor, userId, input));
  }
}
