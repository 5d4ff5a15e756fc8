/**
 * A whole `sluice serve` set up to alert, as test/alerts.test.ts (the API) and
 * test/alerts-browser.test.ts (the page) both need it: rounds every 5 s, the relay delivering to
 * an SMTP server of the test's own, the console claimed by its first owner, who signs in to the
 * relay's admin API with the same account and makes a site whose form emails the on-call
 * address: the contact point a rule notifies. And spans that make a service's error rate what a
 * test wants.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { ConsoleClient } from './console-client.ts';
import { startSmtpInbox, type SmtpInbox } from './delivery-peers.ts';
import { startTestSluice, type TestSluice } from './harness.ts';

export const OWNER = { name: 'Ada', email: 'ada@example.com', password: 'correct horse battery staple' };
/** Where the contact point's email goes. */
export const ON_CALL = 'oncall@acme.test';

export interface AlertingSluice {
  app: TestSluice;
  smtp: SmtpInbox;
  /** The console's first owner, signed in through the API. */
  owner: ConsoleClient;
  /** The relay form a rule may notify. */
  contactPoint: { siteId: string; formId: string };
  /** A relay admin API call as the owner; the answer's JSON. */
  relayAdmin(method: string, path: string, body?: unknown): Promise<any>;
  stop(): Promise<void>;
}

export async function startAlertingSluice(overrides: Record<string, unknown> = {}): Promise<AlertingSluice> {
  const smtp = await startSmtpInbox();
  const app = await startTestSluice({
    'console.enabled': true,
    'console.port': 0,
    'alerts.intervalSeconds': 5,
    'delivery.smtpUrl': smtp.url,
    'delivery.smtpFrom': 'Sluice Alerts <alerts@sluice.test>',
    ...overrides,
  });
  const owner = new ConsoleClient(app.console!.url);
  await owner.firstRun(app.console!.firstRunLink!, OWNER);
  const login = await fetch(`http://127.0.0.1:${app.relay!.port}/api/v1/admin/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: OWNER.email, password: OWNER.password }),
  });
  const { token } = (await login.json()) as { token: string };
  const relayAdmin = async (method: string, path: string, body?: unknown): Promise<any> => {
    const response = await fetch(`http://127.0.0.1:${app.relay!.port}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const site = await relayAdmin('POST', '/admin/sites', { name: 'ops', allowedOrigins: [] });
  const form = await relayAdmin('POST', `/admin/sites/${site.id}/forms`, { name: 'On call', formKey: 'on-call' });
  await relayAdmin('POST', `/admin/sites/${site.id}/forms/${form.id}/recipients`, { channel: 'email', address: ON_CALL });
  return {
    app, smtp, owner, relayAdmin,
    contactPoint: { siteId: site.id, formId: form.id },
    async stop() {
      await app.stop();
      await smtp.stop();
    },
  };
}

/** `count` server spans of `service`, `errors` of them failed, ending now. */
export async function sendSpans(app: Pick<TestSluice, 'baseUrl' | 'apiKey'>, service: string, count: number, errors: number): Promise<void> {
  const now = BigInt(Date.now()) * 1_000_000n;
  const spans = Array.from({ length: count }, (_, i) => ({
    traceId: randomBytes(16).toString('hex'),
    spanId: randomBytes(8).toString('hex'),
    name: 'POST /pay',
    kind: 2,
    startTimeUnixNano: String(now - 20_000_000n),
    endTimeUnixNano: String(now),
    status: { code: i < errors ? 2 : 1 },
  }));
  const payload = { resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] }, scopeSpans: [{ spans }] }] };
  const response = await fetch(`${app.baseUrl}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': app.apiKey }, body: JSON.stringify(payload) });
  expect(response.status).toBe(200);
}

/** The subjects of the mails whose subject names `name`. */
export function subjectsAbout(smtp: SmtpInbox, name: string): string[] {
  return smtp.mails.filter((mail) => mail.parsed.subject?.includes(name)).map((mail) => mail.parsed.subject!);
}
