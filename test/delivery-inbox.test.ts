/**
 * The development inbox (SLUICE_DELIVERY_INBOX) end to end. First, as sent: one job of each
 * channel, resolved and rendered by the relay's resolver, goes once to real peers (an SMTP server
 * parsing with mailparser, a local Cloud API, a webhook receiver verifying with standardwebhooks)
 * and once into the inbox; what the inbox kept equals what each peer received. Then a whole
 * `sluice serve` with the inbox on: a submission's email, WhatsApp message and webhook are kept
 * with no SMTP server or WhatsApp settings and a webhook host that does not exist, each attempt
 * recorded delivered and counted; the admin API and `sluice relay inbox list` show them to their
 * tenant only. Last, a cluster refuses the inbox at start-up.
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../core/log.ts';
import { SecretBox } from '../core/secret-box.ts';
import type { AttemptLog } from '../delivery/attempt-log.ts';
import { EmailSender } from '../delivery/email.ts';
import { EgressPolicy, LOOPBACK_AND_PRIVATE_NETWORKS } from '../delivery/egress.ts';
import { CAUGHT_STATUS, DevelopmentInbox, type InboxMessage } from '../delivery/inbox.ts';
import type { DeliveryJob } from '../delivery/job.ts';
import type { DeliveryQueue } from '../delivery/queue.ts';
import { RetryPolicy } from '../delivery/retry-policy.ts';
import { WebhookSender } from '../delivery/webhook.ts';
import { WhatsAppSender } from '../delivery/whatsapp.ts';
import { DeliveryWorker, sendingDispatch, type Dispatch } from '../delivery/worker.ts';
import { RelayJobResolver, type DeliveryDefaults } from '../relay/delivery-resolver.ts';
import type { DeliverySettings, Form } from '../relay/model.ts';
import { renderMessage } from '../relay/render.ts';
import { MessageRenderer } from '../relay/renderer.ts';
import { sanitizedBody } from '../relay/sanitize.ts';
import type { RelayStore } from '../relay/store.ts';
import { LocalStateStore } from '../state/local.ts';
import { startSmtpInbox, startWebhookReceiver, type SmtpInbox, type WebhookReceiver } from './delivery-peers.ts';
import { eventually } from './harness.ts';
import { startRelayFixture, type RelayFixture } from './relay-fixture.ts';
import { startFakeWhatsApp, type FakeWhatsApp } from './whatsapp-cloud-api.ts';

const run = promisify(execFile);
const SLUICE = fileURLToPath(new URL('../bin/sluice.mjs', import.meta.url));

describe('what the inbox keeps is what the senders send', () => {
  const TENANT = 'ten_asSent';
  const WHATSAPP = { token: 'EAAG-inbox-test-token', phoneNumberId: '109876543210' };
  const secrets = new SecretBox(randomBytes(32));
  const hookSecret = `whsec_${randomBytes(24).toString('base64')}`;
  let smtp: SmtpInbox;
  let whatsapp: FakeWhatsApp;
  let receiver: WebhookReceiver;
  let stateDir: string;
  let state: LocalStateStore;
  let form: Form;
  let store: RelayStore;
  let defaults: DeliveryDefaults;
  const renderer = new MessageRenderer({ run: async (request) => renderMessage(request), sanitize: async (html) => sanitizedBody(html) });

  beforeAll(async () => {
    smtp = await startSmtpInbox();
    whatsapp = await startFakeWhatsApp(WHATSAPP);
    receiver = await startWebhookReceiver();
    receiver.secret = hookSecret;
    stateDir = await mkdtemp(join(tmpdir(), 'sluice-inbox-as-sent-'));
    state = new LocalStateStore(stateDir);
    await state.start();
    const now = new Date().toISOString();
    form = {
      id: 'form_1', tenantId: TENANT, siteId: 'site_1', formKey: 'contact', name: 'Contact', active: true, createdAt: now, updatedAt: now,
      recipients: [], webhooks: [{ id: 'wh_1', url: receiver.url, secretSealed: secrets.seal(hookSecret), active: true }],
    };
    // The tenant's own SMTP server and WhatsApp number: both runs use the same settings.
    const settings: DeliverySettings = {
      id: TENANT, tenantId: TENANT, updatedAt: now,
      email: { from: 'Acme Forms <forms@acme.test>', smtpUrlSealed: secrets.seal(smtp.url) },
      whatsapp: { phoneNumberId: WHATSAPP.phoneNumberId, tokenSealed: secrets.seal(WHATSAPP.token) },
    };
    store = { forms: new Map([[form.id, form]]), templates: new Map(), deliverySettings: new Map([[TENANT, settings]]) } as unknown as RelayStore;
    defaults = {
      smtp: { url: '', from: '', maxConnections: 1, maxMessagesPerConnection: 10, ratePerSecond: 0, operatorServer: true, timeoutMs: 20_000 },
      serverFromDomains: [],
      whatsapp: { graphUrl: whatsapp.url, timeoutMs: 20_000 },
    };
  });
  afterAll(async () => {
    await smtp?.stop();
    await whatsapp?.close();
    await receiver?.close();
    await state?.shutdown();
    await rm(stateDir, { recursive: true, force: true });
  });

  /** One attempt of `job` through the relay's resolver and a worker with this dispatch. */
  async function attempt(job: DeliveryJob, dispatch: Dispatch, inbox: boolean) {
    const worker = new DeliveryWorker({
      queue: {} as DeliveryQueue,
      resolver: new RelayJobResolver(store, secrets, { ...defaults, inbox }, renderer),
      dispatch,
      policy: new RetryPolicy({ attempts: 1, baseDelayMs: 1000, maxDelayMs: 1000 }),
      history: { record: async () => {} } as unknown as AttemptLog,
      log: createLogger('silent'),
    });
    return worker.attempt({ job, attempt: 1 });
  }

  const job = (channel: DeliveryJob['channel'], destination: string, content: DeliveryJob['content'], kind: DeliveryJob['kind'] = 'submission'): DeliveryJob => ({
    id: randomUUID(), series: 1, tenantId: TENANT, siteId: form.siteId, formId: form.id, submissionId: randomUUID(), kind,
    channel, destination, createdAt: new Date().toISOString(), content,
  });

  // A visitor's values with markup, a line break and an address for Reply-To; a notification with its own HTML (sanitised at intake).
  const submission = { data: { name: 'Ada <b>Lovelace</b>', email: 'ada@example.com', message: 'Hello,\nthe pricing page & more' }, subject: '', body: '' };
  const notification = { data: { order: 1042 }, subject: 'Order 1042 shipped', body: '<p>It is <em>on its way</em> &amp; insured.</p>' };

  it('an email: the same From, To, Reply-To, Subject, Message-ID, X-Sluice-Job, text and HTML parts', async () => {
    const sender = new EmailSender({ egress: new EgressPolicy({ allow: LOOPBACK_AND_PRIVATE_NETWORKS }) });
    const inbox = new DevelopmentInbox({ state });
    try {
      for (const content of [submission, notification]) {
        const mailJob = job('email', 'sales@acme.test', content, content === submission ? 'submission' : 'notification');
        const before = smtp.mails.length;
        expect(await attempt(mailJob, sendingDispatch({ email: sender, whatsapp: new WhatsAppSender(), webhook: {} as WebhookSender }), false)).toEqual({ done: true });
        await eventually(() => smtp.mails.length > before);
        const received = smtp.mails.at(-1)!.parsed;
        expect(await attempt(mailJob, inbox, true)).toEqual({ done: true });
        const [kept] = (await inbox.list({ tenantId: TENANT, limit: 1 })) as [InboxMessage];
        expect(kept.jobId).toBe(mailJob.id);
        expect({
          from: kept.email!.from, to: kept.email!.to, replyTo: kept.email!.replyTo, subject: kept.subject,
          messageId: kept.email!.messageId, job: kept.email!.headers['X-Sluice-Job'], text: kept.text, html: kept.html,
        }).toEqual({
          from: received.from!.value[0], to: (received.to as { value: Array<{ address: string }> }).value[0]!.address, replyTo: received.replyTo?.value[0]?.address ?? null,
          subject: received.subject, messageId: received.messageId, job: received.headers.get('x-sluice-job'), text: received.text, html: received.html,
        });
      }
    } finally {
      await sender.close();
    }
    // What was compared is what a reader would look for.
    const kept = await inbox.list({ tenantId: TENANT, limit: 2 });
    expect(kept[1]!.email!.replyTo).toBe('ada@example.com');
    expect(kept[1]!.html).toContain('Ada &lt;b&gt;Lovelace&lt;/b&gt;');
    expect(kept[0]!.html).toContain('<p>It is <em>on its way</em> &amp; insured.</p>');
  });

  it('a WhatsApp message: the same Cloud API request, to the same URL', async () => {
    const inbox = new DevelopmentInbox({ state });
    const messageJob = job('whatsapp', '+4915112345678', submission);
    const dispatch = sendingDispatch({ email: {} as EmailSender, whatsapp: new WhatsAppSender(), webhook: {} as WebhookSender });
    expect(await attempt(messageJob, dispatch, false)).toEqual({ done: true });
    const received = whatsapp.messages.at(-1)!;
    expect(await attempt(messageJob, inbox, true)).toEqual({ done: true });
    const [kept] = (await inbox.list({ tenantId: TENANT, limit: 1 })) as [InboxMessage];
    expect(kept.whatsapp!.request).toEqual(received.body);
    expect(new URL(kept.whatsapp!.url!).pathname).toBe(received.path);
    expect(kept.text).toBe((received.body.text as { body: string }).body);
  });

  it('a webhook: the same body, id and headers, signed so that the receiver\'s check passes', async () => {
    const inbox = new DevelopmentInbox({ state });
    const hookJob = job('webhook', 'wh_1', submission);
    const sender = new WebhookSender({ egress: new EgressPolicy({ allow: LOOPBACK_AND_PRIVATE_NETWORKS }) });
    expect(await attempt(hookJob, sendingDispatch({ email: {} as EmailSender, whatsapp: new WhatsAppSender(), webhook: sender }), false)).toEqual({ done: true });
    const received = receiver.calls.at(-1)!;
    expect(received.verified).toBe(true);
    expect(await attempt(hookJob, inbox, true)).toEqual({ done: true });
    const [kept] = (await inbox.list({ tenantId: TENANT, limit: 1 })) as [InboxMessage];
    expect(kept.text).toBe(received.body);
    expect(kept.destination).toBe(receiver.url);
    // Each attempt signs its own time: the timestamp and signature may differ by a second, the rest may not.
    const { 'webhook-timestamp': _t, 'webhook-signature': _s, ...keptHeaders } = kept.webhook!.headers;
    const sent = Object.fromEntries(Object.keys(keptHeaders).map((name) => [name, received.headers[name]]));
    expect(keptHeaders).toEqual(sent);
    expect(() => new Webhook(hookSecret).verify(kept.text, kept.webhook!.headers)).not.toThrow();
  });
});

