/**
 * Delivery end to end on the embedded default: submissions and notifications through the relay's
 * public API, delivered by `sluice serve`'s workers to real peers — an SMTP server, a local
 * server answering as the WhatsApp Cloud API does, and webhook receivers that check signatures
 * with the standardwebhooks package — with retries, dead jobs and manual retries seen through
 * the admin API and /metrics.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeWhatsApp, type FakeWhatsApp } from './whatsapp-cloud-api.ts';
import { startRawPeer, startSmtpInbox, startWebhookReceiver, type SmtpInbox, type WebhookReceiver } from './delivery-peers.ts';
import { eventually } from './harness.ts';
import { maximumData, startRelayFixture, type RelayFixture } from './relay-fixture.ts';

const WHATSAPP = { token: 'EAAG-test-token-0123456789', phoneNumberId: '109876543210' };
/** Long enough for a few attempts on a loaded machine. */
const WAIT_MS = 30_000;

let relay: RelayFixture;
let smtp: SmtpInbox;
let whatsapp: FakeWhatsApp;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  smtp = await startSmtpInbox();
  whatsapp = await startFakeWhatsApp(WHATSAPP);
  relay = await startRelayFixture({
    'delivery.smtpUrl': smtp.url,
    'delivery.smtpFrom': 'Sluice Relay <relay@sluice.test>',
    'delivery.whatsappGraphUrl': whatsapp.url,
    // Five attempts, 0.15-0.3 s, 0.3-0.6 s, 0.6-1.2 s and 1.2-2.4 s apart: a job is dead no sooner than 2 s after its first failure.
    'delivery.attempts': 5,
    'delivery.backoffBaseMs': 300,
    'delivery.backoffMaxMs': 3000,
  });
  await relay.admin('PUT', '/admin/delivery-settings', { whatsapp: { phoneNumberId: WHATSAPP.phoneNumberId, token: WHATSAPP.token } });
});

afterAll(async () => {
  await relay?.stop();
  await smtp?.stop();
  await whatsapp?.close();
  for (const receiver of receivers) await receiver.close();
});

async function receiver(): Promise<WebhookReceiver> {
  const started = await startWebhookReceiver();
  receivers.push(started);
  return started;
}

/** A form with these recipients and one webhook to `hook` (its secret set on the receiver). */
async function formFor(options: { emails?: string[]; phones?: string[]; hook?: WebhookReceiver; formKey?: string }) {
  const recipients = [
    ...(options.emails ?? []).map((address) => ({ channel: 'email' as const, address })),
    ...(options.phones ?? []).map((address) => ({ channel: 'whatsapp' as const, address })),
  ];
  const { site, form } = await relay.siteWithForm({ recipients, formKey: options.formKey ?? `f${Math.random().toString(36).slice(2, 10)}` });
  if (options.hook) {
    const created = await relay.admin('POST', `/admin/sites/${site.id}/forms/${form.id}/webhooks`, { url: options.hook.url });
    options.hook.secret = created.secret;
  }
  return { site, form };
}

async function submit(site: any, form: any, data: Record<string, unknown>): Promise<string> {
  const reply = await relay.call('POST', '/submissions', { body: { siteKey: site.siteKey, formKey: form.formKey, data } });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.submissionId;
}

async function jobs(site: any, form: any, state?: string): Promise<any[]> {
  return (await relay.admin('GET', `/admin/sites/${site.id}/forms/${form.id}/jobs${state ? `?state=${state}` : ''}`)).jobs;
}

/** Waits until every job of the form is in `state` (and there are `count`). */
function allJobs(site: any, form: any, state: string, count: number) {
  return eventually(async () => {
    const listed = await jobs(site, form);
    return listed.length === count && listed.every((job) => job.state === state) ? listed : undefined;
  }, WAIT_MS, 100);
}

