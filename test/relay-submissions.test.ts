/**
 * POST /api/v1/submissions on a running `sluice serve` (relay spec 4.1, 2, 7, 8): what is
 * stored for a 201, the one 404 for four reasons, origins and CORS, the data limits, body and
 * rate limits, and every error of the spec's table that this endpoint can give.
 */
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { eventually } from './harness.ts';
import { expectError, expectValidationFailed, freshIp, startRelayFixture, type RelayFixture, type Reply } from './relay-fixture.ts';

const ORIGIN = 'https://shop.example.com';
let relay: RelayFixture;
let site: any;
let form: any;

beforeAll(async () => {
  relay = await startRelayFixture();
  ({ site, form } = await relay.siteWithForm({
    origins: [ORIGIN, 'http://localhost:3000'],
    recipients: [
      { channel: 'email', address: 'sales@example.com' },
      { channel: 'whatsapp', address: '+4915112345678' },
      { channel: 'email', address: 'off@example.com', active: false },
    ],
    webhooks: ['http://127.0.0.1:9/hook'],
  }));
});
afterAll(() => relay?.stop());

function submit(body: unknown, headers: Record<string, string> = { origin: ORIGIN }, ip?: string): Promise<Reply> {
  return relay.call('POST', '/submissions', { body, headers, ip });
}
const valid = (data: unknown = { name: 'Ann', message: 'Hello' }) => ({ siteKey: site.siteKey, formKey: 'contact', data });

describe('a stored submission', () => {
  it('answers 201 with a UUID once the submission and its delivery jobs are stored', async () => {
    const reply = await submit(valid({ name: 'Ann', meta: { page: '/contact' }, tags: ['a', 1, true, null] }), { origin: ORIGIN, 'user-agent': 'test-browser/1.0' }, '203.0.113.7');
    expect(reply.status, reply.text).toBe(201);
    expect(reply.body).toEqual({ success: true, submissionId: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/) });
    expect(reply.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    // Stored before the answer: the embedded default commits to chDB before the 201.
    const [row] = await relay.rows(`SELECT *, toString(SubmissionId) AS id FROM otel.relay_submissions WHERE SubmissionId = toUUID('${reply.body.submissionId}')`);
    expect(row).toMatchObject({ TenantId: relay.tenantId, SiteId: site.id, FormId: form.id, Kind: 'submission', Ip: '203.0.113.7', Origin: ORIGIN, UserAgent: 'test-browser/1.0', Jobs: 3 });
    expect(JSON.parse(row!.Data)).toEqual({ name: 'Ann', meta: { page: '/contact' }, tags: ['a', 1, true, null] });
    const jobs = await relay.rows(`SELECT Channel, Destination, Kind FROM otel.relay_delivery_jobs WHERE SubmissionId = '${reply.body.submissionId}' ORDER BY Channel, Destination`);
    // The active recipients and the webhook; the inactive recipient gets nothing.
    expect(jobs).toEqual([
      { Channel: 'email', Destination: 'sales@example.com', Kind: 'submission' },
      { Channel: 'webhook', Destination: form.webhooks[0].id, Kind: 'submission' },
      { Channel: 'whatsapp', Destination: '+4915112345678', Kind: 'submission' },
    ]);
  });

  it('is listed per form in the admin API, newest first, a page at a time', async () => {
    const { site: other, form: listed } = await relay.siteWithForm({ formKey: 'list' });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await submit({ siteKey: other.siteKey, formKey: 'list', data: { n: i } }, {})).body.submissionId);
    const first = await relay.admin('GET', `/admin/sites/${other.id}/forms/${listed.id}/submissions?limit=3`);
    expect(first.submissions.map((s: any) => s.data.n)).toEqual([4, 3, 2]);
    expect(first.submissions[0]).toMatchObject({ submissionId: ids[4], kind: 'submission', receivedAt: expect.any(String), jobs: 0, meta: { origin: '' } });
    const second = await relay.admin('GET', `/admin/sites/${other.id}/forms/${listed.id}/submissions?limit=3&before=${first.nextBefore}`);
    expect(second.submissions.map((s: any) => s.data.n)).toEqual([1, 0]);
    expect(second.nextBefore).toBeUndefined();
    expectValidationFailed(await relay.call('GET', `/admin/sites/${other.id}/forms/${listed.id}/submissions?limit=0`, { token: relay.token }), 'limit');
    expectValidationFailed(await relay.call('GET', `/admin/sites/${other.id}/forms/${listed.id}/submissions?before=x'`, { token: relay.token }), 'before');
  });

  it('is searched by the text of its data, subject or body, in any case, a page at a time', async () => {
    const { site: other, form: searched } = await relay.siteWithForm({ formKey: 'search' });
    for (const data of [{ name: 'Ann', note: "O'Brien asked about PRICING" }, { name: 'Bob', note: 'hello' }, { name: 'Cy', note: 'pricing, again' }, { name: 'Di', note: '100%_off' }]) {
      await submit({ siteKey: other.siteKey, formKey: 'search', data }, {});
    }
    const names = async (q: string, extra = '') => (await relay.admin('GET', `/admin/sites/${other.id}/forms/${searched.id}/submissions?q=${encodeURIComponent(q)}${extra}`)).submissions.map((s: any) => s.data.name);
    expect(await names('pricing')).toEqual(['Cy', 'Ann']);
    expect(await names("o'brien")).toEqual(['Ann']);
    // Text, not a pattern: % and _ match themselves only.
    expect(await names('%_')).toEqual(['Di']);
    expect(await names('nobody')).toEqual([]);
    const first = await relay.admin('GET', `/admin/sites/${other.id}/forms/${searched.id}/submissions?q=pricing&limit=1`);
    expect(first.submissions.map((s: any) => s.data.name)).toEqual(['Cy']);
    expect(await names('pricing', `&before=${first.nextBefore}`)).toEqual(['Ann']);
    expectValidationFailed(await relay.call('GET', `/admin/sites/${other.id}/forms/${searched.id}/submissions?q=`, { token: relay.token }), 'q');
    expectValidationFailed(await relay.call('GET', `/admin/sites/${other.id}/forms/${searched.id}/submissions?q=${'x'.repeat(201)}`, { token: relay.token }), 'q');
  });
});