describe('sluice serve with the development inbox', () => {
  let relay: RelayFixture;
  const ORIGIN = 'http://127.0.0.1:8090';

  beforeAll(async () => {
    // No SMTP server, no WhatsApp settings, and a webhook host that does not exist: nothing could be sent.
    relay = await startRelayFixture({ 'delivery.inbox': true });
  });
  afterAll(async () => relay?.stop());

  it("keeps a submission's email, WhatsApp message and webhook; each attempt is delivered to the inbox, and counted", async () => {
    const { site, form } = await relay.siteWithForm({
      origins: [ORIGIN],
      recipients: [{ channel: 'email', address: 'sales@acme.example' }, { channel: 'whatsapp', address: '+4915112345678' }],
      webhooks: ['http://127.0.0.1:9/forms'],
    });
    const submitted = await relay.call('POST', '/submissions', {
      headers: { origin: ORIGIN },
      body: { siteKey: site.siteKey, formKey: 'contact', captchaToken: 'no-captcha', data: { name: 'Ada', email: 'ada@example.com', message: 'Hello' } },
    });
    expect(submitted.status, submitted.text).toBe(201);
    const { submissionId } = submitted.body;
    const listed = await eventually(async () => {
      const { messages } = await relay.admin('GET', '/admin/inbox') as { messages: InboxMessage[] };
      const mine = messages.filter((message) => message.submissionId === submissionId);
      return mine.length === 3 ? mine : undefined;
    }, 30_000, 200);
    expect(listed.map((message) => [message.channel, message.destination]).sort()).toEqual([
      ['email', 'sales@acme.example'], ['webhook', 'http://127.0.0.1:9/forms'], ['whatsapp', '+4915112345678'],
    ]);
    const email = listed.find((message) => message.channel === 'email')!;
    expect(email).toMatchObject({ subject: 'New submission: name, email, message', text: expect.stringContaining('message: Hello'), email: { from: null, to: 'sales@acme.example', replyTo: 'ada@example.com' } });
    expect(listed.find((message) => message.channel === 'whatsapp')!.whatsapp!.url).toBeNull();

    const { jobs } = await relay.admin('GET', `/admin/sites/${site.id}/forms/${form.id}/jobs`);
    expect(jobs.map((listedJob: { state: string; providerStatus: string }) => [listedJob.state, listedJob.providerStatus])).toEqual(Array(3).fill(['delivered', CAUGHT_STATUS]));
    const metrics = await (await fetch(`${relay.app.baseUrl}/metrics`)).text();
    for (const channel of ['email', 'whatsapp', 'webhook']) expect(metrics).toContain(`sluice_delivery_inbox_messages_total{channel="${channel}"} 1`);
    const ready = await (await fetch(`${relay.app.baseUrl}/api/v1/ready`)).json() as { components: Record<string, { ok: boolean; detail?: string }> };
    expect(ready.components['delivery.inbox']).toEqual({ ok: true, detail: 'development inbox on (SLUICE_DELIVERY_INBOX): nothing is sent' });
  });

  it("shows a tenant only its own messages: another tenant's inbox is empty", async () => {
    const other = await relay.otherTenant('Other Co');
    expect(await other.admin('GET', '/admin/inbox')).toEqual({ messages: [] });
    const mine = await relay.admin('GET', '/admin/inbox?limit=1');
    expect(mine.messages).toHaveLength(1);
    expect(mine.messages[0].tenantId).toBe(relay.tenantId);
    expect((await relay.call('GET', '/admin/inbox?limit=0', { token: relay.token })).status).toBe(400);
    // The answer is what the relay's OpenAPI document says it is.
    const doc = (await relay.call('GET', '/openapi.json')).body;
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    ajv.addSchema(JSON.parse(JSON.stringify({ $id: 'doc', $defs: doc.components.schemas }).replaceAll('#/components/schemas/', 'doc#/$defs/')));
    const validate = ajv.compile({ $ref: 'doc#/$defs/InboxPage' });
    const everything = await relay.admin('GET', '/admin/inbox');
    expect(validate(everything), ajv.errorsText(validate.errors)).toBe(true);
    expect(doc.paths['/api/v1/admin/inbox'].get.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/InboxPage' });
  });

  it('lists them with `sluice relay inbox list` through the control socket: one tenant, or every tenant', async () => {
    const env = { ...process.env, SLUICE_DATA_DIR: relay.app.dataDir, SLUICE_LOG_LEVEL: 'warn' };
    const { stdout } = await run(process.execPath, [SLUICE, 'relay', 'inbox', 'list', '--tenant', relay.tenantId, '--wait-for', '3'], { env });
    const listed = JSON.parse(stdout) as { messages: InboxMessage[] };
    expect(listed).toEqual(await relay.admin('GET', '/admin/inbox'));
    expect(listed.messages.map((message) => message.channel).sort()).toEqual(['email', 'webhook', 'whatsapp']);
    const all = JSON.parse((await run(process.execPath, [SLUICE, 'relay', 'inbox', 'list', '--limit', '2'], { env })).stdout) as { messages: InboxMessage[] };
    expect(all.messages).toEqual(listed.messages.slice(0, 2));
    const unknown = await run(process.execPath, [SLUICE, 'relay', 'inbox', 'list', '--tenant', 'ten_nobody'], { env }).catch((err: { code: number; stderr: string }) => err);
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringContaining('Tenant not found') });
  });
});

describe('the development inbox in a cluster', () => {
  it('is refused at start-up with NATS_URL, saying why', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'sluice-inbox-cluster-'));
    try {
      const env = { ...process.env, SLUICE_DATA_DIR: dataDir, SLUICE_DELIVERY_INBOX: 'true', NATS_URL: 'nats://127.0.0.1:1' };
      const refused = await run(process.execPath, [SLUICE, 'serve'], { env, timeout: 30_000 }).then(() => ({ code: 0, stderr: '' }), (err: { code: number; stderr: string }) => err);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('delivery.inbox (SLUICE_DELIVERY_INBOX): the development inbox is a feature of the embedded default (npm start), where nothing is sent; refused with NATS_URL');
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
