/**
 * Who may call what: every route of the console API and the relay's admin API, walked as each
 * role of a tenant (and signed out). The policy is written here as docs/reference/relay.md states it, apart
 * from the routes' own table (accounts/rights.ts): members read, admins also change what the
 * tenant configures and its members and admins, owners also the tenant itself and its handover;
 * everyone signed in reaches their own session and password. A refused call is refused before
 * its path or body is looked at: 403 with the right's message, whatever the ids.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role } from '../accounts/model.ts';
import { consoleRouteList } from '../console/http.ts';
import { relayRouteList } from '../relay/http.ts';
import { ConsoleClient } from './console-client.ts';
import { startTestSluice, type TestSluice } from './harness.ts';

let app: TestSluice;
let tenantId: string;
const PASSWORD = 'correct horse battery staple';
const ROLES: Role[] = ['member', 'admin', 'owner'];
const RANK: Record<Role, number> = { member: 0, admin: 1, owner: 2 };
const emailOf = (role: Role) => `${role}@roles.test`;

/** Sign-in is limited per client: each sign-in comes from an address of its own (the proxy is trusted). */
let lastIp = 0;
const nextIp = () => `198.51.100.${(lastIp = (lastIp % 250) + 1)}`;

/** The least role a signed-in route needs, by the documented policy (docs/reference/relay.md, Admin API). */
function relayNeeds(method: string, pattern: string): Role {
  if (pattern.startsWith('/api/v1/admin/me') || pattern === '/api/v1/admin/session') return 'member';
  if (pattern.startsWith('/api/v1/admin/tenant/handover')) return 'owner';
  if (method === 'GET') return 'member';
  if (pattern.startsWith('/api/v1/admin/tenant')) return 'owner';
  return 'admin';
}

function consoleNeeds(method: string, pattern: string): Role {
  if (pattern.startsWith('/api/users/invitations')) return 'admin';
  if (method === 'GET' || pattern.startsWith('/api/query/') || pattern === '/api/session' || pattern.startsWith('/api/me/')) return 'member';
  return 'admin';
}

type Walker = Role | 'signed out';

/**
 * One answer of the walk against the policy: a line naming the route when it is not what the
 * policy says (a 401 signed out; allowed at or above the role the route needs; 403 below it,
 * with the right's message).
 */
async function judge(role: Walker, needs: Role, route: string, response: Response): Promise<string | undefined> {
  const body = response.status === 204 ? undefined : await response.json() as { message: string };
  const expected = role === 'signed out' ? '401' : RANK[role] >= RANK[needs] ? 'allowed' : '403';
  const got = response.status === 401 ? '401' : response.status === 403 ? '403' : 'allowed';
  if (got === '403') expect(body!.message).toBe(needs === 'owner' ? 'Only an owner may do this' : 'Members have read-only access');
  return got === expected ? undefined : `${route}: ${response.status} ${body?.message ?? ''}, expected ${expected}`;
}

const concrete = (pattern: string) => pattern.replace(/:(\w+)/g, (_m, name: string) => `${name}_0000`);

beforeAll(async () => {
  app = await startTestSluice({ 'console.enabled': true, 'console.port': 0, 'limits.trustedProxies': ['127.0.0.1'] });
  const onboarded = await app.relay!.admin.tenants.onboard({ name: 'Roles Co', owner: { email: emailOf('owner'), password: PASSWORD } }) as { tenant: { id: string } };
  tenantId = onboarded.tenant.id;
  for (const role of ['member', 'admin'] as const) {
    await app.relay!.admin.users.create({ tenantId, role: 'operator' }, { email: emailOf(role), name: role, role, password: PASSWORD });
  }
}, 60_000);
afterAll(async () => app?.stop());

describe('relay admin API, route by role', () => {
  const base = () => `http://127.0.0.1:${app.relay!.port}`;
  const signIn = async (role: Role) => {
    const response = await fetch(`${base()}/api/v1/admin/login`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': nextIp() }, body: JSON.stringify({ email: emailOf(role), password: PASSWORD }),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { token: string }).token;
  };
  const signedIn = relayRouteList().filter((route) => !['public', 'signin', 'operator'].includes(route.access));

  it('lists the routes the policy covers', () => {
    expect(signedIn.length).toBeGreaterThan(40);
    expect(signedIn.map((r) => `${r.method} ${r.pattern}`)).toEqual(expect.arrayContaining([
      'DELETE /api/v1/admin/session', 'GET /api/v1/admin/tenant/handover', 'DELETE /api/v1/admin/tenant/handover/:claimId', 'GET /api/v1/admin/inbox',
    ]));
  });

  it.each<Walker>([...ROLES, 'signed out'])('as %s', async (role) => {
    const token = role === 'signed out' ? undefined : await signIn(role);
    const outcomes: string[] = [];
    for (const { method, pattern } of signedIn) {
      // Signing out ends the session the walk goes on with: it gets one of its own.
      const bearer = token && method === 'DELETE' && pattern === '/api/v1/admin/session' ? await signIn(role as Role) : token;
      const response = await fetch(base() + concrete(pattern), {
        method,
        headers: { 'content-type': 'application/json', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
        ...(['POST', 'PUT', 'PATCH'].includes(method) ? { body: '{}' } : {}),
      });
      const wrong = await judge(role, relayNeeds(method, pattern), `${method} ${pattern}`, response);
      if (wrong) outcomes.push(wrong);
    }
    expect(outcomes).toEqual([]);
  }, 60_000);
});

describe('console API, route by role', () => {
  const routes = consoleRouteList().filter((route) => route.access !== 'open');
  const client = async (role: Role) => {
    const signed = new ConsoleClient(app.console!.url);
    const response = await signed.call('/api/session', { method: 'POST', body: { email: emailOf(role), password: PASSWORD }, headers: { 'x-forwarded-for': nextIp() } });
    expect(response.status).toBe(200);
    signed.cookie = (response.headers.get('set-cookie') ?? '').split(';')[0]!;
    signed.csrfToken = ((await response.json()) as { csrfToken: string }).csrfToken;
    return signed;
  };

  it('lists the routes the policy covers', () => {
    expect(routes.map((r) => `${r.method} ${r.pattern}`)).toEqual(expect.arrayContaining([
      'POST /api/dashboards', 'PUT /api/dashboards/:id', 'DELETE /api/dashboards/:id', 'POST /api/sources', 'GET /api/inbox',
      'GET /api/users', 'POST /api/users/invitations', 'PUT /api/users/:id', 'POST /api/me/password', 'POST /api/me/sign-out-everywhere',
    ]));
  });

  it.each<Walker>([...ROLES, 'signed out'])('as %s', async (role) => {
    const signed = role === 'signed out' ? new ConsoleClient(app.console!.url) : await client(role);
    const outcomes: string[] = [];
    // Signing out everywhere ends every session of the user: it is walked last.
    const everywhere = (route: { pattern: string }) => route.pattern === '/api/me/sign-out-everywhere';
    for (const { method, pattern } of [...routes.filter((route) => !everywhere(route)), ...routes.filter(everywhere)]) {
      // Signing out ends the session the walk goes on with: it gets one of its own.
      const caller = role !== 'signed out' && method === 'DELETE' && pattern === '/api/session' ? await client(role) : signed;
      const response = await caller.call(concrete(pattern), { method, ...(method === 'POST' || method === 'PUT' ? { body: {} } : {}) });
      const wrong = await judge(role, consoleNeeds(method, pattern), `${method} ${pattern}`, response);
      if (wrong) outcomes.push(wrong);
    }
    expect(outcomes).toEqual([]);
  }, 60_000);
});
