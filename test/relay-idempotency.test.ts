/**
 * Idempotency-Key over HTTP on submissions, notifications and tenant discovery (relay spec 4.4),
 * and tenant discovery itself (4.3): replays, 409 while the first runs, 422, the key's length,
 * 50 racing requests with one key, scopes; one answer for every address.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCaptchaProviders, type FakeCaptchaProviders } from './captcha-providers.ts';
import { eventually } from './harness.ts';
import { expectError, freshIp, startRelayFixture, type RelayFixture, type Reply } from './relay-fixture.ts';

let relay: RelayFixture;
let providers: FakeCaptchaProviders;
let site: any;
let key: { id: string; apiKey: string };

beforeAll(async () => {
  providers = await startCaptchaProviders();
  relay = await startRelayFixture({ 'relay.turnstileVerifyUrl': providers.endpoints.turnstile, 'relay.captchaTimeoutMs': 30_000 });
  ({ site } = await relay.siteWithForm({ recipients: [{ channel: 'email', address: 'sales@example.com' }] }));
  key = await relay.apiKey(site.id);
});
afterAll(async () => {
  await relay?.stop();
  await providers?.close();
});

const submission = (data: unknown = { name: 'Ann' }, siteKey = site.siteKey) => ({ siteKey, formKey: 'contact', data });
function submit(body: unknown, idempotencyKey?: string, ip?: string): Promise<Reply> {
  return relay.call('POST', '/submissions', { body, headers: idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }, ip });
}
async function stored(marker: string): Promise<number> {
  return Number((await relay.rows(`SELECT count() AS n FROM otel.relay_submissions WHERE position(Data, '${marker}') > 0`))[0]!.n);
}

describe('Idempotency-Key on submissions', () => {
  it('replays the first answer for the same key and body, storing once; key order in the body does not matter', async () => {
    const marker = randomUUID();
    const idem = `order-${randomUUID()}`;
    const first = await submit(submission({ marker, a: 1, b: 2 }), idem);
    expect(first.status).toBe(201);
    const again = await submit({ data: { b: 2, marker, a: 1 }, formKey: 'contact', siteKey: site.siteKey }, idem);
    expect([again.status, again.text]).toEqual([201, first.text]);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await stored(marker)).toBe(1);
    // Without the header every request is its own.
    await submit(submission({ marker }));
    await submit(submission({ marker }));
    expect(await stored(marker)).toBe(3);
  });

  it('answers 422 for the same key with another body', async () => {
    const idem = `k-${randomUUID()}`;
    expect((await submit(submission({ n: 1 }), idem)).status).toBe(201);
    expectError(await submit(submission({ n: 2 }), idem), 422, 'Idempotency-Key has already been used with a different request body');
  });

  it('takes keys of 8 to 255 characters, 400 otherwise', async () => {
    for (const bad of ['1234567', 'k'.repeat(256)]) expectError(await submit(submission(), bad), 400, 'Idempotency-Key must be between 8 and 255 characters');
    for (const good of [`${randomUUID()}`.slice(0, 8), `${randomUUID()}${'k'.repeat(219)}`]) expect((await submit(submission(), good)).status).toBe(201);
  });

  it('stores one submission for 50 simultaneous requests with one key: each answer is its submissionId or 409', async () => {
    const marker = randomUUID();
    const idem = `race-${marker}`;
    const replies = await Promise.all(Array.from({ length: 50 }, () => submit(submission({ marker }), idem)));
    const created = replies.filter((r) => r.status === 201);
    const busy = replies.filter((r) => r.status === 409);
    expect(created.length + busy.length).toBe(50);
    expect(new Set(created.map((r) => r.body.submissionId)).size).toBe(1);
    for (const reply of busy) expectError(reply, 409, 'A request with this Idempotency-Key is already in progress. Retry shortly.');
    expect(await stored(marker)).toBe(1);
    const after = await submit(submission({ marker }), idem);
    expect(after.body.submissionId).toBe(created[0]!.body.submissionId);
  });

  it('answers 409 while the first request runs, then replays its answer; a request that failed frees its key', async () => {
    const { site: guarded } = await relay.siteWithForm();
    providers.registerSite('turnstile', 'ts-site', 'ts-secret');
    await relay.admin('PUT', `/admin/sites/${guarded.id}/captcha`, { provider: 'turnstile', siteKey: 'ts-site', secret: 'ts-secret' });
    const body = (token: string) => ({ ...submission({ n: 1 }, guarded.siteKey), captchaToken: token });
    const idem = `slow-${randomUUID()}`;
    // The provider holds its answer until released: the first request runs meanwhile.
    providers.setMode('turnstile', 'hold');
    const token = providers.issue('turnstile', 'ts-site', { hostname: 'x.example.com' });
    const first = submit(body(token), idem);
    await eventually(() => providers.requests.some((r) => r.form.response === token));
    expectError(await submit(body(token), idem), 409, 'A request with this Idempotency-Key is already in progress. Retry shortly.');
    providers.release('turnstile');
    const answered = await first;
    expect(answered.status, answered.text).toBe(201);
    expect((await submit(body(token), idem)).text).toBe(answered.text);

    // A request that fails (the provider errs: 503) frees its key: the retry, with a fresh token as the 503 asks, runs.
    const failing = `failing-${randomUUID()}`;
    providers.setMode('turnstile', 'http500');
    expectError(await submit(body(providers.issue('turnstile', 'ts-site', { hostname: 'x.example.com' })), failing), 503, 'CAPTCHA verification temporarily unavailable. Please try again.');
    providers.setMode('turnstile', 'ok');
    const retry = await submit(body(providers.issue('turnstile', 'ts-site', { hostname: 'x.example.com' })), failing);
    expect(retry.status, retry.text).toBe(201);
  });

  it('keeps keys of different sites apart', async () => {
    const { site: other } = await relay.siteWithForm();
    const idem = `shared-${randomUUID()}`;
    const one = await submit(submission({ n: 1 }), idem);
    const two = await submit(submission({ n: 2 }, other.siteKey), idem);
    expect([one.status, two.status]).toEqual([201, 201]);
    expect(one.body.submissionId).not.toBe(two.body.submissionId);
  });
});

describe('Idempotency-Key on notifications', () => {
  it('replays per API key, and keeps two keys of one tenant apart', async () => {
    const body = { siteKey: site.siteKey, formKey: 'contact', subject: 'Order 1' };
    const idem = `notify-${randomUUID()}`;
    const call = (apiKey: string, sent: unknown = body) => relay.call('POST', '/notifications', { body: sent, headers: { 'x-api-key': apiKey, 'idempotency-key': idem } });
    const first = await call(key.apiKey);
    expect(first.status).toBe(201);
    expect((await call(key.apiKey)).body.submissionId).toBe(first.body.submissionId);
    expectError(await call(key.apiKey, { ...body, subject: 'Order 2' }), 422, 'Idempotency-Key has already been used with a different request body');
    const second = await relay.apiKey(site.id);
    const other = await call(second.apiKey);
    expect(other.status).toBe(201);
    expect(other.body.submissionId).not.toBe(first.body.submissionId);
  });
});

describe('tenant discovery', () => {
  const ANSWER = { success: true, message: 'If this address belongs to an account, an email listing its tenants is on its way.' };
  const discover = (email: unknown, headers: Record<string, string> = {}, ip?: string) => relay.call('POST', '/tenant-discovery', { body: { email }, headers, ip });
  const discoveryJobs = (email: string) => relay.rows<{ Subject: string; Body: string }>(`SELECT Subject, Body FROM otel.relay_delivery_jobs WHERE Kind = 'tenant_discovery' AND Destination = '${email}'`);

  it('gives the same answer for a user\'s address and for an unknown one, and emails only the user', async () => {
    const user = await relay.admin('POST', '/admin/users', { email: `Member-${randomUUID().slice(0, 8)}@example.com`, role: 'member' });
    const known = await discover(user.user.email.toUpperCase());
    const unknown = await discover(`nobody-${randomUUID().slice(0, 8)}@example.com`);
    for (const reply of [known, unknown]) expect([reply.status, reply.body]).toEqual([200, ANSWER]);
    expect([...known.headers].filter(([n]) => n !== 'date')).toEqual([...unknown.headers].filter(([n]) => n !== 'date'));
    const [job] = await eventually(async () => {
      const jobs = await discoveryJobs(user.user.email);
      return jobs.length > 0 ? jobs : undefined;
    });
    expect(job!.Subject).toBe('Your Sluice relay tenants');
    expect(job!.Body).toContain('<strong>Acme</strong>');
    expect(job!.Body).toContain(`${relay.base}/admin/login`.replace('127.0.0.1', 'localhost'));
    // Asked again at once: the same answer, and no second email to that inbox. (Another user's
    // ask goes after it; once that one's email is queued, the second ask's work is done.)
    expect((await discover(user.user.email)).body).toEqual(ANSWER);
    const other = await relay.admin('POST', '/admin/users', { email: `other-${randomUUID().slice(0, 8)}@example.com`, role: 'member' });
    await discover(other.user.email);
    await eventually(async () => (await discoveryJobs(other.user.email)).length > 0);
    expect(await discoveryJobs(user.user.email)).toHaveLength(1);
  });

  it('refuses what is not an email address, replays by Idempotency-Key, and limits each IP to 10 a minute', async () => {
    expect((await discover('not an address')).status).toBe(400);
    const idem = `disc-${randomUUID()}`;
    const email = `someone-${randomUUID().slice(0, 8)}@example.com`;
    const ip = freshIp();
    expect((await discover(email, { 'idempotency-key': idem }, ip)).status).toBe(200);
    expect((await discover(email, { 'idempotency-key': idem }, ip)).headers.get('idempotent-replayed')).toBe('true');
    expectError(await discover('other@example.com', { 'idempotency-key': idem }, ip), 422, 'Idempotency-Key has already been used with a different request body');
    for (let i = 3; i < 10; i++) expect((await discover(email, {}, ip)).status).toBe(200);
    expectError(await discover(email, {}, ip), 429, 'ThrottlerException: Too Many Requests');
  });
});
