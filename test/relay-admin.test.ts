/**
 * The relay's admin API on a running `sluice serve`: each resource's create, read, update and
 * deactivate; validation; sessions and roles; tenant isolation; secrets never shown or logged;
 * API keys hashed and revocable; the handover claim.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServe, type RunningSluice } from '../bin/app.ts';
import { createLogger } from '../core/log.ts';
import { sha256Hex } from '../core/hash.ts';
import { testConfig } from './harness.ts';
import { hostileSmtpUrls } from './hostile-destinations.ts';
import { fieldsBombPreview, fieldsOf } from './relay-fixture.ts';

const OPERATOR_TOKEN = `op_${randomBytes(16).toString('hex')}`;
const CAPTCHA_SECRET = `captcha-secret-${randomBytes(8).toString('hex')}`;
let app: RunningSluice;
let dataDir: string;
let base: string;
const logged: string[] = [];

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-relay-'));
  // Sign-in attempts are limited per client IP: each test signs in from an address of its own.
  const config = testConfig(dataDir, {
    'relay.operatorToken': OPERATOR_TOKEN,
    'limits.trustedProxies': ['127.0.0.1'],
    'delivery.smtpFromDomains': ['verified.test'],
    logLevel: 'trace',
  });
  const sink = new Writable({ write(chunk, _encoding, done) { logged.push(String(chunk)); done(); } });
  app = await startServe(config, createLogger('trace', sink));
  base = `http://127.0.0.1:${app.relay!.port}/api/v1`;
});
afterAll(async () => {
  await app?.shutdown();
  await rm(dataDir, { recursive: true, force: true });
});

const randomIp = () => `198.51.100.${1 + Math.floor(Math.random() * 250)}`;

async function call(method: string, path: string, options: { token?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const response = await fetch(base + path, {
    method,
    headers: {
      'x-forwarded-for': randomIp(),
      ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...options.headers,
    },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, text, headers: response.headers };
}

interface Account { tenantId: string; userId: string; token: string; email: string }

/** Onboards a tenant over HTTP and signs its owner in with a password of their own. */
async function onboard(name: string): Promise<Account> {
  const email = `owner-${randomBytes(4).toString('hex')}@${name.toLowerCase().replace(/\W/g, '')}.test`;
  const created = await call('POST', '/admin/tenants', { body: { name, owner: { email } }, headers: { 'x-operator-token': OPERATOR_TOKEN } });
  expect(created.status).toBe(201);
  const login = await call('POST', '/admin/login', { body: { email, password: created.body.oneTimePassword } });
  expect(login.status).toBe(200);
  const changed = await call('POST', '/admin/me/password', { token: login.body.token, body: { currentPassword: created.body.oneTimePassword, newPassword: 'a long new password' } });
  expect(changed.status).toBe(200);
  return { tenantId: created.body.tenant.id, userId: created.body.owner.id, token: changed.body.token, email };
}

function expectValidation(result: { status: number; body: { message: string; field: string } }, field: string) {
  expect(result.status).toBe(400);
  expect(result.body.message).toMatch(new RegExp(`^Validation failed: ${field.replace(/[.[\]]/g, '\\$&')} `));
  expect(result.body.field).toBe(field);
}

