/**
 * A tenant's SMTP server that greets and then says nothing, end to end on the embedded default:
 * its attempts are given up at SLUICE_SMTP_TIMEOUT_MS (here 5 s; nodemailer alone waits 10
 * minutes), and meanwhile they hold at most the tenant's share of the delivery slots
 * (SLUICE_DELIVERY_TENANT_SLOTS, 16 of the 64): another tenant's 100 mails go through the
 * server's SMTP settings beside its 80, not behind them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRawPeer, startSmtpInbox, type RawPeer, type SmtpInbox } from './delivery-peers.ts';
import { eventually } from './harness.ts';
import { startRelayFixture, type RelayFixture } from './relay-fixture.ts';

/** Generous, for a loaded 2-core CI machine; stalled attempts would hold their slots for minutes. */
const WAIT_MS = 30_000;

let relay: RelayFixture;
let inbox: SmtpInbox;
let stalling: RawPeer;

beforeAll(async () => {
  inbox = await startSmtpInbox();
  stalling = await startRawPeer('220 stall.test ESMTP\r\n');
  relay = await startRelayFixture({ 'delivery.smtpUrl': inbox.url, 'delivery.smtpFrom': 'Sluice Relay <relay@sluice.test>', 'delivery.smtpTimeoutMs': 5000 });
});

afterAll(async () => {
  // The stalled sessions end: their attempts fail, and the server stops without waiting on them.
  await stalling?.close();
  await relay?.stop();
  await inbox?.stop();
});

async function submit(site: any, form: any, data: Record<string, unknown>): Promise<void> {
  const reply = await relay.call('POST', '/submissions', { body: { siteKey: site.siteKey, formKey: form.formKey, data } });
  expect(reply.status, reply.text).toBe(201);
}

/** A tenant of its own mailing through the stalling server, with a form to these recipients. */
async function stalledTenant(recipients: string[]) {
  const tenant = await relay.otherTenant(`Slow ${Math.random().toString(36).slice(2, 8)}`);
  await tenant.admin('PUT', '/admin/delivery-settings', { email: { smtpUrl: `smtp://127.0.0.1:${stalling.port}` } });
  const site = await tenant.admin('POST', '/admin/sites', { name: 'slow', allowedOrigins: [] });
  const form = await tenant.admin('POST', `/admin/sites/${site.id}/forms`, { name: 'Contact', formKey: 'contact' });
  for (const address of recipients) await tenant.admin('POST', `/admin/sites/${site.id}/forms/${form.id}/recipients`, { channel: 'email', address });
  const jobs = async (state: string): Promise<any[]> => (await tenant.admin('GET', `/admin/sites/${site.id}/forms/${form.id}/jobs?state=${state}&limit=1000`)).jobs;
  return { site, form, jobs };
}

describe('a tenant whose SMTP server greets and stalls', () => {
  it('has its attempt given up at SLUICE_SMTP_TIMEOUT_MS, failed and retried later', async () => {
    const slow = await stalledTenant(['sales@slow.test']);
    await submit(slow.site, slow.form, { name: 'Eve' });
    const [job] = await eventually(async () => {
      const failed = await slow.jobs('failed');
      return failed.length === 1 ? failed : undefined;
    }, WAIT_MS, 100);
    expect(job.attempts).toBe(1);
    expect(['smtp timeout', 'smtp connection']).toContain(job.providerStatus);
  }, 60_000);

  it("holds at most its 16 slots, while another tenant's 100 mails go through beside its 80", async () => {
    const slow = await stalledTenant(['one@slow.test', 'two@slow.test']);
    for (let n = 0; n < 40; n++) await submit(slow.site, slow.form, { n });
    let most = 0;
    const sending = async () => {
      const count = (await slow.jobs('sending')).length;
      most = Math.max(most, count);
      return count;
    };
    // Its attempts are under way and hang: as many as its share allows, no more.
    await eventually(async () => (await sending()) === 16, WAIT_MS, 100);

    const { site, form } = await relay.siteWithForm({ formKey: 'fast', recipients: [{ channel: 'email', address: 'fast@acme.test' }] });
    for (let n = 0; n < 100; n++) await submit(site, form, { n });
    await eventually(async () => {
      await sending();
      return inbox.mails.filter((mail) => mail.rcptTo.includes('fast@acme.test')).length === 100;
    }, WAIT_MS, 100);
    expect(most).toBe(16);
  }, 120_000);
});