describe('delivery of a submission', () => {
  it('sends the form\'s email (escaped, with a text part and Reply-To), its WhatsApp message and its signed webhook', async () => {
    const hook = await receiver();
    const { site, form } = await formFor({ emails: ['owner@acme.test'], phones: ['+15551234567'], hook });
    const submissionId = await submit(site, form, { name: '<b>Ada</b> & co', email: 'ada@example.com', message: 'Hello\r\nBcc: evil@attacker.test' });
    const listed = await allJobs(site, form, 'delivered', 3);
    expect(listed.map((job) => job.channel).sort()).toEqual(['email', 'webhook', 'whatsapp']);

    const mail = smtp.mails.find((m) => m.rcptTo.includes('owner@acme.test'))!;
    expect(mail.rcptTo).toEqual(['owner@acme.test']);
    expect(mail.parsed.from?.text).toBe('"Sluice Relay" <relay@sluice.test>');
    expect(mail.parsed.replyTo?.text).toBe('ada@example.com');
    expect(mail.parsed.html).toContain('&lt;b&gt;Ada&lt;/b&gt; &amp; co');
    expect(mail.parsed.html).not.toContain('<b>Ada</b>');
    expect(mail.parsed.text).toContain('<b>Ada</b> & co');
    expect(mail.parsed.headers.get('x-sluice-job')).toMatch(new RegExp(`^${listed.find((j) => j.channel === 'email').jobId}\\.1$`));
    const head = mail.raw.split(/\r?\n\r?\n/)[0]!;
    expect(head).not.toMatch(/^Bcc:/im);
    expect(mail.parsed.bcc).toBeUndefined();

    const sent = whatsapp.messages.find((m) => m.waId === '15551234567')!;
    expect(sent.authorization).toBe(`Bearer ${WHATSAPP.token}`);
    expect((sent.body.text as { body: string }).body).toContain('<b>Ada</b> & co');

    expect(hook.calls).toHaveLength(1);
    expect(hook.calls[0]!.verified).toBe(true);
    const event = JSON.parse(hook.calls[0]!.body);
    expect(event).toMatchObject({ type: 'submission.created', data: { submissionId, formKey: form.formKey, fields: { name: '<b>Ada</b> & co' } } });

    const job = await relay.admin('GET', `/admin/jobs/${listed[0].jobId}`);
    expect(job.attempts.map((a: any) => a.state)).toEqual(['sending', 'delivered']);
  });

  it('retries a webhook that answered 500, and the receiver gets the same webhook-id both times', async () => {
    const hook = await receiver();
    hook.answers.push(500);
    const { site, form } = await formFor({ hook });
    await submit(site, form, { name: 'Bob' });
    const [job] = await allJobs(site, form, 'delivered', 1);
    expect(hook.calls.map((call) => call.verified)).toEqual([true, true]);
    expect(hook.calls[0]!.headers['webhook-id']).toBe(hook.calls[1]!.headers['webhook-id']);
    const { attempts } = await relay.admin('GET', `/admin/jobs/${job.jobId}`);
    expect(attempts.map((a: any) => [a.attempt, a.state])).toEqual([[1, 'sending'], [1, 'failed'], [2, 'sending'], [2, 'delivered']]);
    expect(attempts[1].providerStatus).toBe('http 500');
    expect(attempts[1].nextAttemptAt).not.toBeNull();
  });

  it('makes a job dead after the last attempt; a manual retry starts a fresh series and delivers it', async () => {
    const hook = await receiver();
    hook.then = 503;
    const { site, form } = await formFor({ hook });
    await submit(site, form, { name: 'Cy' });
    const [dead] = await allJobs(site, form, 'dead', 1);
    expect(dead.attempts).toBe(5);
    expect(hook.calls).toHaveLength(5);
    expect((await jobs(site, form, 'dead')).map((job) => job.jobId)).toEqual([dead.jobId]);

    hook.then = 200;
    const retried = await relay.call('POST', `/admin/jobs/${dead.jobId}/retry`, { token: relay.token });
    expect(retried.status, retried.text).toBe(202);
    expect(retried.body).toEqual({ jobId: dead.jobId, series: 2, state: 'queued' });
    const [delivered] = await allJobs(site, form, 'delivered', 1);
    expect(delivered.series).toBe(2);
    expect(hook.calls).toHaveLength(6);
    // Retrying a job that is not dead is refused.
    const again = await relay.call('POST', `/admin/jobs/${dead.jobId}/retry`, { token: relay.token });
    expect(again.status).toBe(409);
    expect(again.body.message).toBe('Only a dead job can be retried; this one is delivered');
  });

  it('sends a permanently refused email straight to dead (one attempt), and retries all dead jobs of a form at once', async () => {
    smtp.refuse.set('gone@acme.test', 550);
    const { site, form } = await formFor({ emails: ['gone@acme.test'] });
    await submit(site, form, { n: 1 });
    await submit(site, form, { n: 2 });
    const dead = await allJobs(site, form, 'dead', 2);
    expect(dead.every((job) => job.attempts === 1 && job.providerStatus === 'smtp 550')).toBe(true);
    smtp.refuse.delete('gone@acme.test');
    const retried = await relay.call('POST', `/admin/sites/${site.id}/forms/${form.id}/jobs/retry-dead`, { token: relay.token });
    expect(retried.status).toBe(202);
    expect(retried.body).toEqual({ retried: 2, more: false });
    await allJobs(site, form, 'delivered', 2);
    expect(smtp.mails.filter((m) => m.rcptTo.includes('gone@acme.test'))).toHaveLength(2);
  });

  it('delivers each message once when the SMTP server was down for a while', async () => {
    const { site, form } = await formFor({ emails: ['ops@acme.test'] });
    await smtp.stop();
    try {
      for (let n = 0; n < 4; n++) await submit(site, form, { n });
      await eventually(async () => (await jobs(site, form, 'failed')).length === 4, WAIT_MS, 50);
    } finally {
      await smtp.start();
    }
    await allJobs(site, form, 'delivered', 4);
    const received = smtp.mails.filter((m) => m.rcptTo.includes('ops@acme.test'));
    expect(received).toHaveLength(4);
    expect(new Set(received.map((m) => m.parsed.messageId)).size).toBe(4);
  });

  it('makes a WhatsApp job with a bad token dead, and waits out a throttle', async () => {
    const { site, form } = await formFor({ phones: ['+15550000001', '+15550000002'] });
    whatsapp.setMode('bad-token', { to: '+15550000001' });
    whatsapp.setMode('throttled', { to: '+15550000002', retryAfterSeconds: 1 });
    await submit(site, form, { hello: 'world' });
    await eventually(async () => (await jobs(site, form, 'dead')).length === 1 && (await jobs(site, form, 'failed')).length === 1, WAIT_MS, 100);
    whatsapp.setMode('ok', { to: '+15550000002' });
    await eventually(async () => (await jobs(site, form, 'delivered')).length === 1, WAIT_MS, 100);
    const [dead] = await jobs(site, form, 'dead');
    expect(dead.destination).toBe('+15550000001');
    expect(dead.providerStatus).toMatch(/^http 401 code 190/);
  });
});

