/**
 * Alert rules end to end on the embedded default: a rule made through the console API on a
 * service's error rate, spans sent that cross it, the firing notification delivered by the
 * relay to an SMTP server and a signed webhook receiver in the test; spans that bring the rate
 * back give one resolved notification; a silence holds the next firing back. Who may do what:
 * a rule names only a form of its own tenant, a member cannot create one, another tenant sees
 * none of it.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ON_CALL, OWNER, sendSpans as sendSpansOf, startAlertingSluice, subjectsAbout, type AlertingSluice } from './alerting.ts';
import { ConsoleClient } from './console-client.ts';
import { startWebhookReceiver, type SmtpInbox, type WebhookReceiver } from './delivery-peers.ts';
import { eventually, type TestSluice } from './harness.ts';
import { sendDemo } from '../bin/demo.ts';

const PASSWORD = OWNER.password;
/** Rounds are 5 s apart; a few rounds and a delivery on a loaded machine. */
const WAIT_MS = 60_000;

let alerting: AlertingSluice;
let app: TestSluice;
let smtp: SmtpInbox;
let hook: WebhookReceiver;
let owner: ConsoleClient;
let contactPoint: { siteId: string; formId: string };

const sendSpans = (service: string, count: number, errors: number) => sendSpansOf(app, service, count, errors);

const rule = (name: string, threshold = 0.5) => ({
  name,
  condition: { kind: 'error_rate', service: 'checkout' },
  comparator: 'above',
  threshold,
  windowSeconds: 120,
  forSeconds: 0,
  noData: 'keep',
  labels: { team: 'payments' },
  notify: contactPoint,
  repeatSeconds: 0,
  enabled: true,
});

const mailsAbout = (name: string) => subjectsAbout(smtp, name);
const hooksAbout = (name: string) => hook.calls.filter((call) => call.body.includes(name));

beforeAll(async () => {
  hook = await startWebhookReceiver();
  alerting = await startAlertingSluice({ 'relay.allowPrivateWebhooks': true });
  ({ app, smtp, owner, contactPoint } = alerting);
  const { siteId, formId } = contactPoint;
  hook.secret = (await alerting.relayAdmin('POST', `/admin/sites/${siteId}/forms/${formId}/webhooks`, { url: hook.url })).secret;
}, 90_000);

afterAll(async () => {
  await alerting?.stop();
  await hook?.close();
});

describe('an alert rule on a service\'s error rate', () => {
  it('lists the tenant\'s forms as contact points', async () => {
    const { contactPoints } = await owner.json<{ contactPoints: any[] }>('/api/alerts/contact-points');
    expect(contactPoints).toEqual([{ ...contactPoint, siteName: 'ops', formName: 'On call' }]);
  });

  it('fires once the rate crosses its threshold, notifying by email and signed webhook, and resolves once it is back', async () => {
    const created = await owner.json<any>('/api/alerts/rules', { method: 'POST', body: rule('Checkout failing') });
    expect(created.rule).toMatchObject({ name: 'Checkout failing', tenantId: 'ten_default', enabled: true });
    const id = created.rule.id;

    await sendSpans('checkout', 10, 8);
    await eventually(() => mailsAbout('Checkout failing').length === 1 && hooksAbout('Checkout failing').length === 1, WAIT_MS, 200);
    expect(mailsAbout('Checkout failing')).toEqual(['[FIRING] Checkout failing']);
    expect(smtp.mails.find((mail) => mail.parsed.subject === '[FIRING] Checkout failing')!.rcptTo).toEqual([ON_CALL]);
    const [fired] = hooksAbout('Checkout failing');
    expect(fired!.verified).toBe(true);
    expect(JSON.parse(fired!.body).data).toMatchObject({
      subject: '[FIRING] Checkout failing',
      fields: { alert: 'Checkout failing', state: 'firing', event: 'firing', value: 0.8, threshold: 0.5, labels: { team: 'payments' }, ruleId: id },
    });
    const firing = await owner.json<any>(`/api/alerts/rules/${id}`);
    expect(firing.status).toMatchObject({ state: 'firing', value: 0.8 });
    expect(firing.status.history.map((t: any) => t.kind)).toEqual(['firing']);

    // 8 errors in 50 spans: 0.16, under the threshold.
    await sendSpans('checkout', 40, 0);
    await eventually(() => mailsAbout('Checkout failing').length === 2, WAIT_MS, 200);
    expect(mailsAbout('Checkout failing')).toEqual(['[FIRING] Checkout failing', '[RESOLVED] Checkout failing']);
    await eventually(() => hooksAbout('Checkout failing').length === 2, WAIT_MS, 200);
    const resolved = await owner.json<any>(`/api/alerts/rules/${id}`);
    expect(resolved.status.state).toBe('ok');
    expect(resolved.status.history.map((t: any) => t.kind)).toEqual(['firing', 'resolved']);
    // One notification per change: nothing more arrives in the next rounds.
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    expect(mailsAbout('Checkout failing')).toHaveLength(2);
    await owner.call(`/api/alerts/rules/${id}`, { method: 'DELETE' });
  }, 180_000);

  it('holds a firing back while a silence matches the rule\'s labels, and says so in the history', async () => {
    const silence = await owner.json<any>('/api/alerts/silences', { method: 'POST', body: { labels: { team: 'payments' }, endsAt: Date.now() + 3_600_000, comment: 'deploy window' } });
    // A threshold the window's rate (8 of 50 and more) crosses at once.
    const created = await owner.json<any>('/api/alerts/rules', { method: 'POST', body: rule('Checkout during deploy', 0.01) });
    await sendSpans('checkout', 10, 5);
    const held = await eventually(async () => {
      const { status } = await owner.json<any>(`/api/alerts/rules/${created.rule.id}`);
      return status?.state === 'firing' ? status : undefined;
    }, WAIT_MS, 500);
    expect(held.history.map((t: any) => [t.kind, t.silenced ?? false])).toEqual([['firing', true]]);
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    expect(mailsAbout('Checkout during deploy')).toEqual([]);
    expect(hooksAbout('Checkout during deploy')).toEqual([]);
    const { silences } = await owner.json<any>('/api/alerts/silences');
    expect(silences.map((s: any) => s.id)).toEqual([silence.id]);
    await owner.call(`/api/alerts/silences/${silence.id}`, { method: 'DELETE' });
    expect((await owner.json<any>('/api/alerts/silences')).silences).toEqual([]);
  }, 120_000);
});

