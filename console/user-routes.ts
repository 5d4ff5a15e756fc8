/**
 * The tenant's users in the console (accounts/tenant-users.ts): the list for everyone; invitations
 * and changes of role or active for those who manage users, each within their rights over the
 * role concerned (an admin neither makes nor changes an owner).
 */
import type { Invitation, User } from '../accounts/index.ts';
import type { InvitationView, IssuedInvitation, UserRole, UserView } from './api.ts';
import type { Call, ConsoleHttpDeps, Route } from './route.ts';
import { validBody } from './schemas.ts';

export const userView = (user: User): UserView => ({ id: user.id, email: user.email, name: user.name, role: user.role, active: user.active, createdAt: user.createdAt });
const invitationView = (one: Invitation): InvitationView => ({ id: one.id, email: one.email, role: one.role, expiresAt: one.expiresAt, createdAt: one.createdAt });

/** The signed-in user as the one who acts. */
const actor = ({ session }: Call) => ({ tenantId: session.tenant.id, role: session.user.role, userId: session.user.id });

export function userRoutes({ users, consoleUrl }: ConsoleHttpDeps): Route[] {
  return [
    { method: 'GET', pattern: '/api/users', access: 'read', run: (call) => ({ users: users.list(call.session.tenant.id).map(userView) }) },
    { method: 'GET', pattern: '/api/users/invitations', access: 'manageUsers', run: (call) => ({ invitations: users.openInvitations(call.session.tenant.id).map(invitationView) }) },
    { method: 'POST', pattern: '/api/users/invitations', access: 'manageUsers', status: 201, run: async (call): Promise<IssuedInvitation> => {
      const input = validBody<{ email: string; role: UserRole }>('Invite', call.body);
      const { invitation, token } = await users.invite(actor(call), input);
      // In the fragment: it never reaches a server log, a proxy or a Referer.
      return { invitation: invitationView(invitation), link: `${consoleUrl()}/invite#token=${token}` };
    } },
    { method: 'DELETE', pattern: '/api/users/invitations/:id', access: 'manageUsers', status: 204, run: (call) => users.revoke(actor(call), call.params.id!) },
    { method: 'PUT', pattern: '/api/users/:id', access: 'manageUsers', run: async (call) => {
      const change = validBody<{ role?: UserRole; active?: boolean }>('ChangeUser', call.body);
      return userView(await users.change(actor(call), call.params.id!, change));
    } },
  ];
}
