/**
 * POST /api/v1/notifications on a running `sluice serve` (relay spec 4.2, 5, 7, 8): the API key
 * (x-api-key only, bound to one site, revoked at once), form resolution, who may be named as a
 * recipient, address rules, lengths, sanitising, and what is stored and queued.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectValidationFailed, freshIp, startRelayFixture, type RelayFixture } from './relay-fixture.ts';

let relay: RelayFixture;
let site: any;
let form: any;
let key: { id: string; apiKey: string };

beforeAll(async () => {
  relay = await startRelayFixture();
  ({ site, form } = await relay.siteWithForm({
    recipients: [
      { channel: 'email', address: 'sales@example.com' },
      { channel: 'email', address: 'support@example.com' },
      { channel: 'whatsapp', address: '+4915112345678' },
      { channel: 'email', address: 'former@example.com', active: false },
    ],
    webhooks: ['http://127.0.0.1:9/hook'],
  }));
  key = await relay.apiKey(site.id);
});
afterAll(() => relay?.stop());

function notify(body: unknown, headers: Record<string, string> = { 'x-api-key': key.apiKey }, ip?: string) {
  return relay.call('POST', '/notifications', { body, headers, ip });
}

async function jobsOf(submissionId: string) {
  return relay.rows<{ Channel: string; Destination: string }>(`SELECT Channel, Destination FROM otel.relay_delivery_jobs WHERE SubmissionId = '${submissionId}' ORDER BY Channel, Destination`);
}

describe('the API key', () => {
  it('is read from x-api-key only: none is 401 Missing API key, an unknown one 401 Invalid API key', async () => {
    const body = { siteKey: site.siteKey, formKey: 'contact' };
    expectError(await notify(body, {}), 401, 'Missing API key');
    expectError(await notify(body, { authorization: `Bearer ${key.apiKey}` }), 401, 'Missing API key');
    expectError(await notify(body, { 'x-api-key': 'rk_not-a-key' }), 401, 'Invalid API key');
    expectError(await notify(body, { 'x-api-key': `${key.apiKey}x` }), 401, 'Invalid API key');
  });

  it('is refused on the next request once revoked', async () => {
    const revocable = await relay.apiKey(site.id);
    const body = { siteKey: site.siteKey, formKey: 'contact' };
    expect((await notify(body, { 'x-api-key': revocable.apiKey })).status).toBe(201);
    await relay.admin('DELETE', `/admin/api-keys/${revocable.id}`);
    expectError(await notify(body, { 'x-api-key': revocable.apiKey }), 401, 'Invalid API key');
  });

  it('belongs to one site: another siteKey is 403, and an inactive site refuses', async () => {
    const { site: other } = await relay.siteWithForm();
    expectError(await notify({ siteKey: other.siteKey, formKey: 'contact' }), 403, 'API key does not belong to this site');
    expectError(await notify({ siteKey: 'sk_unknown', formKey: 'contact' }), 403, 'API key does not belong to this site');
    const otherKey = await relay.apiKey(other.id);
    await relay.admin('PATCH', `/admin/sites/${other.id}`, { active: false });
    const inactive = await notify({ siteKey: other.siteKey, formKey: 'contact' }, { 'x-api-key': otherKey.apiKey });
    expectError(inactive, 403, 'This site is inactive: activate it in the admin to send notifications');
  });
});

describe('form and recipients', () => {
  it('uses the form\'s active recipients and webhooks when none are named', async () => {
    const reply = await notify({ siteKey: site.siteKey, formKey: 'contact', data: { order: 42 } });
    expect(reply.status, reply.text).toBe(201);
    expect(reply.body).toEqual({ success: true, submissionId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(await jobsOf(reply.body.submissionId)).toEqual([
      { Channel: 'email', Destination: 'sales@example.com' },
      { Channel: 'email', Destination: 'support@example.com' },
      { Channel: 'webhook', Destination: form.webhooks[0].id },
      { Channel: 'whatsapp', Destination: '+4915112345678' },
    ]);
    const [row] = await relay.rows(`SELECT * FROM otel.relay_submissions WHERE SubmissionId = toUUID('${reply.body.submissionId}')`);
    expect(row).toMatchObject({ Kind: 'notification', FormId: form.id, ApiKeyId: key.id, Data: '{"order":42}' });
  });

  it('filters the form\'s recipients by channels', async () => {
    const reply = await notify({ siteKey: site.siteKey, formKey: 'contact', channels: ['whatsapp'] });
    expect(await jobsOf(reply.body.submissionId)).toEqual([
      { Channel: 'webhook', Destination: form.webhooks[0].id },
      { Channel: 'whatsapp', Destination: '+4915112345678' },
    ]);
  });

  it('sends only to named recipients (no webhooks), each an active recipient of the form', async () => {
    const reply = await notify({ siteKey: site.siteKey, formKey: 'contact', recipients: { email: ['Sales@Example.com'] } });
    expect(reply.status).toBe(201);
    expect(await jobsOf(reply.body.submissionId)).toEqual([{ Channel: 'email', Destination: 'sales@example.com' }]);
    for (const stranger of ['someone@else.com', 'former@example.com']) {
      const refused = await notify({ siteKey: site.siteKey, formKey: 'contact', recipients: { email: ['sales@example.com', stranger] } });
      expectError(refused, 403, 'Recipient not configured for this site');
      expect(refused.text).not.toContain(stranger);
    }
    expectError(await notify({ siteKey: site.siteKey, formKey: 'contact', recipients: { whatsapp: ['+4915199999999'] } }), 403, 'Recipient not configured for this site');
  });

  it('without formKey, takes named recipients of any active form of the site, and needs some', async () => {
    const reply = await notify({ siteKey: site.siteKey, recipients: { email: ['support@example.com'], whatsapp: ['+4915112345678'] } });
    expect(reply.status, reply.text).toBe(201);
    expect(await jobsOf(reply.body.submissionId)).toEqual([{ Channel: 'email', Destination: 'support@example.com' }, { Channel: 'whatsapp', Destination: '+4915112345678' }]);
    expectValidationFailed(await notify({ siteKey: site.siteKey }), 'recipients');
  });

  it('answers 404 naming the formKey for an unknown or inactive form, never a silent 201', async () => {
    const message = (formKey: string) => `Form not found: ${formKey}. It may not exist on this site, or it may have been deactivated.`;
    expectError(await notify({ siteKey: site.siteKey, formKey: 'nope' }), 404, message('nope'));
    const { form: off } = await (async () => {
      const created = await relay.admin('POST', `/admin/sites/${site.id}/forms`, { name: 'Off', formKey: 'off' });
      return { form: await relay.admin('PATCH', `/admin/sites/${site.id}/forms/${created.id}`, { active: false }) };
    })();
    expect(off.active).toBe(false);
    expectError(await notify({ siteKey: site.siteKey, formKey: 'off' }), 404, message('off'));
  });

  it('checks channels against recipients', async () => {
    expectValidationFailed(await notify({ siteKey: site.siteKey, formKey: 'contact', channels: ['whatsapp'], recipients: { email: ['sales@example.com'] } }), 'recipients.whatsapp');
    expectValidationFailed(await notify({ siteKey: site.siteKey, formKey: 'contact', channels: ['email', 'whatsapp'], recipients: { email: ['sales@example.com'] } }), 'recipients.whatsapp');
  });
});

describe('validation', () => {
  const base = () => ({ siteKey: site.siteKey, formKey: 'contact' });

  it('refuses webhook as a channel or a recipients key', async () => {
    expectValidationFailed(await notify({ ...base(), channels: ['email', 'webhook'] }), 'channels[1]');
    expectValidationFailed(await notify({ ...base(), recipients: { webhook: ['https://x.example.com'] } }), 'recipients.webhook');
    expectValidationFailed(await notify({ ...base(), channels: ['sms'] }), 'channels[0]');
  });

  it('takes one plain email address of at most 254 characters: no lists, display names, quotes or line breaks', async () => {
    for (const bad of ['a@b.com, c@d.com', 'a@b.com;c@d.com', 'Sales <sales@example.com>', '"sales"@example.com', '"foo\r\nBcc: x@evil.com"@example.com', 'sales@example.com\r\nBcc: x@evil.com', 'sales@example.com\n', 'no-at-sign', `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.com`]) {
      expectValidationFailed(await notify({ ...base(), recipients: { email: [bad] } }), 'recipients.email[0]');
    }
  });

  it('takes E.164 WhatsApp numbers and at most 50 addresses per channel', async () => {
    for (const bad of ['4915112345678', '+0151123456', '+1234567', '+1234567890123456', '+49 151 1234567']) {
      expectValidationFailed(await notify({ ...base(), recipients: { whatsapp: [bad] } }), 'recipients.whatsapp[0]');
    }
    expectValidationFailed(await notify({ ...base(), recipients: { email: Array.from({ length: 51 }, (_, i) => `a${i}@example.com`) } }), 'recipients.email');
    expectValidationFailed(await notify({ ...base(), recipients: { email: [] } }), 'recipients.email');
  });

  it('holds subject, body, template and keys to their lengths; template is accepted and ignored', async () => {
    expectValidationFailed(await notify({ ...base(), subject: 's'.repeat(501) }), 'subject');
    expectValidationFailed(await notify({ ...base(), body: 'b'.repeat(100_001) }), 'body');
    expectValidationFailed(await notify({ ...base(), template: 't'.repeat(101) }), 'template');
    expectValidationFailed(await notify({ ...base(), siteKey: 'k'.repeat(101) }), 'siteKey');
    expectValidationFailed(await notify({ ...base(), formKey: 'k'.repeat(101) }), 'formKey');
    expectValidationFailed(await notify({ ...base(), data: { meta: { too: { deep: 1 } } } }), 'data.meta.too');
    expectValidationFailed(await notify({ ...base(), data: { _footer: 'x' } }), 'data._footer');
    const ok = await notify({ ...base(), subject: 's'.repeat(500), body: 'b'.repeat(100_000), template: 't'.repeat(100) });
    expect(ok.status, ok.text).toBe(201);
  });

  it('sanitises subject and body: script tags, event handlers and javascript: links gone, entities decoded first', async () => {
    const reply = await notify({
      ...base(),
      subject: 'Order &lt;script&gt;alert(1)&lt;/script&gt; shipped\r\nBcc: x@evil.com',
      body: '<p onclick="steal()">Hi <b>Ann</b></p><script>steal()</script><img src=x onerror=alert(1)>'
        + '<a href="&#106;avascript:alert(1)">link</a><a href="https://example.com/o/1">order</a>&lt;script&gt;alert(2)&lt;/script&gt;',
    });
    expect(reply.status).toBe(201);
    const [row] = await relay.rows<{ Subject: string; Body: string }>(`SELECT Subject, Body FROM otel.relay_submissions WHERE SubmissionId = toUUID('${reply.body.submissionId}')`);
    expect(row!.Subject).toBe('Order shipped Bcc: x@evil.com');
    expect(row!.Body).toBe('<p>Hi <b>Ann</b></p><a>link</a><a href="https://example.com/o/1">order</a>');
    for (const text of [row!.Subject, row!.Body]) expect(text).not.toMatch(/script|onclick|onerror|javascript/i);
  });

  it('sanitises a large body as a small one (on the render pool), and refuses one nested deeper than 256 with 400 naming body', async () => {
    const paragraph = '<p onclick="steal()">Order <b>1</b> shipped</p><script>steal()</script>';
    const reply = await notify({ ...base(), body: paragraph.repeat(1000) });
    expect(reply.status, reply.text).toBe(201);
    const [row] = await relay.rows<{ Body: string }>(`SELECT Body FROM otel.relay_submissions WHERE SubmissionId = toUUID('${reply.body.submissionId}')`);
    expect(row!.Body).toBe('<p>Order <b>1</b> shipped</p>'.repeat(1000));
    // 33,000 nested elements held the event loop 1.3 s in sanitize-html before this was refused.
    const nested = await notify({ ...base(), body: '<b>'.repeat(33_000) });
    expectValidationFailed(nested, 'body');
    expect(nested.body.message).toBe('Validation failed: body nests elements more than 256 deep');
  });
});

describe('rate limit (300 per IP in any 60 seconds)', () => {
  it('accepts 300 from one IP and refuses the 301st with 429', async () => {
    const ip = freshIp();
    const body = { siteKey: site.siteKey, recipients: { email: ['sales@example.com'] } };
    const replies = await Promise.all(Array.from({ length: 300 }, () => notify(body, { 'x-api-key': key.apiKey }, ip)));
    expect(replies.filter((r) => r.status === 201)).toHaveLength(300);
    const refused = await notify(body, { 'x-api-key': key.apiKey }, ip);
    expectError(refused, 429, 'ThrottlerException: Too Many Requests');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });
});
