/**
 * The console API against a whole `sluice serve`: who may call it (the console's own origin,
 * a session, the CSRF token on writes), what a session is (sign-in, the first owner's link,
 * sign-out ending it everywhere), and that a tenant sees only its own things: another tenant's
 * ids answer 404 and filters are data, never SQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogPage, LogSummary, Me, SourceView } from '../console/api.ts';
import { ConsoleClient } from './console-client.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';

let app: TestSluice;
let owner: ConsoleClient;
let other: ConsoleClient;
const PASSWORD = 'correct horse battery staple';

/** An OTLP/JSON log record with `body`, sent with the harness source's key. */
async function sendLog(body: string, service = 'checkout'): Promise<void> {
  const now = `${BigInt(Date.now()) * 1_000_000n}`;
  const payload = {
    resourceLogs: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
      scopeLogs: [{ logRecords: [{ timeUnixNano: now, severityNumber: 17, severityText: 'ERROR', body: { stringValue: body }, attributes: [{ key: 'order.id', value: { stringValue: "o'1" } }] }] }],
    }],
  };
  const response = await fetch(`${app.baseUrl}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': app.apiKey }, body: JSON.stringify(payload) });
  expect(response.status).toBe(200);
}

beforeAll(async () => {
  app = await startTestSluice({ 'console.enabled': true, 'console.port': 0 });
  owner = new ConsoleClient(app.console!.url);
  await owner.firstRun(app.console!.firstRunLink!, { name: 'Ada', email: 'ada@example.com', password: PASSWORD });
  // A second tenant, onboarded through the relay: the same accounts.
  await app.relay!.admin.tenants.onboard({ name: 'Other Co', owner: { email: 'bob@other.example', password: PASSWORD } });
  other = new ConsoleClient(app.console!.url);
  await other.signIn('bob@other.example', PASSWORD);
}, 60_000);
afterAll(async () => app?.stop());

describe('first sign-in and sessions', () => {
  it('the one-time link made the owner of the default tenant, which owns the sources made before', async () => {
    const me = await owner.json<Me>('/api/me');
    expect(me.user).toMatchObject({ email: 'ada@example.com', role: 'owner' });
    expect(me.tenant.id).toBe('ten_default');
    const { sources } = await owner.json<{ sources: SourceView[] }>('/api/sources');
    expect(sources.map((s) => s.id)).toContain(app.sourceId);
  });

  it('the link works once', async () => {
    const again = new ConsoleClient(app.console!.url);
    await expect(again.firstRun(app.console!.firstRunLink!, { name: 'Eve', email: 'eve@example.com', password: PASSWORD })).rejects.toThrow(/^404 .*not valid/);
  });

  it('gives an HttpOnly, SameSite=Strict cookie and one answer for a wrong password and an unknown email', async () => {
    const response = await new ConsoleClient(app.console!.url).call('/api/session', { method: 'POST', body: { email: 'ada@example.com', password: PASSWORD } });
    expect(response.status).toBe(200);
    expect(response.headers.get('set-cookie')).toMatch(/^sluice_session=[^;]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/);
    const wrong = await new ConsoleClient(app.console!.url).call('/api/session', { method: 'POST', body: { email: 'ada@example.com', password: 'not the password' } });
    const unknown = await new ConsoleClient(app.console!.url).call('/api/session', { method: 'POST', body: { email: 'nobody@example.com', password: PASSWORD } });
    expect([wrong.status, unknown.status]).toEqual([401, 401]);
    expect(await wrong.json()).toEqual(await unknown.json());
  });

  it('a one-time password signs in only once it was changed', async () => {
    const { oneTimePassword } = await app.relay!.admin.tenants.onboard({ name: 'Third Co', owner: { email: 'carol@third.example' } }) as { oneTimePassword: string };
    const refused = await new ConsoleClient(app.console!.url).call('/api/session', { method: 'POST', body: { email: 'carol@third.example', password: oneTimePassword } });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('set-cookie')).toBeNull();
  });

  it('a console cookie is no bearer token of the relay admin API', async () => {
    const token = owner.cookie.split('=')[1];
    const response = await fetch(`http://127.0.0.1:${app.relay!.port}/api/v1/admin/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(response.status).toBe(401);
  });

  it('sign-out ends the session: the same cookie is refused afterwards', async () => {
    const client = new ConsoleClient(app.console!.url);
    await client.signIn('ada@example.com', PASSWORD);
    const cookie = client.cookie;
    expect((await client.call('/api/session', { method: 'DELETE' })).status).toBe(204);
    const replayed = await client.call('/api/me', { headers: { cookie } });
    expect(replayed.status).toBe(401);
  });
});

