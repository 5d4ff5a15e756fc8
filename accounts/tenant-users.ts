/**
 * A tenant's users as the console manages them: invited by a one-time link, their role changed,
 * deactivated; and what every user does to their own account: change the password, sign out
 * everywhere. The rules over whom one may manage are the relay admin's as well (relay/admin/users.ts).
 *
 * An invitation is stored with its token hashed and lasts 7 days; accepting it creates the user
 * with the password they choose, once: its use is recorded with an atomic create, so two
 * acceptances racing (two tabs, two gateways) cannot both make a user.
 */
import { randomBytes } from 'node:crypto';
import { ApiError } from '../core/errors.ts';
import { sha256Hex } from '../core/hash.ts';
import type { Logger } from '../core/log.ts';
import { Collection } from '../state/collection.ts';
import type { StateStore } from '../state/store.ts';
import type { Role, Stamped, User } from './model.ts';
import { checkPassword, hashPassword } from './passwords.ts';
import { refusalMessage } from './rights.ts';
import { newId, type AccountStore } from './store.ts';

export const INVITATION_DAYS = 7;
/** Open invitations a tenant may have at once. */
export const MAX_OPEN_INVITATIONS = 50;
const USES = 'account_invitation_uses';

export interface Invitation extends Stamped {
  tenantId: string;
  email: string;
  role: Role;
  /** sha256 of the token: the token itself is shown once, to the inviter. */
  tokenHash: string;
  expiresAt: string;
  invitedBy: string;
}

/** Who acts: a user of the tenant, or the operator at the command line. */
export interface Manager {
  tenantId: string;
  role: Role | 'operator';
  userId?: string;
}

/** Owners manage everyone; admins manage members and admins; members no one. Throws 403. */
export function requireRightsOver(actor: Pick<Manager, 'role'>, targetRole: Role): void {
  if (actor.role === 'operator' || actor.role === 'owner') return;
  if (actor.role === 'admin' && targetRole !== 'owner') return;
  throw new ApiError(403, refusalMessage(actor.role === 'admin' ? 'owner' : 'admin'));
}

/**
 * Changes a user's role or active flag under the rules: the actor's rights over both the old
 * and the new role, and a tenant keeps one active owner (409). A deactivation ends the user's
 * sessions. 404 for a user of another tenant.
 */
export async function changeUser(accounts: AccountStore, actor: Manager, userId: string, change: { name?: string; role?: Role; active?: boolean }): Promise<User> {
  const user = accounts.users.get(userId);
  if (!user || user.tenantId !== actor.tenantId) throw new ApiError(404, 'User not found');
  requireRightsOver(actor, user.role);
  if (change.role) requireRightsOver(actor, change.role);
  const losesOwner = user.role === 'owner' && user.active && ((change.role && change.role !== 'owner') || change.active === false);
  if (losesOwner && accounts.activeOwners(actor.tenantId).length === 1) throw new ApiError(409, 'A tenant keeps at least one active owner');
  return modifyUser(accounts, userId, (current) => ({
    ...current,
    ...(change.name !== undefined ? { name: change.name } : {}),
    ...(change.role !== undefined ? { role: change.role } : {}),
    ...(change.active !== undefined ? { active: change.active } : {}),
    sessionVersion: change.active === false && current.active ? current.sessionVersion + 1 : current.sessionVersion,
  }));
}

/** Changes a stored user by compare-and-set: `change` runs on the stored record, again if another writer got in first. */
function modifyUser(accounts: AccountStore, userId: string, change: (current: User) => User): Promise<User> {
  return accounts.users.modify(userId, (current) => {
    if (!current) throw new ApiError(404, 'User not found');
    return { ...change(current), updatedAt: new Date().toISOString() };
  });
}

export class TenantUsers {
  readonly invitations: Collection<Invitation>;

  constructor(
    private readonly accounts: AccountStore,
    private readonly state: StateStore,
    log?: Logger,
  ) {
    this.invitations = new Collection(state, 'account_invitations', {
      createdAt: 'string', updatedAt: 'string', tenantId: 'string', email: 'string', role: 'string', tokenHash: 'string', expiresAt: 'string', invitedBy: 'string',
    }, log);
    state.expireAfter(USES, INVITATION_DAYS * 86_400_000);
  }

  start(): Promise<void> {
    return this.invitations.start();
  }

  stop(): void {
    this.invitations.stop();
  }

  /** The tenant's users, owners first, then by email. */
  list(tenantId: string): User[] {
    const rank: Record<Role, number> = { owner: 0, admin: 1, member: 2 };
    return this.accounts.users.filter((user) => user.tenantId === tenantId).sort((a, b) => rank[a.role] - rank[b.role] || a.email.localeCompare(b.email));
  }

