/**
 * Users in the console API: an owner invites by a one-time link, the invited person accepts it
 * once with a password of their choosing and is signed in; roles are enforced on every change (an
 * admin neither makes nor changes an owner, a member changes nothing, a tenant keeps an owner);
 * a deactivated user's session stops working; a new password and "sign out everywhere" end the
 * user's other sessions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InvitationOffer, IssuedInvitation, Me, UserView } from '../console/api.ts';
import { ConsoleClient } from './console-client.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';

const OWNER = { name: 'Ada', email: 'ada@users.test', password: 'correct horse battery staple' };
const PASSWORD = 'a long password for tests';
let app: TestSluice;
let owner: ConsoleClient;

/** The open routes are limited per client: each call comes from an address of its own (the proxy is trusted). */
let lastIp = 0;
const fresh = () => ({ 'x-forwarded-for': `198.51.100.${(lastIp = (lastIp % 250) + 1)}` });

beforeAll(async () => {
  app = await startTestSluice({ 'console.enabled': true, 'console.port': 0, 'limits.trustedProxies': ['127.0.0.1'] });
  owner = new ConsoleClient(app.console!.url);
  await owner.firstRun(app.console!.firstRunLink!, OWNER);
}, 60_000);
afterAll(async () => app?.stop());

const tokenOf = (link: string) => new URL(link).hash.replace(/^#token=/, '');

/** Invites `email` as `role` through `by` and accepts the link: the new user's signed-in client. */
async function invited(by: ConsoleClient, email: string, role: UserView['role']): Promise<ConsoleClient> {
  const { link } = await by.json<IssuedInvitation>('/api/users/invitations', { method: 'POST', body: { email, role } });
  const client = new ConsoleClient(app.console!.url);
  await client.acceptInvitation(link, { name: email.split('@')[0]!, password: PASSWORD }, fresh());
  return client;
}

async function signedIn(email: string, password = PASSWORD): Promise<ConsoleClient> {
  const client = new ConsoleClient(app.console!.url);
  await client.signIn(email, password, fresh());
  return client;
}

const users = async () => (await owner.json<{ users: UserView[] }>('/api/users')).users;
const idOf = async (email: string) => (await users()).find((user) => user.email === email)!.id;

describe('invitations', () => {
  it('a link shows what it is for, signs the invited user in once, and works no more', async () => {
    const issued = await owner.json<IssuedInvitation>('/api/users/invitations', { method: 'POST', body: { email: 'Grace@Users.test', role: 'admin' } });
    expect(issued.invitation).toMatchObject({ email: 'grace@users.test', role: 'admin' });
    expect(issued.link).toMatch(new RegExp(`^${app.console!.url}/invite#token=inv_[A-Za-z0-9_-]{32}$`));
    expect((await owner.json<{ invitations: unknown[] }>('/api/users/invitations')).invitations).toEqual([issued.invitation]);
    const token = tokenOf(issued.link);
    const visitor = new ConsoleClient(app.console!.url);
    expect(await visitor.json<InvitationOffer>('/api/invitation', { method: 'POST', body: { token }, headers: fresh() })).toEqual({ email: 'grace@users.test', role: 'admin', tenant: 'Default' });
    const me = await visitor.acceptInvitation(issued.link, { name: 'Grace', password: PASSWORD }, fresh());
    expect(me.user).toMatchObject({ email: 'grace@users.test', name: 'Grace', role: 'admin' });
    expect((await visitor.call('/api/me')).status).toBe(200);
    // Once: the link is spent, and the invitation gone from the list.
    const again = await new ConsoleClient(app.console!.url).call('/api/invitation/accept', { method: 'POST', body: { token, name: 'Mallory', password: PASSWORD }, headers: fresh() });
    expect(again.status).toBe(404);
    expect((await new ConsoleClient(app.console!.url).call('/api/invitation', { method: 'POST', body: { token }, headers: fresh() })).status).toBe(404);
    expect((await owner.json<{ invitations: unknown[] }>('/api/users/invitations')).invitations).toEqual([]);
    await signedIn('grace@users.test');
  });

  it('refuses a second invitation or one for a user who exists; a revoked link works no more', async () => {
    const first = await owner.json<IssuedInvitation>('/api/users/invitations', { method: 'POST', body: { email: 'linus@users.test', role: 'member' } });
    expect((await owner.call('/api/users/invitations', { method: 'POST', body: { email: 'linus@users.test', role: 'admin' } })).status).toBe(409);
    expect((await owner.call('/api/users/invitations', { method: 'POST', body: { email: OWNER.email, role: 'member' } })).status).toBe(409);
    expect((await owner.call(`/api/users/invitations/${first.invitation.id}`, { method: 'DELETE' })).status).toBe(204);
    const accept = await new ConsoleClient(app.console!.url).call('/api/invitation/accept', { method: 'POST', body: { token: tokenOf(first.link), name: 'Linus', password: PASSWORD }, headers: fresh() });
    expect(accept.status).toBe(404);
    expect((await owner.call('/api/users/invitations', { method: 'POST', body: { email: 'not an email', role: 'member' } })).status).toBe(400);
  });
});

describe('roles', () => {
  it('an admin invites and changes members and admins, never an owner; a member changes no one', async () => {
    const admin = await invited(owner, 'ken@users.test', 'admin');
    const refused = await admin.call('/api/users/invitations', { method: 'POST', body: { email: 'boss@users.test', role: 'owner' } });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ message: 'Only an owner may do this' });
    const member = await invited(admin, 'dennis@users.test', 'member');
    const memberId = await idOf('dennis@users.test');
    expect((await admin.call(`/api/users/${await idOf(OWNER.email)}`, { method: 'PUT', body: { active: false } })).status).toBe(403);
    expect((await admin.call(`/api/users/${memberId}`, { method: 'PUT', body: { role: 'owner' } })).status).toBe(403);
    expect((await member.call('/api/users/invitations', { method: 'POST', body: { email: 'x@users.test', role: 'member' } })).status).toBe(403);
    expect((await member.call(`/api/users/${memberId}`, { method: 'PUT', body: { role: 'admin' } })).status).toBe(403);
    expect((await member.call('/api/users/invitations')).status).toBe(403);
    // Members see who is in the tenant.
    expect((await member.json<{ users: UserView[] }>('/api/users')).users.map((user) => user.email)).toContain(OWNER.email);
    const promoted = await admin.json<UserView>(`/api/users/${memberId}`, { method: 'PUT', body: { role: 'admin' } });
    expect(promoted.role).toBe('admin');
  });

  it('keeps the tenant\'s last active owner, and tells another tenant\'s user from none', async () => {
    const ownerId = await idOf(OWNER.email);
    const last = await owner.call(`/api/users/${ownerId}`, { method: 'PUT', body: { role: 'admin' } });
    expect(last.status).toBe(409);
    expect(await last.json()).toMatchObject({ message: 'A tenant keeps at least one active owner' });
    await app.relay!.admin.tenants.onboard({ name: 'Other Co', owner: { email: 'bob@other.test', password: PASSWORD } });
    const otherId = (await (await signedIn('bob@other.test')).json<{ users: UserView[] }>('/api/users')).users[0]!.id;
    expect((await owner.call(`/api/users/${otherId}`, { method: 'PUT', body: { active: false } })).status).toBe(404);
  });

  it('a deactivated user\'s session stops working, and they cannot sign in', async () => {
    const member = await invited(owner, 'barbara@users.test', 'member');
    await owner.json(`/api/users/${await idOf('barbara@users.test')}`, { method: 'PUT', body: { active: false } });
    await eventually(async () => (await member.call('/api/me')).status === 401, 10_000, 100);
    expect((await new ConsoleClient(app.console!.url).call('/api/session', { method: 'POST', body: { email: 'barbara@users.test', password: PASSWORD }, headers: fresh() })).status).toBe(401);
  });
});