describe('the four indistinguishable 404s', () => {
  it('answers unknown site, unknown form, inactive site or form and a refused Origin with the same bytes, headers and no I/O', async () => {
    const { site: inactiveSite } = await relay.siteWithForm({ origins: [ORIGIN] });
    await relay.admin('PATCH', `/admin/sites/${inactiveSite.id}`, { active: false });
    const { site: withOffForm, form: offForm } = await relay.siteWithForm({ origins: [ORIGIN] });
    await relay.admin('PATCH', `/admin/sites/${withOffForm.id}/forms/${offForm.id}`, { active: false });
    const cases: Array<[string, unknown, Record<string, string>]> = [
      ['unknown site', { ...valid(), siteKey: 'sk_unknown' }, { origin: ORIGIN }],
      ['unknown form', { ...valid(), formKey: 'nope' }, { origin: ORIGIN }],
      ['inactive site', { ...valid(), siteKey: inactiveSite.siteKey }, { origin: ORIGIN }],
      ['inactive form', { ...valid(), siteKey: withOffForm.siteKey }, { origin: ORIGIN }],
      ['other origin', valid(), { origin: 'https://evil.example.com' }],
      ['trailing slash', valid(), { origin: `${ORIGIN}/` }],
      ['other scheme', valid(), { origin: 'http://shop.example.com' }],
      ['other port', valid(), { origin: 'https://shop.example.com:8443' }],
      ['no Origin while the site has a list', valid(), {}],
    ];
    const state = relay.app.state;
    const spies = (['get', 'getVersioned', 'create', 'update', 'put', 'list'] as const).map((method) => vi.spyOn(state, method));
    const replies: Reply[] = [];
    for (const [, body, headers] of cases) replies.push(await submit(body, headers));
    // Decided from memory: no read or write of the state store, so no I/O to time.
    for (const spy of spies) expect(spy).not.toHaveBeenCalled();
    vi.restoreAllMocks();
    const shape = (reply: Reply) => ({ status: reply.status, text: reply.text, headers: [...reply.headers].filter(([name]) => name !== 'date') });
    for (const [index, reply] of replies.entries()) {
      expect(shape(reply), cases[index]![0]).toEqual(shape(replies[0]!));
    }
    expectError(replies[0]!, 404, 'Submission target not found or not permitted');
    expect(replies[0]!.headers.get('access-control-allow-origin')).toBeNull();
    expect((await relay.rows(`SELECT count() AS n FROM otel.relay_submissions WHERE Origin = 'https://evil.example.com'`))[0]!.n).toBe(0);
  });

  it('lets a request without Origin (a server) through only when the site has no origin list, and any origin then', async () => {
    const { site: open } = await relay.siteWithForm();
    expect((await submit({ ...valid(), siteKey: open.siteKey }, {})).status).toBe(201);
    const fromBrowser = await submit({ ...valid(), siteKey: open.siteKey }, { origin: 'https://anywhere.example.org' });
    expect(fromBrowser.status).toBe(201);
    expect(fromBrowser.headers.get('access-control-allow-origin')).toBe('https://anywhere.example.org');
  });
});