describe('onboarding and sessions', () => {
  it('onboards only with the operator token, and the one-time password only allows changing it', async () => {
    expect((await call('POST', '/admin/tenants', { body: { name: 'x', owner: { email: 'a@b.test' } } })).status).toBe(401);
    expect((await call('POST', '/admin/tenants', { body: { name: 'x', owner: { email: 'a@b.test' } }, headers: { 'x-operator-token': 'op_wrong' } })).status).toBe(401);
    const created = await call('POST', '/admin/tenants', { body: { name: 'First', owner: { email: 'First.Owner@first.test' } }, headers: { 'x-operator-token': OPERATOR_TOKEN } });
    expect(created.status).toBe(201);
    expect(created.body.owner).toMatchObject({ email: 'first.owner@first.test', role: 'owner', mustChangePassword: true });
    expect(created.body.owner.passwordHash).toBeUndefined();
    const login = await call('POST', '/admin/login', { body: { email: 'first.owner@first.test', password: created.body.oneTimePassword } });
    expect(login.status).toBe(200);
    const blocked = await call('GET', '/admin/sites', { token: login.body.token });
    expect(blocked.status).toBe(403);
    expect(blocked.body.message).toMatch(/^Password change required/);
    expect((await call('GET', '/admin/me', { token: login.body.token })).status).toBe(200);
    const weak = await call('POST', '/admin/me/password', { token: login.body.token, body: { currentPassword: created.body.oneTimePassword, newPassword: 'short' } });
    expectValidation(weak, 'newPassword');
    const changed = await call('POST', '/admin/me/password', { token: login.body.token, body: { currentPassword: created.body.oneTimePassword, newPassword: 'a much better password' } });
    expect(changed.status).toBe(200);
    expect((await call('GET', '/admin/sites', { token: changed.body.token })).status).toBe(200);
    // The password change ended the older session.
    expect((await call('GET', '/admin/me', { token: login.body.token })).status).toBe(401);
    expect((await call('POST', '/admin/login', { body: { email: 'first.owner@first.test', password: created.body.oneTimePassword } })).status).toBe(401);
  });

  it('refuses a wrong password and an unknown email alike, and signs in by the new password', async () => {
    const account = await onboard('Signin');
    const wrong = await call('POST', '/admin/login', { body: { email: account.email, password: 'not the password' } });
    const unknown = await call('POST', '/admin/login', { body: { email: 'nobody@nowhere.test', password: 'not the password' } });
    expect(wrong).toMatchObject({ status: 401, body: { message: 'Invalid email or password', statusCode: 401 } });
    expect(unknown.body).toEqual(wrong.body);
    expect((await call('POST', '/admin/login', { body: { email: account.email.toUpperCase(), password: 'a long new password' } })).status).toBe(200);
  });

  it('answers 401 without a session, and for a forged or expired-looking token', async () => {
    expect(await call('GET', '/admin/sites')).toMatchObject({ status: 401, body: { statusCode: 401 } });
    expect((await call('GET', '/admin/sites', { token: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl' })).status).toBe(401);
  });

  it('limits sign-in attempts per client IP', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      statuses.push((await call('POST', '/admin/login', { body: { email: 'x@y.test', password: 'wrong' }, headers: { 'x-forwarded-for': '203.0.113.9' } })).status);
    }
    expect(statuses.slice(0, 10).every((s) => s === 401)).toBe(true);
    const limited = await call('POST', '/admin/login', { body: { email: 'x@y.test', password: 'wrong' }, headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ message: 'ThrottlerException: Too Many Requests', statusCode: 429 });
  });
});

describe('sites, CAPTCHA, forms, recipients, webhooks', () => {
  let owner: Account;
  let siteId: string;
  let formId: string;

  beforeAll(async () => {
    owner = await onboard('Builder');
  });

  it('creates, reads, updates and deactivates a site, validating origins', async () => {
    const created = await call('POST', '/admin/sites', { token: owner.token, body: { name: 'Marketing', allowedOrigins: ['https://www.example.com', 'http://localhost:3000'] } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'Marketing', active: true, captcha: null, allowedOrigins: ['https://www.example.com', 'http://localhost:3000'] });
    expect(created.body.siteKey).toMatch(/^sk_[A-Za-z0-9_-]+$/);
    expect(created.body.siteKey.length).toBeLessThanOrEqual(100);
    siteId = created.body.id;
    expect((await call('GET', `/admin/sites/${siteId}`, { token: owner.token })).body.name).toBe('Marketing');
    for (const bad of ['https://www.example.com/', 'https://www.example.com/path', 'ftp://example.com', 'www.example.com', 'https://user@example.com']) {
      expectValidation(await call('POST', '/admin/sites', { token: owner.token, body: { name: 'x', allowedOrigins: ['https://ok.example.com', bad] } }), 'allowedOrigins[1]');
    }
    expectValidation(await call('POST', '/admin/sites', { token: owner.token, body: {} }), 'name');
    expectValidation(await call('POST', '/admin/sites', { token: owner.token, body: { name: 'x', colour: 'red' } }), 'colour');
    const updated = await call('PATCH', `/admin/sites/${siteId}`, { token: owner.token, body: { name: 'Marketing EU', allowedOrigins: ['https://www.example.eu'] } });
    expect(updated.body).toMatchObject({ name: 'Marketing EU', allowedOrigins: ['https://www.example.eu'], siteKey: created.body.siteKey });
    expect((await call('PATCH', `/admin/sites/${siteId}`, { token: owner.token, body: { active: false } })).body.active).toBe(false);
    expect((await call('PATCH', `/admin/sites/${siteId}`, { token: owner.token, body: { active: true } })).body.active).toBe(true);
    expect((await call('GET', '/admin/sites', { token: owner.token })).body.map((s: { id: string }) => s.id)).toEqual([siteId]);
  });

  it('stores a CAPTCHA secret encrypted and never returns or logs it', async () => {
    const set = await call('PUT', `/admin/sites/${siteId}/captcha`, { token: owner.token, body: { provider: 'recaptcha_v3', siteKey: '6Lc-public', secret: CAPTCHA_SECRET, scoreThreshold: 0.7 } });
    expect(set.status).toBe(200);
    expect(set.body.captcha).toEqual({ provider: 'recaptcha_v3', siteKey: '6Lc-public', scoreThreshold: 0.7, secretConfigured: true });
    expectValidation(await call('PUT', `/admin/sites/${siteId}/captcha`, { token: owner.token, body: { provider: 'hcaptcha', siteKey: 'k', secret: 's', scoreThreshold: 0.5 } }), 'scoreThreshold');
    expectValidation(await call('PUT', `/admin/sites/${siteId}/captcha`, { token: owner.token, body: { provider: 'recaptcha_v4', siteKey: 'k', secret: 's' } }), 'provider');
    const texts = [set.text, (await call('GET', `/admin/sites/${siteId}`, { token: owner.token })).text, (await call('GET', '/admin/sites', { token: owner.token })).text];
    for (const text of texts) expect(text).not.toContain(CAPTCHA_SECRET);
    const stateDir = join(dataDir, 'state');
    for (const file of await readdir(stateDir)) expect(await readFile(join(stateDir, file), 'utf8'), file).not.toContain(CAPTCHA_SECRET);
    expect(app.relay!.store.sites.get(siteId)!.captcha!.secretSealed).not.toContain(CAPTCHA_SECRET);
    expect(logged.join('')).not.toContain(CAPTCHA_SECRET);
    expect(logged.length).toBeGreaterThan(0);
    const removed = await call('DELETE', `/admin/sites/${siteId}/captcha`, { token: owner.token });
    expect(removed.body.captcha).toBeNull();
  });

  it('creates forms with unique keys, and updates and deactivates them', async () => {
    const created = await call('POST', `/admin/sites/${siteId}/forms`, { token: owner.token, body: { name: 'Contact', formKey: 'contact' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ formKey: 'contact', active: true, recipients: [], webhooks: [] });
    formId = created.body.id;
    expect((await call('POST', `/admin/sites/${siteId}/forms`, { token: owner.token, body: { name: 'Again', formKey: 'contact' } })).status).toBe(409);
    expectValidation(await call('POST', `/admin/sites/${siteId}/forms`, { token: owner.token, body: { name: 'Bad', formKey: 'has space' } }), 'formKey');
    expectValidation(await call('POST', `/admin/sites/${siteId}/forms`, { token: owner.token, body: { name: 'Long', formKey: 'k'.repeat(101) } }), 'formKey');
    const generated = await call('POST', `/admin/sites/${siteId}/forms`, { token: owner.token, body: { name: 'Newsletter' } });
    expect(generated.body.formKey).toMatch(/^fk_/);
    expect((await call('PATCH', `/admin/sites/${siteId}/forms/${formId}`, { token: owner.token, body: { active: false } })).body.active).toBe(false);
    expect((await call('PATCH', `/admin/sites/${siteId}/forms/${formId}`, { token: owner.token, body: { active: true, name: 'Contact us' } })).body).toMatchObject({ active: true, name: 'Contact us' });
    expect((await call('GET', `/admin/sites/${siteId}/forms`, { token: owner.token })).body).toHaveLength(2);
  });

  it('configures recipients per channel, validated and toggled', async () => {
    const path = `/admin/sites/${siteId}/forms/${formId}/recipients`;
    const email = await call('POST', path, { token: owner.token, body: { channel: 'email', address: 'Sales@Example.com' } });
    expect(email.body).toMatchObject({ channel: 'email', address: 'sales@example.com', active: true });
    const whatsapp = await call('POST', path, { token: owner.token, body: { channel: 'whatsapp', address: '+4915112345678', active: false } });
    expect(whatsapp.body).toMatchObject({ channel: 'whatsapp', active: false });
    for (const bad of ['a@b.com, c@d.com', 'Sales <sales@example.com>', 'sales@example.com\r\nBcc: x@y.com', 'not-an-address']) {
      expectValidation(await call('POST', path, { token: owner.token, body: { channel: 'email', address: bad } }), 'address');
    }
    for (const bad of ['4915112345678', '+0151123456', '+12345', '+1234567890123456']) {
      expectValidation(await call('POST', path, { token: owner.token, body: { channel: 'whatsapp', address: bad } }), 'address');
    }
    expectValidation(await call('POST', path, { token: owner.token, body: { channel: 'webhook', address: 'https://x.test' } }), 'channel');
    expect((await call('POST', path, { token: owner.token, body: { channel: 'email', address: 'sales@example.com' } })).status).toBe(409);
    expect((await call('PATCH', `${path}/${whatsapp.body.id}`, { token: owner.token, body: { active: true } })).body.active).toBe(true);
    expect((await call('DELETE', `${path}/${email.body.id}`, { token: owner.token })).status).toBe(204);
    const form = await call('GET', `/admin/sites/${siteId}/forms/${formId}`, { token: owner.token });
    expect(form.body.recipients.map((r: { channel: string }) => r.channel)).toEqual(['whatsapp']);
  });

  it('takes the addresses the senders take: a local part of at most 64 characters, E.164 of 8 to 15 digits', async () => {
    const path = `/admin/sites/${siteId}/forms/${formId}/recipients`;
    // The email sender refuses a longer local part at every send: such a recipient would never get mail.
    expectValidation(await call('POST', path, { token: owner.token, body: { channel: 'email', address: `${'a'.repeat(65)}@example.com` } }), 'address');
    expect((await call('POST', path, { token: owner.token, body: { channel: 'email', address: `${'a'.repeat(64)}@example.com` } })).status).toBe(201);
    for (const bad of ['+1234567', '+1234567890123456']) {
      expectValidation(await call('POST', path, { token: owner.token, body: { channel: 'whatsapp', address: bad } }), 'address');
    }
    for (const good of ['+12345678', '+123456789012345']) {
      expect((await call('POST', path, { token: owner.token, body: { channel: 'whatsapp', address: good } })).status).toBe(201);
    }
  });

  it('loses no change when admins edit one form at the same time (each write is a compare-and-set)', async () => {
    const form = await call('POST', `/admin/sites/${siteId}/forms`, { token: owner.token, body: { name: 'Busy' } });
    const path = `/admin/sites/${siteId}/forms/${form.body.id}`;
    const adds = await Promise.all(Array.from({ length: 10 }, (_, i) =>
      call('POST', `${path}/recipients`, { token: owner.token, body: { channel: 'email', address: `team${i}@example.com` } })));
    expect(adds.map((added) => added.status)).toEqual(Array(10).fill(201));
    const [renamed, hook] = await Promise.all([
      call('PATCH', path, { token: owner.token, body: { name: 'Busy form' } }),
      call('POST', `${path}/webhooks`, { token: owner.token, body: { url: 'https://hooks.example.com/busy' } }),
      ...adds.slice(0, 3).map((added) => call('PATCH', `${path}/recipients/${added.body.id}`, { token: owner.token, body: { active: false } })),
    ]);
    expect([renamed!.status, hook!.status]).toEqual([200, 201]);
    const stored = (await call('GET', path, { token: owner.token })).body;
    expect(stored.recipients.map((r: { address: string }) => r.address).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `team${i}@example.com`).sort());
    expect(stored.recipients.filter((r: { active: boolean }) => !r.active)).toHaveLength(3);
    expect(stored).toMatchObject({ name: 'Busy form', webhooks: [expect.objectContaining({ url: 'https://hooks.example.com/busy' })] });
    // The store holds the same (not only this gateway's copy).
    const persisted = await app.state.get<{ recipients: unknown[] }>('relay_forms', form.body.id);
    expect(persisted!.recipients).toHaveLength(10);
  });

  it('adds webhooks to public hosts only, showing the signing secret once', async () => {
    const path = `/admin/sites/${siteId}/forms/${formId}/webhooks`;
    for (const url of ['http://127.0.0.1/hook', 'http://localhost:8080/x', 'http://10.1.2.3/x', 'http://169.254.169.254/latest/meta-data', 'http://[::1]/x', 'https://user:pw@hooks.example.com/x', 'file:///etc/passwd', 'http://192.168.1.1/x']) {
      expectValidation(await call('POST', path, { token: owner.token, body: { url } }), 'url');
    }
    const created = await call('POST', path, { token: owner.token, body: { url: 'https://hooks.example.com/forms' } });
    expect(created.status).toBe(201);
    expect(created.body.secret).toMatch(/^whsec_/);
    const form = await call('GET', `/admin/sites/${siteId}/forms/${formId}`, { token: owner.token });
    expect(form.text).not.toContain(created.body.secret);
    expect(form.body.webhooks).toEqual([{ id: created.body.id, url: 'https://hooks.example.com/forms', active: true, secretConfigured: true }]);
    expect((await call('PATCH', `${path}/${created.body.id}`, { token: owner.token, body: { active: false } })).body.active).toBe(false);
  });

  it('creates and previews templates with the data HTML-escaped', async () => {
    const created = await call('POST', '/admin/templates', { token: owner.token, body: { name: 'Lead', subject: 'New lead: {{ name }}', html: '<h1>{{ name }}</h1><p>From {{ meta.page }}</p>' } });
    expect(created.status).toBe(201);
    expectValidation(await call('POST', '/admin/templates', { token: owner.token, body: { name: 'Bad', subject: 's', html: '<p>{{ name </p>' } }), 'html');
    const data = { name: '<img src=x onerror=alert(1)>', meta: { page: '/pricing?a=1&b=2' } };
    const preview = await call('POST', '/admin/templates/preview', { token: owner.token, body: { templateId: created.body.id, data } });
    expect(preview.status).toBe(200);
    expect(preview.body.html).toBe('<h1>&lt;img src=x onerror=alert(1)&gt;</h1><p>From /pricing?a=1&amp;b=2</p>');
    const injected = await call('POST', '/admin/templates/preview', { token: owner.token, body: { subject: 'Hi {{ name }}', html: '{{ @fields }}', data: { name: 'x\r\nBcc: victim@example.com' } } });
    expect(injected.body.subject).toBe('Hi x Bcc: victim@example.com');
    expect(injected.body.html).toContain('<th align="left">name</th>');
    const updated = await call('PATCH', `/admin/templates/${created.body.id}`, { token: owner.token, body: { subject: 'Lead: {{ name }}' } });
    expect(updated.body).toMatchObject({ subject: 'Lead: {{ name }}', html: created.body.html });
    expect((await call('PATCH', `/admin/sites/${siteId}/forms/${formId}`, { token: owner.token, body: { templateId: created.body.id } })).body.templateId).toBe(created.body.id);
    // A template in use cannot be deleted; once the form lets go of it, it can.
    expect((await call('DELETE', `/admin/templates/${created.body.id}`, { token: owner.token })).status).toBe(409);
    expect((await call('PATCH', `/admin/sites/${siteId}/forms/${formId}`, { token: owner.token, body: { templateId: null } })).body.templateId).toBeUndefined();
    expect((await call('DELETE', `/admin/templates/${created.body.id}`, { token: owner.token })).status).toBe(204);
    expect((await call('GET', `/admin/templates/${created.body.id}`, { token: owner.token })).status).toBe(404);
  });

  it('takes each formKey and email once, even when requests race', async () => {
    const racing = await Promise.all(Array.from({ length: 5 }, () => call('POST', `/admin/sites/${siteId}/forms`, { token: owner.token, body: { name: 'Race', formKey: 'race' } })));
    expect(racing.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
    const users = await Promise.all(Array.from({ length: 5 }, () => call('POST', '/admin/users', { token: owner.token, body: { email: 'twice@builder.test', role: 'member' } })));
    expect(users.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
  });

  it('issues site-bound API keys shown once, stored hashed, revoked at once', async () => {
    const created = await call('POST', '/admin/api-keys', { token: owner.token, body: { siteId, name: 'backend' } });
    expect(created.status).toBe(201);
    const { apiKey } = created.body;
    expect(apiKey).toMatch(/^rk_[A-Za-z0-9_-]{43}$/);
    expect(created.body).toMatchObject({ siteId, name: 'backend', prefix: apiKey.slice(0, 9) });
    expect(created.body.hash).toBeUndefined();
    const listed = await call('GET', '/admin/api-keys', { token: owner.token });
    expect(listed.text).not.toContain(apiKey);
    expect(listed.text).not.toContain(sha256Hex(apiKey));
    const stored = await readFile(join(dataDir, 'state', 'relay_api_keys.log'), 'utf8');
    expect(stored).toContain(sha256Hex(apiKey));
    expect(stored).not.toContain(apiKey);
    expect(app.relay!.store.apiKeyFor(apiKey)?.siteId).toBe(siteId);
    expect((await call('DELETE', `/admin/api-keys/${created.body.id}`, { token: owner.token })).body.revokedAt).toEqual(expect.any(String));
    const started = Date.now();
    while (app.relay!.store.apiKeyFor(apiKey) && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 10));
    expect(app.relay!.store.apiKeyFor(apiKey)).toBeUndefined();
    expect((await call('POST', '/admin/api-keys', { token: owner.token, body: { siteId: 'site_nope', name: 'x' } })).status).toBe(404);
  });
});

describe('users and roles', () => {
  it('lets owners and admins manage users, members only read, and keeps one active owner', async () => {
    const owner = await onboard('Roles');
    const site = await call('POST', '/admin/sites', { token: owner.token, body: { name: 'Shop' } });
    const signIn = async (role: 'admin' | 'member') => {
      const email = `${role}-${randomBytes(3).toString('hex')}@roles.test`;
      const created = await call('POST', '/admin/users', { token: owner.token, body: { email, role, password: `${role} password 123` } });
      expect(created.status).toBe(201);
      expect(created.body.oneTimePassword).toBeUndefined();
      const login = await call('POST', '/admin/login', { body: { email, password: `${role} password 123` } });
      return { id: created.body.user.id as string, token: login.body.token as string };
    };
    const admin = await signIn('admin');
    const member = await signIn('member');

    expect((await call('GET', `/admin/sites/${site.body.id}`, { token: member.token })).status).toBe(200);
    const refused = await call('POST', '/admin/sites', { token: member.token, body: { name: 'x' } });
    expect(refused).toMatchObject({ status: 403, body: { message: 'Members have read-only access', statusCode: 403 } });
    expect((await call('POST', '/admin/api-keys', { token: member.token, body: { siteId: site.body.id, name: 'x' } })).status).toBe(403);
    expect((await call('POST', '/admin/sites', { token: admin.token, body: { name: 'By admin' } })).status).toBe(201);
    expect((await call('POST', '/admin/users', { token: admin.token, body: { email: 'o2@roles.test', role: 'owner' } })).status).toBe(403);
    expect((await call('PATCH', `/admin/users/${member.id}`, { token: admin.token, body: { role: 'owner' } })).status).toBe(403);
    expect((await call('PATCH', '/admin/tenant', { token: admin.token, body: { name: 'Renamed' } })).status).toBe(403);
    const invited = await call('POST', '/admin/users', { token: admin.token, body: { email: 'new.member@roles.test', role: 'member' } });
    expect(invited.body.oneTimePassword).toEqual(expect.any(String));
    expect(invited.body.user.mustChangePassword).toBe(true);
    expect((await call('POST', '/admin/users', { token: owner.token, body: { email: 'new.member@roles.test', role: 'member' } })).status).toBe(409);

    expect((await call('PATCH', `/admin/users/${owner.userId}`, { token: owner.token, body: { role: 'admin' } })).status).toBe(409);
    expect((await call('PATCH', '/admin/tenant', { token: owner.token, body: { name: 'Roles Ltd' } })).body.name).toBe('Roles Ltd');
    // Deactivating a user ends their sessions at once.
    expect((await call('PATCH', `/admin/users/${member.id}`, { token: owner.token, body: { active: false } })).body.active).toBe(false);
    expect((await call('GET', '/admin/sites', { token: member.token })).status).toBe(401);
    expect((await call('GET', '/admin/users', { token: owner.token })).body).toHaveLength(4);
  });

  it('says nothing of other tenants when an email is added: an email is unique within its tenant, and sign-in asks which tenant', async () => {
    const [north, south] = [await onboard('North'), await onboard('South')];
    const email = `shared-${randomBytes(3).toString('hex')}@people.test`;
    const add = (owner: Account, password: string) => call('POST', '/admin/users', { token: owner.token, body: { email, role: 'member', password } });
    const login = (password: string, tenantId?: string) => call('POST', '/admin/login', { body: { email, password, ...(tenantId ? { tenantId } : {}) } });
    expect((await add(north, 'north password 1')).status).toBe(201);
    // South's owner adds the same address as if it were new: no 409 that would say it exists elsewhere.
    const added = await add(south, 'south password 1');
    expect(added.status).toBe(201);
    expect(added.text).not.toContain(north.tenantId);
    expect((await add(south, 'south password 2')).status).toBe(409);

    // Each password opens its own tenant's account.
    expect((await login('north password 1')).body.user).toMatchObject({ tenantId: north.tenantId });
    const southSession = await login('south password 1');
    expect(southSession.body.user).toMatchObject({ tenantId: south.tenantId, id: added.body.user.id });
    expect((await call('GET', '/admin/users', { token: southSession.body.token })).text).not.toContain(north.tenantId);
    expect((await login('no such password')).status).toBe(401);
    expect((await login('north password 1', south.tenantId)).status).toBe(401);

    // One password for both: whoever knows it is asked which tenant, and then signs in to that one.
    const shared = await call('POST', '/admin/me/password', { token: southSession.body.token, body: { currentPassword: 'south password 1', newPassword: 'north password 1' } });
    expect(shared.status).toBe(200);
    const ambiguous = await login('north password 1');
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.message).toBe('This email and password open accounts in several tenants: sign in again with the tenantId of one');
    expect(ambiguous.body.tenants).toEqual([{ id: north.tenantId, name: 'North' }, { id: south.tenantId, name: 'South' }]);
    expect((await login('north password 1', south.tenantId)).body.user).toMatchObject({ tenantId: south.tenantId });
    expect((await login('north password 1', north.tenantId)).body.user).toMatchObject({ tenantId: north.tenantId });
  });
});

describe('templates: limits, previews and the listing', () => {
  let owner: Account;
  let member: Account;
  beforeAll(async () => {
    owner = await onboard('Templates');
    const email = `member-${randomBytes(3).toString('hex')}@templates.test`;
    expect((await call('POST', '/admin/users', { token: owner.token, body: { email, role: 'member', password: 'member password 123' } })).status).toBe(201);
    const login = await call('POST', '/admin/login', { body: { email, password: 'member password 123' } });
    member = { ...owner, token: login.body.token, email };
  });

  it('refuses a member the 823 KB preview of {{@fields}} x 2,000 (403), and an admin with a 400 naming html; the server goes on', async () => {
    const body = fieldsBombPreview();
    expect(JSON.stringify(body).length).toBeGreaterThan(820_000);
    const refused = await call('POST', '/admin/templates/preview', { token: member.token, body });
    expect(refused).toMatchObject({ status: 403, body: { message: 'Members have read-only access', statusCode: 403 } });
    const invalid = await call('POST', '/admin/templates/preview', { token: owner.token, body });
    expectValidation(invalid, 'html');
    expect(invalid.body.message).toBe('Validation failed: html has 2,000 {{ @fields }}, at most 2');
    expect((await call('GET', '/health')).status).toBe(200);
  });

  it('renders a preview within the size limit, with its text part, and refuses one over it with 422 saying by how much', async () => {
    const data = fieldsOf(100, 9000);
    const once = await call('POST', '/admin/templates/preview', { token: owner.token, body: { html: '<p>Hi</p>{{ @fields }}', data } });
    expect(once.status).toBe(200);
    expect(once.body.text.split('\n').slice(0, 3)).toEqual(['Hi', '', `f00: ${'<'.repeat(9000)}`]);
    const twice = await call('POST', '/admin/templates/preview', { token: owner.token, body: { html: '{{ @fields }}{{ @fields }}', data } });
    expect(twice.status).toBe(422);
    expect(twice.body.message).toMatch(/^The rendered message would be [\d,]+ characters \(HTML and text parts\), [\d,]+ over the limit of 8,000,000$/);
    // The sample data is held to a submission's limits.
    expectValidation(await call('POST', '/admin/templates/preview', { token: owner.token, body: { data: { note: 'x'.repeat(10_001) } } }), 'data.note');
  });

  it('refuses a template with more placeholders or {{ @fields }} than a template may hold, naming the field', async () => {
    const tooMany = await call('POST', '/admin/templates', { token: owner.token, body: { name: 'Many', subject: 's', html: '{{ a }}'.repeat(201) } });
    expectValidation(tooMany, 'html');
    expect(tooMany.body.message).toBe('Validation failed: html has 201 placeholders, at most 200');
    expectValidation(await call('POST', '/admin/templates', { token: owner.token, body: { name: 'Fields', subject: '{{ @fields }} {{ @fields }} {{ @fields }}', html: 'h' } }), 'subject');
  });

  it('keeps at most 2 MiB of templates per tenant (409), also when one grows', async () => {
    const tenant = await onboard('TemplateBytes');
    const html = 'x'.repeat(100_000);
    for (let i = 0; i < 20; i++) expect((await call('POST', '/admin/templates', { token: tenant.token, body: { name: `t${i}`, subject: 's', html } })).status).toBe(201);
    const full = await call('POST', '/admin/templates', { token: tenant.token, body: { name: 't20', subject: 's', html } });
    expect(full.status).toBe(409);
    expect(full.body.message).toMatch(/^A tenant's templates hold at most 2,097,152 bytes together \(names, subjects and HTML in UTF-8\): with this one they would hold 2,100,\d{3}$/);
    const small = await call('POST', '/admin/templates', { token: tenant.token, body: { name: 'small', subject: 's', html: 'x'.repeat(90_000) } });
    expect(small.status).toBe(201);
    expect((await call('PATCH', `/admin/templates/${small.body.id}`, { token: tenant.token, body: { html } })).status).toBe(409);
  });

  it('keeps at most 100 templates per tenant (409), and lists them newest first a page at a time, without their HTML', async () => {
    const tenant = await onboard('TemplateCount');
    const created: string[] = [];
    for (let i = 0; i < 100; i++) created.push((await call('POST', '/admin/templates', { token: tenant.token, body: { name: `t${i}`, subject: 's', html: `<p>${i}</p>` } })).body.id);
    const refused = await call('POST', '/admin/templates', { token: tenant.token, body: { name: 'one more', subject: 's', html: 'h' } });
    expect(refused).toMatchObject({ status: 409, body: { message: 'A tenant keeps at most 100 templates: delete one first' } });

    const listed: any[] = [];
    let page = await call('GET', '/admin/templates?limit=30', { token: tenant.token });
    for (;;) {
      expect(page.status).toBe(200);
      listed.push(...page.body.templates);
      if (!page.body.nextBefore) break;
      expect(page.body.templates).toHaveLength(30);
      page = await call('GET', `/admin/templates?limit=30&before=${page.body.nextBefore}`, { token: tenant.token });
    }
    expect(listed.map((template) => template.id).sort()).toEqual([...created].sort());
    const times = listed.map((template) => Date.parse(template.createdAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(listed.find((template) => template.id === created[99])).toEqual({ id: created[99], tenantId: tenant.tenantId, name: 't99', subject: 's', bytes: 3 + 1 + '<p>99</p>'.length, createdAt: expect.any(String), updatedAt: expect.any(String) });
    expect((await call('GET', '/admin/templates', { token: tenant.token })).body.templates).toHaveLength(50);
    expectValidation(await call('GET', '/admin/templates?limit=201', { token: tenant.token }), 'limit');
    expectValidation(await call('GET', '/admin/templates?before=nonsense', { token: tenant.token }), 'before');
  });
});

describe('tenant isolation', () => {
  it('gives a user of another tenant 404 for everything, and lists only its own', async () => {
    const a = await onboard('Alpha');
    const b = await onboard('Beta');
    const site = (await call('POST', '/admin/sites', { token: a.token, body: { name: 'A site' } })).body;
    const form = (await call('POST', `/admin/sites/${site.id}/forms`, { token: a.token, body: { name: 'A form' } })).body;
    const recipient = (await call('POST', `/admin/sites/${site.id}/forms/${form.id}/recipients`, { token: a.token, body: { channel: 'email', address: 'a@alpha.test' } })).body;
    const template = (await call('POST', '/admin/templates', { token: a.token, body: { name: 't', subject: 's', html: 'h' } })).body;
    const key = (await call('POST', '/admin/api-keys', { token: a.token, body: { siteId: site.id, name: 'k' } })).body;
    const attempts: Array<[string, string, unknown?]> = [
      ['GET', `/admin/sites/${site.id}`],
      ['PATCH', `/admin/sites/${site.id}`, { active: false }],
      ['PUT', `/admin/sites/${site.id}/captcha`, { provider: 'turnstile', siteKey: 'k', secret: 's' }],
      ['GET', `/admin/sites/${site.id}/forms`],
      ['GET', `/admin/sites/${site.id}/forms/${form.id}`],
      ['PATCH', `/admin/sites/${site.id}/forms/${form.id}`, { active: false }],
      ['POST', `/admin/sites/${site.id}/forms/${form.id}/recipients`, { channel: 'email', address: 'b@beta.test' }],
      ['PATCH', `/admin/sites/${site.id}/forms/${form.id}/recipients/${recipient.id}`, { active: false }],
      ['GET', `/admin/templates/${template.id}`],
      ['POST', '/admin/api-keys', { siteId: site.id, name: 'stolen' }],
      ['DELETE', `/admin/api-keys/${key.id}`],
      ['GET', `/admin/users/${a.userId}`],
      ['PATCH', `/admin/users/${a.userId}`, { active: false }],
    ];
    for (const [method, path, body] of attempts) {
      const result = await call(method, path, { token: b.token, body });
      expect(result.status, `${method} ${path}`).toBe(404);
    }
    // Nothing changed, and B's lists hold only B's things.
    expect(app.relay!.store.sites.get(site.id)!.active).toBe(true);
    expect(app.relay!.store.apiKeyFor(key.apiKey)).toBeDefined();
    expect((await call('GET', '/admin/sites', { token: b.token })).body).toEqual([]);
    expect((await call('GET', '/admin/api-keys', { token: b.token })).body).toEqual([]);
    expect((await call('GET', '/admin/users', { token: b.token })).body.map((u: { email: string }) => u.email)).toEqual([b.email]);
  });
});

describe('handover', () => {
  it('hands the tenant to its client once; the agency stays as admin', async () => {
    const agency = await onboard('Agency');
    const handover = await call('POST', '/admin/tenant/handover', { token: agency.token });
    expect(handover.status).toBe(201);
    expect(handover.body.claimToken).toMatch(/^rct_/);
    const claims = await Promise.all(
      [1, 2, 3].map((i) => call('POST', '/admin/claim', { body: { token: handover.body.claimToken, email: `client${i}@client.test`, password: 'client password 1' } })),
    );
    expect(claims.map((c) => c.status).sort()).toEqual([200, 404, 404]);
    const winner = claims.find((c) => c.status === 200)!;
    expect(winner.body.user).toMatchObject({ role: 'owner', tenantId: agency.tenantId });
    expect(claims.find((c) => c.status === 404)!.body.message).toBe('Claim token not found or expired');
    const users = await call('GET', '/admin/users', { token: winner.body.token });
    expect(users.body.find((u: { id: string }) => u.id === agency.userId).role).toBe('admin');
    expect((await call('POST', '/admin/tenant/handover', { token: agency.token })).status).toBe(403);
    expect((await call('POST', '/admin/claim', { body: { token: handover.body.claimToken, email: 'late@client.test', password: 'client password 1' } })).status).toBe(404);
  });

  it('refuses an expired claim token', async () => {
    const agency = await onboard('Expiring');
    const { body } = await call('POST', '/admin/tenant/handover', { token: agency.token });
    const key = sha256Hex(body.claimToken);
    const claim = await app.state.get<{ expiresAt: string }>('relay_claims', key);
    await app.state.put('relay_claims', key, { ...claim, expiresAt: new Date(Date.now() - 1000).toISOString() });
    expect((await call('POST', '/admin/claim', { body: { token: body.claimToken, email: 'c@expired.test', password: 'client password 1' } })).status).toBe(404);
  });
});

describe('handover: claim tokens listed, revoked, void once ownership moves', () => {
  const claim = (token: string, email: string) => call('POST', '/admin/claim', { body: { token, email, password: 'client password 1' } });

  it('a second token kept back by the old owner cannot take the tenant back', async () => {
    const agency = await onboard('Takeback');
    const first = (await call('POST', '/admin/tenant/handover', { token: agency.token })).body;
    const second = (await call('POST', '/admin/tenant/handover', { token: agency.token })).body;
    const client = await claim(first.claimToken, 'client@takeback.test');
    expect(client.status).toBe(200);
    // The old owner, now an admin, redeems the token they kept: refused, and nothing changes.
    const taken = await claim(second.claimToken, 'agency-again@takeback.test');
    expect(taken).toMatchObject({ status: 404, body: { message: 'Claim token not found or expired' } });
    const users = (await call('GET', '/admin/users', { token: client.body.token })).body as Array<{ email: string; role: string }>;
    expect(users.map((u) => [u.email, u.role]).sort()).toEqual([['client@takeback.test', 'owner'], [agency.email, 'admin']]);
  });

  it('lists open claims (never their tokens) and revokes one; a revoked token is refused', async () => {
    const agency = await onboard('Listing');
    const made = (await call('POST', '/admin/tenant/handover', { token: agency.token })).body;
    const kept = (await call('POST', '/admin/tenant/handover', { token: agency.token })).body;
    const listed = await call('GET', '/admin/tenant/handover', { token: agency.token });
    expect(listed.status).toBe(200);
    expect(listed.body.map((c: { id: string }) => c.id)).toEqual([made.id, kept.id]);
    expect(listed.body[0]).toEqual({ id: made.id, createdBy: agency.userId, createdAt: expect.any(String), expiresAt: made.expiresAt });
    expect(listed.text).not.toContain(made.claimToken);
    expect((await call('DELETE', `/admin/tenant/handover/${made.id}`, { token: agency.token })).status).toBe(204);
    expect((await call('DELETE', `/admin/tenant/handover/${made.id}`, { token: agency.token })).status).toBe(404);
    expect((await claim(made.claimToken, 'late@listing.test')).status).toBe(404);
    expect((await call('GET', '/admin/tenant/handover', { token: agency.token })).body.map((c: { id: string }) => c.id)).toEqual([kept.id]);
    // Another tenant's claim id is not found.
    const other = await onboard('Listing other');
    expect((await call('DELETE', `/admin/tenant/handover/${kept.id}`, { token: other.token })).status).toBe(404);
  });

  it('caps open claims per tenant at 10 (409), and a revoked one frees its place', async () => {
    const agency = await onboard('Capped');
    const made = [];
    for (let i = 0; i < 10; i++) made.push((await call('POST', '/admin/tenant/handover', { token: agency.token })).body);
    const over = await call('POST', '/admin/tenant/handover', { token: agency.token });
    expect(over).toMatchObject({ status: 409, body: { message: 'A tenant has at most 10 open claim tokens: revoke one first (DELETE /api/v1/admin/tenant/handover/<id>)' } });
    await call('DELETE', `/admin/tenant/handover/${made[0].id}`, { token: agency.token });
    expect((await call('POST', '/admin/tenant/handover', { token: agency.token })).status).toBe(201);
  });

  it('a token whose maker is no longer an active owner is void', async () => {
    const agency = await onboard('Demoted');
    const partner = await call('POST', '/admin/users', { token: agency.token, body: { email: 'partner@demoted.test', role: 'owner', password: 'partner password 1' } });
    const partnerLogin = await call('POST', '/admin/login', { body: { email: 'partner@demoted.test', password: 'partner password 1' } });
    const kept = (await call('POST', '/admin/tenant/handover', { token: partnerLogin.body.token })).body;
    expect((await call('PATCH', `/admin/users/${partner.body.user.id}`, { token: agency.token, body: { role: 'admin' } })).status).toBe(200);
    expect((await claim(kept.claimToken, 'someone@demoted.test')).status).toBe(404);
  });

});

describe('relay admin sign-out', () => {
  it('DELETE /admin/session ends that session on every gateway; others of the user go on', async () => {
    const account = await onboard('Signout');
    const other = await call('POST', '/admin/login', { body: { email: account.email, password: 'a long new password' } });
    expect((await call('DELETE', '/admin/session', { token: account.token })).status).toBe(204);
    expect(await call('GET', '/admin/me', { token: account.token })).toMatchObject({ status: 401, body: { message: 'Invalid or expired session' } });
    expect((await call('GET', '/admin/me', { token: other.body.token })).status).toBe(200);
  });
});

describe('delivery settings', () => {
  let owner: Account;
  beforeAll(async () => {
    owner = await onboard('Mailer');
  });
  const put = (body: unknown) => call('PUT', '/admin/delivery-settings', { token: owner.token, body });

  it('refuses an SMTP server the egress policy refuses, naming email.smtpUrl and why', async () => {
    for (const [smtpUrl, reason] of hostileSmtpUrls(app.relay!.port)) {
      const refused = await put({ email: { smtpUrl } });
      expectValidation(refused, 'email.smtpUrl');
      expect(refused.body.message, smtpUrl).toContain(reason);
    }
    expect((await call('GET', '/admin/delivery-settings', { token: owner.token })).body.email).toBeNull();
    // A name that does not resolve yet is stored: every attempt checks it again.
    const stored = await put({ email: { smtpUrl: 'smtp://relay:pw@mail.not-yet.invalid:587', from: 'Forms <forms@tenant.test>' } });
    expect(stored.status).toBe(200);
    expect(stored.body.email).toEqual({ from: 'Forms <forms@tenant.test>', smtpServerConfigured: true });
  });

  it("takes a From without the tenant's own server only in a domain the operator verified", async () => {
    const other = await onboard('Sender');
    const putOther = (body: unknown) => call('PUT', '/admin/delivery-settings', { token: other.token, body });
    const refused = await putOther({ email: { from: 'Billing <billing@bank.test>' } });
    expectValidation(refused, 'email.from');
    expect(refused.body.message).toContain('SLUICE_SMTP_FROM_DOMAINS');
    const verified = await putOther({ email: { from: 'Forms <forms@Verified.TEST>' } });
    expect(verified.status).toBe(200);
    expect(verified.body.email).toEqual({ from: 'Forms <forms@Verified.TEST>', smtpServerConfigured: false });
    expectValidation(await putOther({ email: { from: 'forms@sub.verified.test' } }), 'email.from');
  });
});

describe('the relay HTTP surface', () => {
  it('answers unknown paths, wrong methods, non-JSON and broken JSON with the error shape', async () => {
    expect(await call('GET', '/nope')).toMatchObject({ status: 404, body: { message: 'Cannot GET /api/v1/nope', statusCode: 404 } });
    const wrongMethod = await call('PUT', '/admin/sites');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET, POST');
    const notJson = await fetch(`${base}/admin/login`, { method: 'POST', headers: { 'content-type': 'text/plain', 'x-forwarded-for': randomIp() }, body: 'x' });
    expect(notJson.status).toBe(415);
    const broken = await fetch(`${base}/admin/login`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': randomIp() }, body: '{"email":' });
    expect(await broken.json()).toEqual({ message: 'Body is not valid JSON', statusCode: 400 });
    const deep = await fetch(`${base}/admin/login`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': randomIp() }, body: `{"email":${'['.repeat(200_000)}${']'.repeat(200_000)}}` });
    expect(await deep.json()).toEqual({ message: 'Body is nested deeper than 32 levels', statusCode: 400 });
    expect((await call('GET', '/health')).body).toEqual({ status: 'ok', service: 'sluice-relay' });
  });

  it('describes the admin API in its OpenAPI document, with the validating schemas', async () => {
    const { body } = await call('GET', '/openapi.json');
    expect(body.openapi).toBe('3.1.0');
    expect(body.paths['/api/v1/admin/sites/{siteId}/forms/{formId}/recipients'].post.requestBody.content['application/json'].schema.$ref).toBe('#/components/schemas/CreateRecipient');
    expect(body.components.schemas.CreateSite.properties.allowedOrigins.items.format).toBe('origin');
    // Success statuses as the handler answers them.
    expect(Object.keys(body.paths['/api/v1/admin/sites'].post.responses)).toContain('201');
    expect(Object.keys(body.paths['/api/v1/admin/login'].post.responses)).toContain('200');
    expect(Object.keys(body.paths['/api/v1/admin/sites/{siteId}/forms/{formId}/recipients/{recipientId}'].delete.responses)).toContain('204');
    for (const [, name] of JSON.stringify(body).matchAll(/"#\/components\/schemas\/(\w+)"/g)) expect(body.components.schemas[name!], name).toBeDefined();
    expect(Object.keys(body.paths).length).toBeGreaterThan(20);
  });
});
