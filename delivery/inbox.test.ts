/**
 * The development inbox on the embedded state store: what it keeps of each channel, what it
 * refuses as the senders do, its bounds (the newest N per tenant, a byte budget per tenant, an
 * expiry), tenant scoping, and attempts of one tenant at once. A clock of the test's drives both
 * the inbox and the store, so the expiry is tested without waiting.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalStateStore } from '../state/local.ts';
import type { RenderedMessage } from './channel.ts';
import { EmailSender } from './email.ts';
import { EgressPolicy } from './egress.ts';
import { CAUGHT_STATUS, DevelopmentInbox } from './inbox.ts';
import type { DeliveryJob } from './job.ts';
import { testJob } from './queue.suite.ts';
import { WhatsAppSender } from './whatsapp.ts';
import { outgoing, type Outgoing } from './worker.ts';

const DAY = 24 * 60 * 60 * 1000;
let dir: string;
let state: LocalStateStore;
let clock: number;
const now = () => clock;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-inbox-'));
  clock = Date.parse('2026-11-24T10:00:00Z');
  state = new LocalStateStore(dir, now);
  await state.start();
});
afterEach(async () => {
  await state.shutdown();
  await rm(dir, { recursive: true, force: true });
});

const message: RenderedMessage = { subject: 'New lead: Ada', html: '<p>A new submission:</p><table><tr><th>name</th><td>Ada</td></tr></table>', text: 'name: Ada', replyTo: 'ada@example.com' };
const SMTP = { url: '', from: 'Relay <relay@example.com>', maxConnections: 1, maxMessagesPerConnection: 1, ratePerSecond: 0 };

/** An email job to `to` and what an attempt of it hands over. */
function emailAttempt(tenantId: string, to = 'sales@example.com', from = SMTP.from): { job: DeliveryJob; out: Outgoing } {
  const job = testJob({ tenantId, channel: 'email', destination: to });
  return { job, out: outgoing(job, { channel: 'email', settings: { ...SMTP, from }, message }, new Date(clock)) };
}