describe('CORS', () => {
  it('answers the preflight with Allow-Origin only for an origin an active site allows', async () => {
    const allowed = await relay.call('OPTIONS', '/submissions', { headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,idempotency-key' } });
    expect(allowed.status).toBe(204);
    expect(Object.fromEntries([...allowed.headers].filter(([name]) => name.startsWith('access-control') || name === 'vary'))).toEqual({
      'access-control-allow-origin': 'http://localhost:3000',
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers': 'Content-Type, Idempotency-Key',
      'access-control-expose-headers': 'Retry-After, Idempotent-Replayed',
      'access-control-max-age': '600',
      vary: 'Origin',
    });
    // Every active site of this test file has a list, except those made open on purpose above.
    await relay.app.relay!.store.sites.values().filter((s) => s.allowedOrigins.length === 0)
      .reduce((done, open) => done.then(() => relay.admin('PATCH', `/admin/sites/${open.id}`, { active: false })), Promise.resolve());
    const refused = await relay.call('OPTIONS', '/submissions', { headers: { origin: 'https://evil.example.com', 'access-control-request-method': 'POST' } });
    expect(refused.status).toBe(204);
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    expect(refused.headers.get('access-control-allow-methods')).toBeNull();
  });

  it('refuses other methods on the public paths with 405', async () => {
    const reply = await relay.call('GET', '/submissions');
    expectError(reply, 405, 'GET is not allowed on /api/v1/submissions');
    expect(reply.headers.get('allow')).toBe('POST, OPTIONS');
  });
});

describe('validation (400 Validation failed, naming the field)', () => {
  it('checks the fields of the body', async () => {
    const { siteKey } = site;
    expectValidationFailed(await submit({ formKey: 'contact', data: {} }), 'siteKey');
    expectValidationFailed(await submit({ siteKey, data: {} }), 'formKey');
    expectValidationFailed(await submit({ siteKey, formKey: 'contact' }), 'data');
    expectValidationFailed(await submit({ siteKey: 42, formKey: 'contact', data: {} }), 'siteKey');
    expectValidationFailed(await submit({ siteKey: 'k'.repeat(101), formKey: 'contact', data: {} }), 'siteKey');
    expectValidationFailed(await submit({ siteKey, formKey: 'f'.repeat(101), data: {} }), 'formKey');
    expectValidationFailed(await submit({ ...valid(), captchaToken: 't'.repeat(4097) }), 'captchaToken');
    expectValidationFailed(await submit({ ...valid(), data: ['not', 'an', 'object'] }), 'data');
    expectValidationFailed(await submit({ ...valid(), extra: 1 }), 'extra');
    expectValidationFailed(await submit(['not an object']), 'body');
    // Nesting is refused before anything walks the body (docs/reference/limits.md).
    const deep = await relay.call('POST', '/submissions', { raw: `${'['.repeat(33)}${']'.repeat(33)}`, headers: { origin: ORIGIN, 'content-type': 'application/json' } });
    expectValidationFailed(deep, 'body');
    expect(deep.body.message).toBe('Validation failed: body is nested deeper than 32 levels');
  });

  it('holds data to its limits: fields, depth, names, strings, arrays, types and reserved keys', async () => {
    const fields = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`f${i}`, i]));
    expectValidationFailed(await submit(valid(fields)), 'data');
    expect((await submit(valid(Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`f${i}`, i]))))).status).toBe(201);
    expectValidationFailed(await submit(valid({ meta: { deeper: { x: 1 } } })), 'data.meta.deeper');
    expectValidationFailed(await submit(valid({ list: [[1]] })), 'data.list[0]');
    expectValidationFailed(await submit(valid({ list: [{ a: 1 }] })), 'data.list[0]');
    expect((await submit(valid({ meta: { page: '/x', n: 1 }, list: [1, 'a'] }))).status).toBe(201);
    expectValidationFailed(await submit(valid({ ['n'.repeat(129)]: 1 })), `data["${'n'.repeat(40)}…"]`);
    expect((await submit(valid({ ['n'.repeat(128)]: 1 }))).status).toBe(201);
    expectValidationFailed(await submit(valid({ text: 'x'.repeat(10_001) })), 'data.text');
    // 10,000 characters outside the BMP are 20,000 UTF-16 units: still within the limit.
    expect((await submit(valid({ text: '😀'.repeat(10_000) }))).status).toBe(201);
    expectValidationFailed(await submit(valid({ list: Array.from({ length: 101 }, (_, i) => i) })), 'data.list');
    expectValidationFailed(await submit(valid({ meta: { _subject: 'x' } })), 'data.meta._subject');
    for (const reserved of ['_subject', '_body', '_footer']) expectValidationFailed(await submit(valid({ [reserved]: 'x' })), `data.${reserved}`);
    expectValidationFailed(await submit(valid({ a: 'x', 'b c': { d: { e: 1 } } })), 'data["b c"].d');
    // Types JSON cannot carry, reached through its corners: a number past double range, a lone surrogate.
    expectValidationFailed(await relay.call('POST', '/submissions', { raw: `{"siteKey":"${site.siteKey}","formKey":"contact","data":{"n":1e400}}`, headers: { origin: ORIGIN, 'content-type': 'application/json' } }), 'data.n');
    expectValidationFailed(await relay.call('POST', '/submissions', { raw: `{"siteKey":"${site.siteKey}","formKey":"contact","data":{"s":"\\ud800"}}`, headers: { origin: ORIGIN, 'content-type': 'application/json' } }), 'data.s');
  });

  it('refuses what is not a JSON body: another type, broken JSON, invalid UTF-8, deep nesting', async () => {
    expectValidationFailed(await relay.call('POST', '/submissions', { raw: JSON.stringify(valid()), headers: { origin: ORIGIN, 'content-type': 'text/plain' } }), 'Content-Type');
    expectValidationFailed(await relay.call('POST', '/submissions', { raw: '{"siteKey":', headers: { origin: ORIGIN, 'content-type': 'application/json' } }), 'body');
    expectValidationFailed(await relay.call('POST', '/submissions', { raw: Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d]), headers: { 'content-type': 'application/json' } }), 'body');
    expectValidationFailed(await relay.call('POST', '/submissions', { raw: '['.repeat(100_000), headers: { 'content-type': 'application/json' } }), 'body');
    const gzipped = gzipSync(JSON.stringify(valid()));
    expectValidationFailed(await relay.call('POST', '/submissions', { raw: gzipped, headers: { origin: ORIGIN, 'content-type': 'application/json', 'content-encoding': 'gzip' } }), 'Content-Encoding');
  });

  it('refuses a body over 1 MiB with 413 and the error shape', async () => {
    const reply = await submit(valid({ big: 'x'.repeat(1024 * 1024) }));
    expect(reply.status).toBe(413);
    expect(reply.body).toEqual({ message: 'request body exceeds 1 MiB', statusCode: 413 });
  });
});