describe('what an email reads like, and how large it may be', () => {
  /** The text part of the one mail `address` received for the form's submission. */
  const textOf = async (address: string) => (await eventually(() => smtp.mails.find((m) => m.rcptTo.includes(address)), WAIT_MS, 100)).parsed.text ?? '';

  it('writes the fields of a submission as `name: value` lines in the text part, as a mail client shows it', async () => {
    const { site, form } = await formFor({ emails: ['lines@acme.test'] });
    await submit(site, form, { name: 'Ada Lovelace', email: 'ada@example.org', message: 'Please call me back', meta: { page: '/pricing', ref: 'ad' } });
    await allJobs(site, form, 'delivered', 1);
    const lines = (await textOf('lines@acme.test')).split('\n').map((line) => line.trimEnd());
    expect(lines).toEqual(expect.arrayContaining(['name: Ada Lovelace', 'email: ada@example.org', 'message: Please call me back', 'meta:', '  page: /pricing', '  ref: ad']));
  });

  it('keeps a template\'s own text in the text part, with {{ @fields }} as lines', async () => {
    const { site, form } = await formFor({ emails: ['custom@acme.test'] });
    const template = await relay.admin('POST', '/admin/templates', { name: 'Lead', subject: 'Lead from {{ name }}', html: '<h1>A new lead</h1><p>From the page {{ meta.page }}.</p>{{ @fields }}<p>Reply soon.</p>' });
    await relay.admin('PATCH', `/admin/sites/${site.id}/forms/${form.id}`, { templateId: template.id });
    await submit(site, form, { name: 'Ada Lovelace', meta: { page: '/pricing' } });
    await allJobs(site, form, 'delivered', 1);
    expect((await textOf('custom@acme.test')).split('\n')).toEqual(['A new lead', '', 'From the page /pricing.', '', 'name: Ada Lovelace', 'meta:', '  page: /pricing', '', 'Reply soon.']);
  });

  it('delivers ten submissions at the documented maximum (100 fields of 10,000 characters, meta of 100 more), text parts readable', async () => {
    const { site, form } = await formFor({ emails: ['big@acme.test'] });
    const data = maximumData();
    for (let n = 0; n < 10; n++) await submit(site, form, data);
    await allJobs(site, form, 'delivered', 10);
    const mails = smtp.mails.filter((m) => m.rcptTo.includes('big@acme.test'));
    expect(mails).toHaveLength(10);
    for (const mail of mails) {
      const lines = (mail.parsed.text ?? '').split('\n');
      expect(lines.filter((line) => /^field\d+: \d+:</.test(line))).toHaveLength(99);
      expect(lines).toContain(`  m99: ${'&'.repeat(400)}`);
    }
  });

  it('makes a job dead, saying why, when its message would be over the size limit', async () => {
    const { site, form } = await formFor({ emails: ['huge@acme.test'] });
    const template = await relay.admin('POST', '/admin/templates', { name: 'Huge', subject: 's', html: '{{ meta }}'.repeat(150) });
    await relay.admin('PATCH', `/admin/sites/${site.id}/forms/${form.id}`, { templateId: template.id });
    await submit(site, form, { meta: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`m${i}`, "'".repeat(400)])) });
    const [dead] = await allJobs(site, form, 'dead', 1);
    expect(dead.attempts).toBe(1);
    expect(dead.lastError).toMatch(/^the message would be [\d,]+ characters \(HTML and text parts\), [\d,]+ over the limit of 8,000,000$/);
    expect(smtp.mails.some((m) => m.rcptTo.includes('huge@acme.test'))).toBe(false);
  });
});

