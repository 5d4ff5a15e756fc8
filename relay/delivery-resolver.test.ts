/**
 * Which SMTP transport and From an email job gets, from the tenant's settings as they are at the
 * attempt: the tenant's own server never inherits the operator's TLS exceptions, DKIM key or
 * exemption from the egress policy; the server's transport sends a tenant's From only in a
 * domain the operator verified. A store with one tenant's settings stands in for the relay's.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { SecretBox } from '../core/secret-box.ts';
import type { SmtpSettings } from '../delivery/email.ts';
import type { DeliveryJob } from '../delivery/job.ts';
import { RelayJobResolver, type DeliveryDefaults } from './delivery-resolver.ts';
import { renderMessage } from './render.ts';
import { MessageRenderer } from './renderer.ts';
import { sanitizedBody } from './sanitize.ts';
import type { DeliverySettings } from './model.ts';
import type { RelayStore } from './store.ts';

const secrets = new SecretBox(randomBytes(32));
const dkim = { domainName: 'relay.operator.test', keySelector: 's1', privateKey: 'pem' };
const SERVER: SmtpSettings = {
  url: 'smtp://operator:pw@127.0.0.1:2525',
  from: 'Relay <relay@relay.operator.test>',
  maxConnections: 5,
  maxMessagesPerConnection: 100,
  ratePerSecond: 0,
  tlsInsecure: true,
  operatorServer: true,
  timeoutMs: 60_000,
  dkim,
};
const defaults: DeliveryDefaults = { smtp: SERVER, serverFromDomains: ['verified.test'], whatsapp: { graphUrl: 'https://graph.example.test/v21.0', timeoutMs: 15_000 } };

/** The SMTP settings an email job of a tenant with these email settings resolves to. */
async function settingsFor(email: DeliverySettings['email']): Promise<SmtpSettings> {
  const tenantId = 'ten_1';
  const stored = new Map([[tenantId, { id: tenantId, tenantId, updatedAt: new Date().toISOString(), ...(email ? { email } : {}) }]]);
  const store = { deliverySettings: stored, forms: new Map(), templates: new Map() } as unknown as RelayStore;
  const job: DeliveryJob = {
    id: randomUUID(), series: 1, tenantId, siteId: 'site_1', formId: '', submissionId: 'sub_1', kind: 'notification',
    channel: 'email', destination: 'owner@example.test', createdAt: new Date().toISOString(), content: { data: {}, subject: 'Hi', body: '<p>Hi</p>' },
  };
  // Renders on this thread, whatever the size: what is tested is the transport.
  const renderer = new MessageRenderer({ run: async (request) => renderMessage(request), sanitize: async (html) => sanitizedBody(html) });
  const resolved = await new RelayJobResolver(store, secrets, defaults, renderer).resolve(job);
  if (resolved.channel !== 'email') throw new Error(`resolved to ${resolved.channel}`);
  return resolved.settings;
}

describe('RelayJobResolver: email transports', () => {
  it("sends through the tenant's own server without the operator's TLS exception, DKIM key or egress exemption", async () => {
    const settings = await settingsFor({ smtpUrlSealed: secrets.seal('smtp://t:pw@mail.tenant.test:587'), from: 'Forms <forms@tenant.test>' });
    expect(settings).toEqual({ url: 'smtp://t:pw@mail.tenant.test:587', from: 'Forms <forms@tenant.test>', maxConnections: 5, maxMessagesPerConnection: 100, ratePerSecond: 0, timeoutMs: 60_000 });
  });

  it("sends a tenant's From through the server's transport only in a verified domain, and signs only the server's From", async () => {
    expect(await settingsFor({ from: 'Forms <forms@verified.test>' })).toEqual({ ...SERVER, dkim: undefined, from: 'Forms <forms@verified.test>' });
    // Stored before the rule, or the operator changed the domains since: the server's own From.
    expect(await settingsFor({ from: 'Billing <billing@bank.test>' })).toEqual(SERVER);
    expect(await settingsFor(undefined)).toEqual(SERVER);
  });
});

describe('RelayJobResolver: the render pool full', () => {
  it('fails the attempt for now (retried), not dead, when its large message finds no room on the render pool', async () => {
    const busy = new SluiceError('unavailable', 'the render pool is busy (64 renders waiting)', { retryAfterSeconds: 1 });
    const renderer = new MessageRenderer({ run: () => Promise.reject(busy), sanitize: async (html) => sanitizedBody(html) }, 0);
    const store = { deliverySettings: new Map(), forms: new Map(), templates: new Map() } as unknown as RelayStore;
    const job: DeliveryJob = {
      id: randomUUID(), series: 1, tenantId: 'ten_1', siteId: 'site_1', formId: '', submissionId: 'sub_1', kind: 'notification',
      channel: 'email', destination: 'owner@example.test', createdAt: new Date().toISOString(), content: { data: {}, subject: 'Hi', body: '<p>Hi</p>' },
    };
    expect(await new RelayJobResolver(store, secrets, defaults, renderer).resolve(job)).toEqual({
      channel: 'none', error: 'not rendered: the render pool is busy (64 renders waiting)', retry: true,
    });
  });
});