describe('rate limit (10 per IP in any 60 seconds)', () => {
  it('accepts 10 from one IP, refuses the 11th with 429 and Retry-After, and counts IPs apart', async () => {
    const ip = freshIp();
    const statuses: number[] = [];
    // Refused requests count too (the limiter sits before everything): 5 good, 5 bad, then one more.
    for (let i = 0; i < 5; i++) statuses.push((await submit(valid(), { origin: ORIGIN }, ip)).status);
    for (let i = 0; i < 5; i++) statuses.push((await submit({ bad: true }, { origin: ORIGIN }, ip)).status);
    expect(statuses).toEqual([...Array(5).fill(201), ...Array(5).fill(400)]);
    const refused = await submit(valid(), { origin: ORIGIN }, ip);
    expectError(refused, 429, 'ThrottlerException: Too Many Requests');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(refused.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect((await submit(valid(), { origin: ORIGIN }, freshIp())).status).toBe(201);
    const metrics = await relay.app.metrics.render();
    expect(metrics).toMatch(/sluice_relay_requests_total\{endpoint="submissions",status="429"\} [1-9]/);
    expect(metrics).toMatch(/sluice_relay_requests_total\{endpoint="submissions",status="201"\} [1-9]/);
  });
});

describe('storage unavailable', () => {
  it('acknowledges into the local log while storage is down, and stores the submission once storage is back', async () => {
    const { site: downSite } = await relay.siteWithForm({ formKey: 'down' });
    const marker = randomUUID();
    await relay.app.storage.query('DETACH TABLE otel.relay_submissions');
    try {
      const reply = await submit({ siteKey: downSite.siteKey, formKey: 'down', data: { marker } }, {});
      expect(reply.status).toBe(201);
    } finally {
      await relay.app.storage.query('ATTACH TABLE otel.relay_submissions');
    }
    const stored = async () => Number((await relay.rows(`SELECT count() AS n FROM otel.relay_submissions WHERE position(Data, '${marker}') > 0`))[0]!.n);
    await eventually(async () => (await stored()) === 1, 30_000);
  });
});

describe('the OpenAPI document', () => {
  it('describes the public endpoints (version 1.0.0): bodies, answers, an optional Idempotency-Key', async () => {
    const { body: doc } = await relay.call('GET', '/openapi.json');
    expect(doc.info.version).toBe('1.0.0');
    for (const path of ['/api/v1/submissions', '/api/v1/notifications', '/api/v1/tenant-discovery']) {
      const post = doc.paths[path].post;
      const header = post.parameters.find((p: any) => p.name === 'Idempotency-Key');
      expect(header, path).toMatchObject({ in: 'header', required: false, schema: { minLength: 8, maxLength: 255 } });
      expect(post.requestBody.content['application/json'].schema.$ref, path).toMatch(/^#\/components\/schemas\//);
      expect(Object.keys(post.responses), path).toEqual(expect.arrayContaining(['400', '409', '422', '429']));
    }
    expect(doc.paths['/api/v1/submissions'].post.responses['201'].content['application/json'].schema.$ref).toBe('#/components/schemas/Created');
    expect(doc.paths['/api/v1/submissions'].post.responses['404'].description).toBe('`Submission target not found or not permitted`');
    expect(doc.paths['/api/v1/notifications'].post.security).toEqual([{ apiKey: [] }]);
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ in: 'header', name: 'x-api-key' });
    expect(doc.components.schemas.Submission.properties.captchaToken.maxLength).toBe(4096);
    expect(doc.components.schemas.Notification.properties.recipients.properties.email.maxItems).toBe(50);
    for (const [, name] of JSON.stringify(doc).matchAll(/"#\/components\/schemas\/(\w+)"/g)) expect(doc.components.schemas[name!], name).toBeDefined();
  });
});
