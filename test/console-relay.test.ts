/**
 * The relay's admin in the console API (`/api/relay/…`): the relay's own routes and rights, as
 * the console's signed-in user, behind the console's own guards (its Origin, the session cookie,
 * the CSRF token). An owner configures a form entirely through it; a member reads it and changes
 * nothing; another tenant sees none of it; sign-in, onboarding and one's own password are not
 * reachable through it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleClient } from './console-client.ts';
import { startTestSluice, type TestSluice } from './harness.ts';

const OWNER = { name: 'Ada', email: 'ada@relay-console.test', password: 'correct horse battery staple' };
const PASSWORD = 'a long password for tests';
let app: TestSluice;
let owner: ConsoleClient;

beforeAll(async () => {
  app = await startTestSluice({ 'console.enabled': true, 'console.port': 0 });
  owner = new ConsoleClient(app.console!.url);
  await owner.firstRun(app.console!.firstRunLink!, OWNER);
}, 60_000);
afterAll(async () => app?.stop());

describe('the relay admin through the console', () => {
  let site: any;
  let form: any;

  it('an owner makes a site, a form, a recipient and a webhook, and rotates its secret', async () => {
    site = await owner.json<any>('/api/relay/sites', { method: 'POST', body: { name: 'Marketing', allowedOrigins: ['https://www.example.com'] } });
    expect(site).toMatchObject({ name: 'Marketing', allowedOrigins: ['https://www.example.com'], tenantId: 'ten_default' });
    form = await owner.json<any>(`/api/relay/sites/${site.id}/forms`, { method: 'POST', body: { name: 'Contact', formKey: 'contact' } });
    await owner.json(`/api/relay/sites/${site.id}/forms/${form.id}/recipients`, { method: 'POST', body: { channel: 'email', address: 'sales@example.com' } });
    const hook = await owner.json<any>(`/api/relay/sites/${site.id}/forms/${form.id}/webhooks`, { method: 'POST', body: { url: 'https://hooks.example.com/in' } });
    expect(hook.secret).toMatch(/^whsec_/);
    const rotated = await owner.json<any>(`/api/relay/sites/${site.id}/forms/${form.id}/webhooks/${hook.id}`, { method: 'PATCH', body: { rotateSecret: true } });
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(hook.secret);
    const read = await owner.json<any>(`/api/relay/sites/${site.id}/forms/${form.id}`);
    expect(read.recipients).toEqual([expect.objectContaining({ channel: 'email', address: 'sales@example.com', active: true })]);
    expect(JSON.stringify(read)).not.toContain(rotated.secret);
    expect((await owner.json<any>(`/api/relay/sites/${site.id}/forms/${form.id}/jobs?limit=10`)).jobs).toEqual([]);
  });

  it("keeps the console's guards: no session 401, no CSRF token 403, another origin 403", async () => {
    const path = `/api/relay/sites/${site.id}/forms`;
    expect((await new ConsoleClient(app.console!.url).call(path)).status).toBe(401);
    expect((await owner.call(path, { method: 'POST', body: { name: 'x', formKey: 'x' }, headers: { 'x-csrf-token': undefined } })).status).toBe(403);
    expect((await owner.call(path, { headers: { origin: 'https://evil.example' } })).status).toBe(403);
  });

  it('a member reads and changes nothing; another tenant sees none of it; session routes are not bridged', async () => {
    await app.relay!.admin.users.create({ tenantId: 'ten_default', role: 'owner' }, { email: 'mo@relay-console.test', name: 'Mo', role: 'member', password: PASSWORD });
    const member = new ConsoleClient(app.console!.url);
    await member.signIn('mo@relay-console.test', PASSWORD);
    expect((await member.json<any[]>('/api/relay/sites')).map((one) => one.id)).toContain(site.id);
    const refused = await member.call(`/api/relay/sites/${site.id}/forms/${form.id}`, { method: 'PATCH', body: { active: false } });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ message: 'Members have read-only access' });

    await app.relay!.admin.tenants.onboard({ name: 'Other Co', owner: { email: 'bob@other.test', password: PASSWORD } });
    const other = new ConsoleClient(app.console!.url);
    await other.signIn('bob@other.test', PASSWORD);
    expect(await other.json('/api/relay/sites')).toEqual([]);
    expect((await other.call(`/api/relay/sites/${site.id}/forms/${form.id}`)).status).toBe(404);

    for (const [method, path] of [['POST', '/api/relay/login'], ['POST', '/api/relay/tenants'], ['GET', '/api/relay/me'], ['POST', '/api/relay/me/password'], ['DELETE', '/api/relay/session']] as const) {
      expect((await owner.call(path, { method, ...(method === 'POST' ? { body: {} } : {}) })).status, `${method} ${path}`).toBe(404);
    }
  });
});