describe('one\'s own account', () => {
  it('a new password needs the current one and ends every other session; this one goes on', async () => {
    const here = await invited(owner, 'margaret@users.test', 'member');
    const elsewhere = await signedIn('margaret@users.test');
    const wrong = await here.call('/api/me/password', { method: 'POST', body: { currentPassword: 'not it at all', newPassword: 'another long password' } });
    expect(wrong.status).toBe(403);
    const changed = await here.call('/api/me/password', { method: 'POST', body: { currentPassword: PASSWORD, newPassword: 'another long password' } });
    expect(changed.status).toBe(200);
    await here.adopt(changed);
    expect((await here.call('/api/me')).status).toBe(200);
    await eventually(async () => (await elsewhere.call('/api/me')).status === 401, 10_000, 100);
    await signedIn('margaret@users.test', 'another long password');
    expect((await here.call('/api/me/password', { method: 'POST', body: { currentPassword: 'another long password', newPassword: 'short' } })).status).toBe(400);
  });

  it('signing out everywhere ends every session of the user', async () => {
    const one = await invited(owner, 'frances@users.test', 'member');
    const two = await signedIn('frances@users.test');
    expect((await one.call('/api/me/sign-out-everywhere', { method: 'POST' })).status).toBe(204);
    await eventually(async () => (await one.call('/api/me')).status === 401 && (await two.call('/api/me')).status === 401, 10_000, 100);
    await signedIn('frances@users.test');
  });
});