describe('only the console itself may call', () => {
  it('refuses another Origin, and a call with neither Origin nor Sec-Fetch-Site', async () => {
    for (const origin of ['https://evil.example', 'null', `${owner.origin}.evil.example`]) {
      const response = await owner.call('/api/me', { headers: { origin } });
      expect(response.status).toBe(403);
      expect(await response.json()).toMatchObject({ message: 'Cross-origin requests are refused' });
    }
    expect((await owner.call('/api/me', { headers: { origin: undefined } })).status).toBe(403);
    expect((await owner.call('/api/me', { headers: { origin: undefined, 'sec-fetch-site': 'same-origin' } })).status).toBe(200);
    expect((await owner.call('/api/me', { headers: { origin: undefined, 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
  });

  it('refuses a write without the session\'s CSRF token', async () => {
    const missing = await owner.call('/api/sources', { method: 'POST', body: { name: 'web' }, headers: { 'x-csrf-token': undefined } });
    expect(missing.status).toBe(403);
    const wrong = await owner.call('/api/sources', { method: 'POST', body: { name: 'web' }, headers: { 'x-csrf-token': other.csrfToken } });
    expect(wrong.status).toBe(403);
    const right = await owner.call('/api/sources', { method: 'POST', body: { name: 'web' } });
    expect(right.status).toBe(201);
  });

  it('answers 401 without a session and 429 past the sign-in rate', async () => {
    expect((await new ConsoleClient(app.console!.url).call('/api/sources')).status).toBe(401);
    const statuses: number[] = [];
    for (let i = 0; i < 14; i++) {
      statuses.push((await new ConsoleClient(app.console!.url).call('/api/session', { method: 'POST', body: { email: 'x@example.com', password: 'guess' } })).status);
    }
    expect(statuses).toContain(429);
  });

  it('serves the app with a strict CSP on every path but the API', async () => {
    for (const path of ['/', '/logs', '/traces/0123']) {
      const response = await fetch(app.console!.url + path);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-security-policy')).toContain("default-src 'self'");
      expect(await response.text()).toContain('<!doctype html>');
    }
    expect((await fetch(`${app.console!.url}/assets/none.js`)).status).toBe(404);
  });
});

describe('a tenant sees only its own', () => {
  it("another tenant's source, key and dashboard ids answer 404", async () => {
    const { sources } = await owner.json<{ sources: SourceView[] }>('/api/sources');
    const source = sources.find((s) => s.id === app.sourceId)!;
    const keyId = source.keys[0]!.id;
    expect((await other.call(`/api/sources/${source.id}/keys`, { method: 'POST', body: {} })).status).toBe(404);
    expect((await other.call(`/api/sources/${source.id}/keys/${keyId}/revoke`, { method: 'POST' })).status).toBe(404);
    expect((await other.call(`/api/sources/${source.id}/install-tokens`, { method: 'POST' })).status).toBe(404);
    const own = await other.json<{ sources: SourceView[] }>('/api/sources');
    expect(own.sources).toEqual([]);

    const dashboard = await owner.json<{ id: string }>('/api/dashboards', { method: 'POST', body: { name: 'Checkout', charts: [] } });
    expect((await other.call(`/api/dashboards/${dashboard.id}`)).status).toBe(404);
    expect((await other.call(`/api/dashboards/${dashboard.id}`, { method: 'PUT', body: { name: 'taken', charts: [] } })).status).toBe(404);
    expect((await other.call(`/api/dashboards/${dashboard.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await owner.json<{ name: string }>(`/api/dashboards/${dashboard.id}`)).name).toBe('Checkout');
  });

  it("keeps a dashboard chart's width, half or full, and refuses another", async () => {
    const query = { name: 'http.server.duration', kind: 'histogram', aggregation: 'p95' };
    const made = await owner.json<{ id: string }>('/api/dashboards', { method: 'POST', body: { name: 'Widths', charts: [{ title: 'p95', query, width: 'full' }, { title: 'p95 again', query }] } });
    const read = await owner.json<{ charts: Array<{ width?: string }> }>(`/api/dashboards/${made.id}`);
    expect(read.charts.map((chart) => chart.width)).toEqual(['full', undefined]);
    const wrong = await owner.call(`/api/dashboards/${made.id}`, { method: 'PUT', body: { name: 'Widths', charts: [{ title: 'p95', query, width: 'huge' }] } });
    expect(wrong.status).toBe(400);
  });

  it("caps a source's install tokens and keys with a 409 saying what to do; a full source still rotates a key", async () => {
    const { source } = await owner.json<{ source: SourceView }>('/api/sources', { method: 'POST', body: { name: 'capped' } });
    for (let i = 0; i < 10; i++) expect((await owner.call(`/api/sources/${source.id}/install-tokens`, { method: 'POST' })).status).toBe(201);
    const tokens = await owner.call(`/api/sources/${source.id}/install-tokens`, { method: 'POST' });
    expect(tokens.status).toBe(409);
    expect((await tokens.json()).message).toMatch(/at most 10 install tokens/);
    // Each token holds a key: 1 + 10 so far, of 20.
    for (let i = 0; i < 9; i++) expect((await owner.call(`/api/sources/${source.id}/keys`, { method: 'POST', body: {} })).status).toBe(201);
    const keys = await owner.call(`/api/sources/${source.id}/keys`, { method: 'POST', body: {} });
    expect(keys.status).toBe(409);
    expect(await keys.json()).toEqual({ statusCode: 409, message: 'A source may have at most 20 active API keys, and this one has 20: revoke one first' });
    const rotated = await owner.call(`/api/sources/${source.id}/keys`, { method: 'POST', body: { revokeKeyId: source.keys[0]!.id } });
    expect(rotated.status).toBe(201);
    const { sources } = await owner.json<{ sources: SourceView[] }>('/api/sources');
    expect(sources.find((s) => s.id === source.id)!.keys.filter((k) => k.revokedAt === undefined)).toHaveLength(20);
  });

  it("reads never show another tenant's rows, and filters with SQL in them are data", async () => {
    await sendLog("payment declined: card's limit");
    const range = () => ({ from: Date.now() - 3_600_000, to: Date.now() + 60_000 });
    const page = await eventually(async () => {
      const found = await owner.json<LogPage>('/api/query/logs', { method: 'POST', body: { ...range(), text: "card's limit" } });
      return found.logs.length > 0 ? found : undefined;
    }, 20_000, 200);
    expect(page.logs[0]).toMatchObject({ body: "payment declined: card's limit", service: 'checkout', kind: 'otlp' });
    expect((await other.json<LogPage>('/api/query/logs', { method: 'POST', body: range() })).logs).toEqual([]);
    const summary = await owner.json<LogSummary>('/api/query/log-summary', { method: 'POST', body: { ...range(), text: "card's limit" } });
    expect(summary).toMatchObject({ total: 1, facets: { services: [{ value: 'checkout', count: 1 }] } });
    expect((await other.json<LogSummary>('/api/query/log-summary', { method: 'POST', body: range() })).total).toBe(0);
    for (const text of ["') OR 1=1 --", "' OR '1'='1", '\\', '{text:String}', '%', '_']) {
      const found = await owner.json<LogPage>('/api/query/logs', { method: 'POST', body: { ...range(), text } });
      expect(found.logs.every((log) => log.body.toLowerCase().includes(text.toLowerCase()))).toBe(true);
    }
    const attribute = await owner.json<LogPage>('/api/query/logs', { method: 'POST', body: { ...range(), attributes: [{ key: 'order.id', value: "o'1" }] } });
    expect(attribute.logs.length).toBeGreaterThan(0);
    const injected = await owner.json<LogPage>('/api/query/logs', { method: 'POST', body: { ...range(), attributes: [{ key: "order.id'] OR 1=1 --", value: 'x' }] } });
    expect(injected.logs).toEqual([]);
    expect((await other.call('/api/traces/0123456789abcdef0123456789abcdef')).status).toBe(404);
  });

  it('refuses a malformed query with 400 naming the problem', async () => {
    const response = await owner.call('/api/query/logs', { method: 'POST', body: { from: 'yesterday', to: Date.now() } });
    expect(response.status).toBe(400);
    expect((await response.json() as { message: string }).message).toMatch(/from/);
  });
});
