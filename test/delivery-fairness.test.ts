/**
 * Shares between tenants, end to end on the embedded default: one tenant's SMTP server greets
 * and then says nothing, and that tenant has 80 mails to send; another tenant's 100 mails go
 * through the server's SMTP settings meanwhile. The stalled tenant holds at most its slots
 * (SLUICE_DELIVERY_TENANT_SLOTS, 16 of the 64), so the other's mail is not held up behind it.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSmtpInbox, type SmtpInbox } from './delivery-peers.ts';
import { eventually } from './harness.ts';
import { startRelayFixture, type RelayFixture } from './relay-fixture.ts';

let relay: RelayFixture;
let inbox: SmtpInbox;
let stalling: { server: Server; sockets: Set<Socket>; port: number };

/** An SMTP server that greets, then never answers: every session hangs at EHLO. */
async function startStallingSmtp() {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.write('220 stall.test ESMTP\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, sockets, port: (server.address() as AddressInfo).port };
}

beforeAll(async () => {
  inbox = await startSmtpInbox();
  stalling = await startStallingSmtp();
  relay = await startRelayFixture({ 'delivery.smtpUrl': inbox.url, 'delivery.smtpFrom': 'Sluice Relay <relay@sluice.test>' });
});

afterAll(async () => {
  // The stalled sessions end: their attempts fail, and the server stops without waiting on them.
  for (const socket of stalling?.sockets ?? []) socket.destroy();
  stalling?.server.close();
  await relay?.stop();
  await inbox?.stop();
});

async function submit(site: any, form: any, data: Record<string, unknown>): Promise<void> {
  const reply = await relay.call('POST', '/submissions', { body: { siteKey: site.siteKey, formKey: form.formKey, data } });
  expect(reply.status, reply.text).toBe(201);
}

describe('delivery shares between tenants', () => {
  it("delivers a tenant's 100 mails while another tenant's SMTP server greets and stalls with 80 of its own", async () => {
    const slow = await relay.otherTenant('Slow');
    await slow.admin('PUT', '/admin/delivery-settings', { email: { smtpUrl: `smtp://127.0.0.1:${stalling.port}` } });
    const slowSite = await slow.admin('POST', '/admin/sites', { name: 'slow', allowedOrigins: [] });
    const slowForm = await slow.admin('POST', `/admin/sites/${slowSite.id}/forms`, { name: 'Contact', formKey: 'contact' });
    for (const address of ['one@slow.test', 'two@slow.test']) {
      await slow.admin('POST', `/admin/sites/${slowSite.id}/forms/${slowForm.id}/recipients`, { channel: 'email', address });
    }
    for (let n = 0; n < 40; n++) await submit(slowSite, slowForm, { n });
    // Its attempts are under way and hang: as many as its share allows, no more.
    const sending = async () => (await slow.admin('GET', `/admin/sites/${slowSite.id}/forms/${slowForm.id}/jobs?state=sending&limit=1000`)).jobs.length;
    await eventually(async () => (await sending()) === 16, 30_000, 100);

    const { site, form } = await relay.siteWithForm({ formKey: 'fast', recipients: [{ channel: 'email', address: 'fast@acme.test' }] });
    for (let n = 0; n < 100; n++) await submit(site, form, { n });
    await eventually(() => inbox.mails.filter((mail) => mail.rcptTo.includes('fast@acme.test')).length === 100, 30_000, 100);
    expect(await sending()).toBe(16);
  }, 120_000);
});
