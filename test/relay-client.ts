/**
 * The relay's HTTP API as a test drives it against `sluice` processes (test/sluice-processes.ts):
 * a tenant onboarded with the operator token, its owner signed in, sites, forms, recipients and
 * webhooks made, submissions sent, jobs read.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { WebhookReceiver } from './delivery-peers.ts';

let ipCounter = Math.floor(Math.random() * 60_000);

/** The relay's HTTP API on a process's relay port, signed in as a fresh tenant's owner. */
export class RelayClient {
  private token = '';

  constructor(
    private readonly relay: () => { relayPort: number },
    private readonly operatorToken: string,
  ) {}

  async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any; text: string }> {
    ipCounter++;
    const response = await fetch(`http://127.0.0.1:${this.relay().relayPort}/api/v1${path}`, {
      method,
      headers: {
        // A client IP of its own per call (from a trusted proxy): no rate-limit window is shared.
        'x-forwarded-for': `198.18.${(ipCounter >> 8) & 255}.${ipCounter & 255}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, text };
  }

  /** An admin call; expects success. */
  async admin(method: string, path: string, body?: unknown): Promise<any> {
    const reply = await this.call(method, path, body);
    if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
    return reply.body;
  }

  /** Onboards a tenant with the operator token and signs in as its owner; returns the owner's credentials. */
  async onboard(): Promise<{ email: string; password: string }> {
    const email = `owner-${randomBytes(4).toString('hex')}@relay.test`;
    const password = 'a long password for tests';
    const onboarded = await this.call('POST', '/admin/tenants', { name: 'Acme', owner: { email, password } }, { 'x-operator-token': this.operatorToken });
    expect(onboarded.status, onboarded.text).toBe(201);
    const login = await this.call('POST', '/admin/login', { email, password });
    expect(login.status, login.text).toBe(200);
    this.token = login.body.token;
    return { email, password };
  }

  /** A site with a form, these email recipients and a webhook to each hook (its secret set on the receiver). */
  async form(options: { emails?: string[]; hook?: WebhookReceiver; hooks?: WebhookReceiver[] }): Promise<{ site: any; form: any }> {
    const site = await this.admin('POST', '/admin/sites', { name: 'web', allowedOrigins: [] });
    const form = await this.admin('POST', `/admin/sites/${site.id}/forms`, { name: 'Contact', formKey: `f${randomBytes(4).toString('hex')}` });
    for (const address of options.emails ?? []) await this.admin('POST', `/admin/sites/${site.id}/forms/${form.id}/recipients`, { channel: 'email', address });
    for (const hook of [...(options.hook ? [options.hook] : []), ...(options.hooks ?? [])]) {
      hook.secret = (await this.admin('POST', `/admin/sites/${site.id}/forms/${form.id}/webhooks`, { url: hook.url })).secret;
    }
    return { site, form };
  }

  async submit(site: any, form: any, data: Record<string, unknown>): Promise<string> {
    const reply = await this.call('POST', '/submissions', { siteKey: site.siteKey, formKey: form.formKey, data });
    expect(reply.status, reply.text).toBe(201);
    return reply.body.submissionId;
  }

  async jobs(site: any, form: any): Promise<any[]> {
    return (await this.admin('GET', `/admin/sites/${site.id}/forms/${form.id}/jobs`)).jobs;
  }
}