describe('DevelopmentInbox', () => {
  it('keeps an email with its headers and parts, a WhatsApp request and a signed webhook; each attempt delivered, saying where it went', async () => {
    const inbox = new DevelopmentInbox({ state, now });
    const email = emailAttempt('t1');
    expect(await inbox.dispatch(email.job, email.out)).toEqual({ kind: 'delivered', providerStatus: CAUGHT_STATUS });
    const whatsappJob = testJob({ tenantId: 't1', channel: 'whatsapp', destination: '+4915112345678' });
    const whatsappSettings = { graphUrl: 'https://graph.facebook.com/v21.0', phoneNumberId: '', token: '', timeoutMs: 1000 };
    await inbox.dispatch(whatsappJob, outgoing(whatsappJob, { channel: 'whatsapp', settings: whatsappSettings, message }, new Date(clock)));
    const hookJob = testJob({ tenantId: 't1', channel: 'webhook', destination: 'wh_1' });
    const body = JSON.stringify({ type: 'submission.created', data: { fields: { name: 'Ada' } } });
    await inbox.dispatch(hookJob, outgoing(hookJob, { channel: 'webhook', target: { url: 'https://hooks.example.com/in', secrets: ['whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ='] }, body }, new Date(clock)));

    const [hook, whatsapp, mail] = (await inbox.list({ tenantId: 't1', limit: 10 }));
    expect(mail).toEqual({
      seq: 1, tenantId: 't1', channel: 'email', destination: 'sales@example.com', caughtAt: '2026-11-24T10:00:00.000Z',
      jobId: email.job.id, series: 1, kind: 'submission', submissionId: email.job.submissionId, siteId: 's1', formId: 'f1',
      subject: 'New lead: Ada', text: 'name: Ada', html: message.html,
      email: { from: { name: 'Relay', address: 'relay@example.com' }, to: 'sales@example.com', replyTo: 'ada@example.com', messageId: `<${email.job.id}@example.com>`, headers: { 'X-Sluice-Job': `${email.job.id}.1` } },
    });
    expect(whatsapp).toMatchObject({
      seq: 2, channel: 'whatsapp', destination: '+4915112345678', subject: 'New lead: Ada', text: 'New lead: Ada\n\nname: Ada',
      // No WhatsApp settings: nothing would know the phone number id, so no URL.
      whatsapp: { url: null, request: { messaging_product: 'whatsapp', recipient_type: 'individual', to: '4915112345678', type: 'text', text: { preview_url: false, body: 'New lead: Ada\n\nname: Ada' } } },
    });
    expect(hook).toMatchObject({ seq: 3, channel: 'webhook', destination: 'https://hooks.example.com/in', subject: 'submission.created', text: body });
    expect(hook!.webhook!.headers).toMatchObject({ 'webhook-id': `msg_${hookJob.id}`, 'webhook-timestamp': String(clock / 1000), 'webhook-signature': expect.stringMatching(/^v1,[A-Za-z0-9+/]+=*$/) });
  });

  it('refuses what a sender refuses, in the same words, and keeps nothing of it', async () => {
    const inbox = new DevelopmentInbox({ state, now });
    const badTo = emailAttempt('t1', 'a@example.com, b@example.com');
    const sender = new EmailSender({ egress: new EgressPolicy() });
    const real = badTo.out.channel === 'email' ? await sender.send(badTo.out.settings, badTo.out.addressing, message) : undefined;
    expect(await inbox.dispatch(badTo.job, badTo.out)).toEqual(real);
    expect(real).toMatchObject({ kind: 'permanent', providerStatus: 'smtp invalid address' });
    const badFrom = emailAttempt('t1', 'sales@example.com', 'not an address');
    expect(await inbox.dispatch(badFrom.job, badFrom.out)).toMatchObject({ kind: 'permanent', error: 'the sender is not one email address: "not an address"' });
    const job = testJob({ tenantId: 't1', channel: 'whatsapp', destination: '0151 123' });
    const settings = { graphUrl: 'https://graph.facebook.com/v21.0', phoneNumberId: '1', token: 't', timeoutMs: 1000 };
    expect(await inbox.dispatch(job, outgoing(job, { channel: 'whatsapp', settings, message }, new Date()))).toEqual(await new WhatsAppSender().send(settings, '0151 123', message));
    expect(await inbox.list({ tenantId: 't1', limit: 10 })).toEqual([]);
  });

  it('keeps the newest messages of a tenant up to its cap, and deletes the older ones from the store', async () => {
    const inbox = new DevelopmentInbox({ state, now, limits: { messages: 5, bytes: 1024 * 1024, days: 7 } });
    for (let i = 0; i < 8; i++) {
      clock += 1000;
      const { job, out } = emailAttempt('t1');
      await inbox.dispatch(job, out);
    }
    expect((await inbox.list({ tenantId: 't1', limit: 100 })).map((kept) => kept.seq)).toEqual([8, 7, 6, 5, 4]);
    expect(await state.get('delivery_inbox', 't1.3')).toBeUndefined();
    expect(await state.get('delivery_inbox', 't1.4')).toBeDefined();
    expect((await inbox.list({ tenantId: 't1', limit: 2 })).map((kept) => kept.seq)).toEqual([8, 7]);
  });

  it('keeps a tenant within its byte budget, the newest message always', async () => {
    const big = { ...message, html: 'x'.repeat(40_000), text: 'y'.repeat(40_000) };
    const inbox = new DevelopmentInbox({ state, now, limits: { messages: 1000, bytes: 200_000, days: 7 } });
    for (let i = 0; i < 5; i++) {
      const job = testJob({ tenantId: 't1', channel: 'email', destination: 'sales@example.com' });
      await inbox.dispatch(job, outgoing(job, { channel: 'email', settings: SMTP, message: big }, new Date(clock)));
    }
    // About 80 kB each: two fit in 200 kB.
    expect((await inbox.list({ tenantId: 't1', limit: 100 })).map((kept) => kept.seq)).toEqual([5, 4]);
    const tiny = new DevelopmentInbox({ state, now, limits: { messages: 1000, bytes: 10, days: 7 } });
    const { job, out } = emailAttempt('t2');
    await tiny.dispatch(job, out);
    expect(await tiny.list({ tenantId: 't2', limit: 10 })).toHaveLength(1);
  });

  it('forgets messages after its days, and starts again afterwards', async () => {
    const inbox = new DevelopmentInbox({ state, now, limits: { messages: 1000, bytes: 1024 * 1024, days: 7 } });
    const first = emailAttempt('t1');
    await inbox.dispatch(first.job, first.out);
    clock += 6 * DAY;
    const second = emailAttempt('t1');
    await inbox.dispatch(second.job, second.out);
    clock += 2 * DAY;
    expect((await inbox.list({ tenantId: 't1', limit: 10 })).map((kept) => kept.jobId)).toEqual([second.job.id]);
    clock += 6 * DAY;
    expect(await inbox.list({ tenantId: 't1', limit: 10 })).toEqual([]);
    expect(await inbox.list({ limit: 10 })).toEqual([]);
    const third = emailAttempt('t1');
    await inbox.dispatch(third.job, third.out);
    expect((await inbox.list({ tenantId: 't1', limit: 10 })).map((kept) => kept.jobId)).toEqual([third.job.id]);
  });

  it("shows a tenant its own messages only; the operator's listing has every tenant's, tenant discovery's too", async () => {
    const inbox = new DevelopmentInbox({ state, now });
    for (const tenantId of ['t1', 't2', 't1', '']) {
      clock += 1000;
      const { job, out } = emailAttempt(tenantId);
      await inbox.dispatch(job, out);
    }
    expect((await inbox.list({ tenantId: 't1', limit: 10 })).map((kept) => kept.tenantId)).toEqual(['t1', 't1']);
    expect((await inbox.list({ tenantId: 't2', limit: 10 })).map((kept) => kept.tenantId)).toEqual(['t2']);
    expect(await inbox.list({ tenantId: 't3', limit: 10 })).toEqual([]);
    expect((await inbox.list({ limit: 10 })).map((kept) => kept.tenantId)).toEqual(['', 't1', 't2', 't1']);
  });

  it('gives each of many attempts of one tenant at once a place of its own', async () => {
    const inbox = new DevelopmentInbox({ state, now, limits: { messages: 30, bytes: 1024 * 1024, days: 7 } });
    const attempts = Array.from({ length: 40 }, () => emailAttempt('t1'));
    const outcomes = await Promise.all(attempts.map(({ job, out }) => inbox.dispatch(job, out)));
    expect(outcomes.every((outcome) => outcome.kind === 'delivered')).toBe(true);
    const kept = await inbox.list({ tenantId: 't1', limit: 100 });
    expect(kept.map((entry) => entry.seq)).toEqual(Array.from({ length: 30 }, (_, i) => 40 - i));
    expect(new Set(kept.map((entry) => entry.jobId)).size).toBe(30);
  });
});