describe('tenant delivery settings', () => {
  it('sends a tenant\'s email through its own SMTP server and From, and never shows the SMTP URL', async () => {
    const own = await startSmtpInbox();
    try {
      // A second tenant, so the fixture's tenant keeps the server's SMTP settings.
      const other = await relay.otherTenant('Beta');
      const settings = await other.admin('PUT', '/admin/delivery-settings', { email: { from: 'Beta Forms <forms@beta.test>', smtpUrl: `smtp://beta:pw-s3cret@127.0.0.1:${own.port}` } });
      expect(settings.email).toEqual({ from: 'Beta Forms <forms@beta.test>', smtpServerConfigured: true });
      expect(JSON.stringify(await other.admin('GET', '/admin/delivery-settings'))).not.toContain('s3cret');
      const site = await other.admin('POST', '/admin/sites', { name: 'beta', allowedOrigins: [] });
      const form = await other.admin('POST', `/admin/sites/${site.id}/forms`, { name: 'Contact', formKey: 'contact' });
      await other.admin('POST', `/admin/sites/${site.id}/forms/${form.id}/recipients`, { channel: 'email', address: 'sales@beta.test' });
      await submit(site, form, { name: 'Eve' });
      const mail = await eventually(() => own.mails.find((m) => m.rcptTo.includes('sales@beta.test')), WAIT_MS, 100);
      expect(mail.parsed.from?.text).toBe('"Beta Forms" <forms@beta.test>');
      expect(smtp.mails.some((m) => m.rcptTo.includes('sales@beta.test'))).toBe(false);
      const refused = await relay.call('PUT', '/admin/delivery-settings', { token: other.token, body: { email: { from: 'a@b.test\r\nBcc: x@y.test' } } });
      expect(refused.status).toBe(400);
    } finally {
      await own.stop();
    }
  });
});

describe("a tenant's SMTP server that is not a mail server", () => {
  /** A tenant whose own SMTP URL is `smtpUrl`, and a form mailing one recipient. */
  async function tenantMailingThrough(smtpUrl: string) {
    const tenant = await relay.otherTenant(`T${Math.random().toString(36).slice(2, 8)}`);
    await tenant.admin('PUT', '/admin/delivery-settings', { email: { smtpUrl } });
    const site = await tenant.admin('POST', '/admin/sites', { name: 'web', allowedOrigins: [] });
    const form = await tenant.admin('POST', `/admin/sites/${site.id}/forms`, { name: 'Contact', formKey: 'contact' });
    await tenant.admin('POST', `/admin/sites/${site.id}/forms/${form.id}/recipients`, { channel: 'email', address: 'sales@tenant.test' });
    await submit(site, form, { name: 'Eve' });
    // The first attempt's outcome, as the admin API shows it to the tenant.
    return eventually(async () => {
      const [job] = (await tenant.admin('GET', `/admin/sites/${site.id}/forms/${form.id}/jobs`)).jobs;
      return job && job.attempts > 0 && job.state !== 'sending' ? job : undefined;
    }, WAIT_MS, 100);
  }

  it("shows the tenant what the protocol refused, never the peer's banner", async () => {
    const ssh = await startRawPeer('SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n');
    try {
      const job = await tenantMailingThrough(`smtp://127.0.0.1:${ssh.port}`);
      expect(job).toMatchObject({ providerStatus: 'smtp protocol', lastError: "the server's greeting is not SMTP" });
      expect(JSON.stringify(job)).not.toContain('SSH');
    } finally {
      await ssh.close();
    }
  });
});

