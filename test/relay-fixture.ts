/**
 * A running `sluice serve` with a relay tenant ready to configure, for the relay's public-API
 * tests: calls with a client IP of the test's choosing (X-Forwarded-For from a trusted proxy),
 * so each test has rate-limit windows of its own, and shortcuts for sites, forms and keys.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';

export interface Reply {
  status: number;
  /** The parsed JSON body, if any. */
  body: any;
  text: string;
  headers: Headers;
}

export interface CallOptions {
  body?: unknown;
  /** A body sent as is (not JSON-encoded). */
  raw?: string | Buffer;
  headers?: Record<string, string>;
  /** The client IP (default: a fresh one per call). */
  ip?: string;
  token?: string;
}

let ipCounter = Math.floor(Math.random() * 60_000);
/** A client IP no other call used (documentation and benchmark ranges). */
export function freshIp(): string {
  ipCounter++;
  return `198.18.${(ipCounter >> 8) & 255}.${ipCounter & 255}`;
}

export interface RelayFixture {
  app: TestSluice;
  /** http://127.0.0.1:<relay port>/api/v1 */
  base: string;
  /** The owner's session token of the fixture's tenant. */
  token: string;
  tenantId: string;
  call(method: string, path: string, options?: CallOptions): Promise<Reply>;
  /** An admin call as the tenant's owner; expects success. */
  admin(method: string, path: string, body?: unknown): Promise<any>;
  /** A site with a form (formKey `contact` unless given) and its recipients. */
  siteWithForm(options?: { origins?: string[]; formKey?: string; recipients?: Array<{ channel: 'email' | 'whatsapp'; address: string; active?: boolean }>; webhooks?: string[] }): Promise<{ site: any; form: any }>;
  apiKey(siteId: string): Promise<{ id: string; apiKey: string }>;
  /** Onboards another tenant on the same server and signs in as its owner. */
  otherTenant(name: string): Promise<{ tenantId: string; token: string; admin: (method: string, path: string, body?: unknown) => Promise<any> }>;
  /** Rows of a relay table. */
  rows<T = Record<string, any>>(sql: string): Promise<T[]>;
  stop(): Promise<void>;
}

const OPERATOR_TOKEN = `op_${randomBytes(12).toString('hex')}`;

export async function startRelayFixture(overrides: Record<string, unknown> = {}): Promise<RelayFixture> {
  const app = await startTestSluice({
    'relay.operatorToken': OPERATOR_TOKEN,
    'limits.trustedProxies': ['127.0.0.1'],
    // Webhook destinations in the tests are loopback receivers.
    'relay.allowPrivateWebhooks': true,
    ...overrides,
  });
  const base = `http://127.0.0.1:${app.relay!.port}/api/v1`;

  async function call(method: string, path: string, options: CallOptions = {}): Promise<Reply> {
    const headers: Record<string, string> = { 'x-forwarded-for': options.ip ?? freshIp() };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    Object.assign(headers, options.headers);
    const response = await fetch(base + path, { method, headers, body: (options.raw as BodyInit | undefined) ?? (options.body === undefined ? undefined : JSON.stringify(options.body)) });
    const text = await response.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: response.status, body, text, headers: response.headers };
  }

  /** A new tenant, signed in as its owner; `admin` calls expect success. */
  async function onboard(name: string) {
    const email = `owner-${randomBytes(4).toString('hex')}@relay.test`;
    const password = 'a long password for tests';
    const onboarded = await call('POST', '/admin/tenants', { body: { name, owner: { email, password } }, headers: { 'x-operator-token': OPERATOR_TOKEN } });
    expect(onboarded.status, onboarded.text).toBe(201);
    const login = await call('POST', '/admin/login', { body: { email, password } });
    const token: string = login.body.token;
    const admin = async (method: string, path: string, body?: unknown) => {
      const reply = await call(method, path, { token, body });
      if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
      return reply.body;
    };
    return { tenantId: onboarded.body.tenant.id as string, token, admin };
  }
  const { tenantId, token, admin } = await onboard('Acme');

  return {
    app,
    base,
    token,
    tenantId,
    call,
    admin,
    otherTenant: onboard,
    async siteWithForm(options = {}) {
      const site = await admin('POST', '/admin/sites', { name: 'web', allowedOrigins: options.origins ?? [] });
      const form = await admin('POST', `/admin/sites/${site.id}/forms`, { name: 'Contact', formKey: options.formKey ?? 'contact' });
      for (const recipient of options.recipients ?? []) await admin('POST', `/admin/sites/${site.id}/forms/${form.id}/recipients`, recipient);
      for (const url of options.webhooks ?? []) await admin('POST', `/admin/sites/${site.id}/forms/${form.id}/webhooks`, { url });
      return { site, form: await admin('GET', `/admin/sites/${site.id}/forms/${form.id}`) };
    },
    async apiKey(siteId) {
      return admin('POST', '/admin/api-keys', { siteId, name: 'backend' });
    },
    rows: (sql) => app.rows(sql),
    stop: () => app.stop(),
  };
}

/** A 400 whose message starts with `Validation failed` and names `field`. */
export function expectValidationFailed(reply: Reply, field: string): void {
  expect(reply.status, reply.text).toBe(400);
  expect(reply.body.statusCode).toBe(400);
  expect(reply.body.message.startsWith(`Validation failed: ${field} `), reply.body.message).toBe(true);
  expect(reply.body.field).toBe(field);
}

/** An error answer with exactly this status and message. */
export function expectError(reply: Reply, status: number, message: string): void {
  expect({ status: reply.status, body: reply.body }, reply.text).toEqual({ status, body: { message, statusCode: status } });
}

/**
 * The largest `data` of the documented limits that fits a submission's 1 MiB body: 99 fields of
 * about 10,000 characters (half of them `<`, four in HTML) and `meta` of 100 fields of 400 `&`.
 * Each field's value starts with its number and a colon.
 */
export function maximumData(): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (let i = 0; i < 99; i++) data[`field${i}`] = `${i}:${'<'.repeat(5000)}${'a'.repeat(4995 - String(i).length)}`;
  data.meta = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`m${i}`, '&'.repeat(400)]));
  return data;
}

/** `count` fields (`f00`, `f01`...) of `size` copies of `<`. */
export function fieldsOf(count: number, size: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: count }, (_, i) => [`f${String(i).padStart(2, '0')}`, '<'.repeat(size)]));
}

/** The findings' 823 KB preview body: `{{@fields}}` 2,000 times over 100 fields of 8,000 `<`. */
export function fieldsBombPreview() {
  return { subject: 'x', html: '{{@fields}}'.repeat(2000), data: fieldsOf(100, 8000) };
}