describe('an alert rule on deploy regressions', () => {
  it("fires on the demo's payment 1.9.2, judged a regression, and says so by email", async () => {
    const created = await owner.json<any>('/api/alerts/rules', {
      method: 'POST',
      body: { ...rule('Payment deploy regressed'), condition: { kind: 'deploy_regression', service: 'payment' }, threshold: 0.5, windowSeconds: 3600, labels: {} },
    });
    expect(created.rule.condition).toEqual({ kind: 'deploy_regression', service: 'payment' });
    await sendDemo({ url: app.baseUrl, apiKey: app.apiKey, minutes: 15, requests: 300 });
    await eventually(() => mailsAbout('Payment deploy regressed').length === 1, WAIT_MS, 200);
    expect(mailsAbout('Payment deploy regressed')).toEqual(['[FIRING] Payment deploy regressed']);
    const { status } = await owner.json<any>(`/api/alerts/rules/${created.rule.id}`);
    expect(status).toMatchObject({ state: 'firing', value: 1 });
    await owner.call(`/api/alerts/rules/${created.rule.id}`, { method: 'DELETE' });
  }, 180_000);
});

describe('who may do what', () => {
  it('refuses a rule naming a form that is not the tenant\'s, and bodies that are not rules, naming the field', async () => {
    const stranger = await owner.call('/api/alerts/rules', { method: 'POST', body: { ...rule('x'), notify: { siteId: 'site_nope', formId: 'form_nope' } } });
    expect(stranger.status).toBe(400);
    expect((await stranger.json()).field).toBe('notify');
    const bad = await owner.call('/api/alerts/rules', { method: 'POST', body: { ...rule('x'), threshold: 'high' } });
    expect(bad.status).toBe(400);
    expect((await bad.json()).message).toMatch(/threshold/);
  });

  it('lets a member read rules but not change them, and shows another tenant none of them', async () => {
    const created = await owner.json<any>('/api/alerts/rules', { method: 'POST', body: rule('Readable') });
    const memberEmail = `member-${randomBytes(3).toString('hex')}@example.com`;
    await app.relay!.admin.users.create({ tenantId: 'ten_default', role: 'owner' }, { email: memberEmail, name: 'Mo', role: 'member', password: PASSWORD });
    const member = new ConsoleClient(app.console!.url);
    await member.signIn(memberEmail, PASSWORD);
    expect((await member.json<any>('/api/alerts/rules')).rules.map((r: any) => r.rule.name)).toContain('Readable');
    expect((await member.call('/api/alerts/rules', { method: 'POST', body: rule('Nope') })).status).toBe(403);
    expect((await member.call(`/api/alerts/rules/${created.rule.id}`, { method: 'DELETE' })).status).toBe(403);

    await app.relay!.admin.tenants.onboard({ name: 'Other Co', owner: { email: 'bob@other.example', password: PASSWORD } });
    const other = new ConsoleClient(app.console!.url);
    await other.signIn('bob@other.example', PASSWORD);
    expect((await other.json<any>('/api/alerts/rules')).rules).toEqual([]);
    expect((await other.call(`/api/alerts/rules/${created.rule.id}`)).status).toBe(404);
    expect((await other.json<any>('/api/alerts/contact-points')).contactPoints).toEqual([]);
  });
});