  /** The tenant's invitations not yet accepted nor expired, newest first. */
  openInvitations(tenantId: string): Invitation[] {
    const now = Date.now();
    return this.invitations.filter((one) => one.tenantId === tenantId && Date.parse(one.expiresAt) > now).sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  }

  /**
   * Invites `email` with `role`: the token of the one-time link, shown once. 403 without the
   * rights over the role, 409 when the email has a user in the tenant or an open invitation, or
   * past MAX_OPEN_INVITATIONS.
   */
  async invite(actor: Manager & { userId: string }, input: { email: string; role: Role }): Promise<{ invitation: Invitation; token: string }> {
    requireRightsOver(actor, input.role);
    const email = input.email.trim().toLowerCase();
    if (this.accounts.userInTenant(actor.tenantId, email)) throw new ApiError(409, 'A user with this email already exists');
    const open = this.openInvitations(actor.tenantId);
    if (open.some((one) => one.email === email)) throw new ApiError(409, 'This email has an open invitation: revoke it first to send a new one');
    if (open.length >= MAX_OPEN_INVITATIONS) throw new ApiError(409, `A tenant may have at most ${MAX_OPEN_INVITATIONS} open invitations: revoke one first`);
    await this.sweep(actor.tenantId);
    const token = `inv_${randomBytes(24).toString('base64url')}`;
    const at = new Date();
    const invitation: Invitation = {
      id: newId('inv'), createdAt: at.toISOString(), updatedAt: at.toISOString(), tenantId: actor.tenantId, email, role: input.role,
      tokenHash: sha256Hex(token), expiresAt: new Date(at.getTime() + INVITATION_DAYS * 86_400_000).toISOString(), invitedBy: actor.userId,
    };
    await this.invitations.put(invitation);
    return { invitation, token };
  }

  /** Ends an open invitation of the tenant: its link stops working. 403 without the rights over its role. */
  async revoke(actor: Manager, invitationId: string): Promise<void> {
    const invitation = this.invitations.get(invitationId);
    if (!invitation || invitation.tenantId !== actor.tenantId) throw new ApiError(404, 'Invitation not found');
    requireRightsOver(actor, invitation.role);
    await this.invitations.delete(invitationId);
  }

  /** What an invitation's link is for (its page shows it), or 404 for a wrong, used or expired token. */
  pending(token: string): Invitation {
    // Compared as hashes of 192 random bits: how long a comparison takes tells nothing of a token.
    const hash = sha256Hex(token);
    const found = this.invitations.find((one) => one.tokenHash === hash);
    if (!found || Date.parse(found.expiresAt) <= Date.now()) throw new ApiError(404, 'This invitation is not valid any more: ask for a new one');
    return found;
  }

  /** Makes the invited user with the name and password they chose; once per invitation (404 after). */
  async accept(input: { token: string; name: string; password: string }): Promise<User> {
    const invitation = this.pending(input.token);
    if (this.accounts.userInTenant(invitation.tenantId, invitation.email)) throw new ApiError(409, 'A user with this email already exists: sign in');
    if (!(await this.state.create(USES, invitation.tokenHash, { usedAt: new Date().toISOString() }))) throw new ApiError(404, 'This invitation is not valid any more: ask for a new one');
    await this.invitations.delete(invitation.id);
    const user = await this.accounts.createUser(invitation.tenantId, { email: invitation.email, name: input.name, role: invitation.role, password: input.password, oneTime: false });
    if (!user) throw new ApiError(409, 'A user with this email already exists: sign in');
    return user;
  }

  /** changeUser() on this tenant's store. */
  change(actor: Manager, userId: string, change: { role?: Role; active?: boolean }): Promise<User> {
    return changeUser(this.accounts, actor, userId, change);
  }

  /** Sets a new password once the current one is given; every session of the user ends (a new one is issued by the caller). */
  async changePassword(user: User, input: { currentPassword: string; newPassword: string }): Promise<User> {
    if (!(await checkPassword(user, input.currentPassword))) throw new ApiError(403, 'The current password is wrong');
    const passwordHash = await hashPassword(input.newPassword);
    return modifyUser(this.accounts, user.id, (current) => ({ ...current, passwordHash, mustChangePassword: false, sessionVersion: current.sessionVersion + 1 }));
  }

  /** Ends every session of the user, wherever it is (their tokens carry the old session version). */
  signOutEverywhere(user: User): Promise<User> {
    return modifyUser(this.accounts, user.id, (current) => ({ ...current, sessionVersion: current.sessionVersion + 1 }));
  }

  /** Drops the tenant's expired invitations. */
  private async sweep(tenantId: string): Promise<void> {
    const now = Date.now();
    for (const one of this.invitations.filter((invitation) => invitation.tenantId === tenantId && Date.parse(invitation.expiresAt) <= now)) await this.invitations.delete(one.id);
  }
}