describe('webhook secret rotation', () => {
  it('signs with the new and the previous secret for a day, so a receiver on either verifies', async () => {
    const hook = await receiver();
    const { site, form } = await formFor({ hook });
    const oldSecret = hook.secret;
    const webhookId = form.webhooks?.[0]?.id ?? (await relay.admin('GET', `/admin/sites/${site.id}/forms/${form.id}`)).webhooks[0].id;
    const rotated = await relay.admin('PATCH', `/admin/sites/${site.id}/forms/${form.id}/webhooks/${webhookId}`, { rotateSecret: true });
    expect(rotated.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(rotated.secret).not.toBe(oldSecret);
    expect(JSON.stringify(rotated)).not.toContain('Sealed');
    // Nor does the form show the sealed secrets, the previous one included.
    expect(JSON.stringify(await relay.admin('GET', `/admin/sites/${site.id}/forms/${form.id}`))).not.toContain('Sealed');
    await submit(site, form, { name: 'Dee' });
    await allJobs(site, form, 'delivered', 1);
    const [call] = hook.calls;
    expect(String(call!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(call!.verified).toBe(true); // with the old secret
    hook.secret = rotated.secret;
    const { Webhook } = await import('standardwebhooks');
    expect(() => new Webhook(rotated.secret).verify(call!.body, call!.headers as Record<string, string>)).not.toThrow();
  });
});

describe('delivery of a notification', () => {
  it('fires webhooks only when it names no recipients', async () => {
    const hook = await receiver();
    const { site, form } = await formFor({ emails: ['team@acme.test'], hook });
    const { apiKey } = await relay.apiKey(site.id);
    const send = (body: Record<string, unknown>) => relay.call('POST', '/notifications', { body: { siteKey: site.siteKey, formKey: form.formKey, ...body }, headers: { 'x-api-key': apiKey } });
    expect((await send({ recipients: { email: ['team@acme.test'] }, subject: 'Named', body: '<p>one</p>' })).status).toBe(201);
    expect((await send({ subject: 'Unnamed', body: '<p>two</p><script>alert(1)</script>' })).status).toBe(201);
    await allJobs(site, form, 'delivered', 3);
    expect(hook.calls).toHaveLength(1);
    expect(JSON.parse(hook.calls[0]!.body)).toMatchObject({ type: 'notification.created', data: { subject: 'Unnamed', body: '<p>two</p>' } });
    const subjects = smtp.mails.filter((m) => m.rcptTo.includes('team@acme.test')).map((m) => m.parsed.subject).sort();
    expect(subjects).toEqual(['Named', 'Unnamed']);
  });
});

describe('delivery of the relay\'s own email', () => {
  it('sends the tenant discovery email through the server\'s SMTP settings', async () => {
    const { user } = await relay.admin('GET', '/admin/me');
    const reply = await relay.call('POST', '/tenant-discovery', { body: { email: user.email } });
    expect(reply.status).toBe(200);
    const mail = await eventually(() => smtp.mails.find((m) => m.rcptTo.includes(user.email)), WAIT_MS, 100);
    expect(mail.parsed.subject).toBe('Your Sluice relay tenants');
    expect(mail.parsed.html).toContain('Acme');
    expect(mail.parsed.text).toContain('Acme');
  });
});

describe('delivery metrics', () => {
  it('counts attempts per channel and outcome and shows the queue depth', async () => {
    const text = await (await fetch(`http://127.0.0.1:${relay.app.httpPort}/metrics`)).text();
    expect(text).toMatch(/sluice_delivery_attempts_total\{channel="webhook",outcome="delivered"\} [1-9]/);
    expect(text).toMatch(/sluice_delivery_attempts_total\{channel="email",outcome="dead"\} [1-9]/);
    expect(text).toMatch(/sluice_delivery_attempt_seconds_count\{channel="email",outcome="delivered"\} [1-9]/);
    expect(text).toMatch(/^sluice_delivery_queue_depth \d+$/m);
  });
});
