/**
 * The OpenAPI documents against a running Sluice: for a sample of operations on both ports, a
 * request for every status the document lists, each answer checked against the document (its
 * status is listed, its JSON body passes the listed schema), and every listed status seen.
 * The ones no request here can produce are named, with why.
 */
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fieldsOf, freshIp, startRelayFixture, type RelayFixture } from './relay-fixture.ts';

let relay: RelayFixture;
let ingestBase: string;

beforeAll(async () => {
  relay = await startRelayFixture({ 'limits.bodyTimeoutMs': 500, 'limits.rateBurst': 3, 'limits.ratePerMinute': 1, 'limits.maxBodyBytes': 64 * 1024 });
  ingestBase = relay.app.baseUrl;
});
afterAll(async () => {
  await relay?.stop();
});

interface Answer {
  status: number;
  contentType: string;
  body: unknown;
}

/** Checks answers against one port's document and remembers the statuses each operation gave. */
class Conformance {
  private readonly seen = new Map<string, Set<string>>();
  private readonly ajv = new Ajv2020({ strict: false, validateFormats: false });

  constructor(private readonly doc: any) {
    // The components as $defs of one schema, so the documents' $refs resolve.
    this.ajv.addSchema(JSON.parse(JSON.stringify({ $id: 'doc', $defs: doc.components.schemas }).replaceAll('#/components/schemas/', 'doc#/$defs/')));
  }

  /** `operation` is `METHOD /template`. */
  check(operation: string, answer: Answer): void {
    const [method, template] = operation.split(' ') as [string, string];
    const responses = this.doc.paths[template]?.[method.toLowerCase()]?.responses;
    expect(responses, `${operation} is not in the document`).toBeDefined();
    const documented = responses[String(answer.status)];
    expect(documented, `${operation} answered ${answer.status}: ${JSON.stringify(answer.body)}`).toBeDefined();
    const schema = documented.content?.['application/json']?.schema;
    if (schema && answer.contentType.startsWith('application/json')) {
      const validate = this.ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('#/components/schemas/', 'doc#/$defs/')));
      expect(validate(answer.body), `${operation} ${answer.status}: ${JSON.stringify(answer.body)} ${this.ajv.errorsText(validate.errors)}`).toBe(true);
    }
    const statuses = this.seen.get(operation) ?? new Set();
    this.seen.set(operation, statuses.add(String(answer.status)));
  }

  /** Every status the document lists for `operation` was seen, but those in `unproduced`. */
  expectAllSeen(operation: string, unproduced: string[] = []): void {
    const [method, template] = operation.split(' ') as [string, string];
    const listed = Object.keys(this.doc.paths[template][method.toLowerCase()].responses).filter((status) => !unproduced.includes(status));
    expect([...(this.seen.get(operation) ?? [])].sort(), operation).toEqual(listed.sort());
  }
}

async function answer(response: Response): Promise<Answer> {
  const contentType = response.headers.get('content-type') ?? '';
  const text = await response.text();
  return { status: response.status, contentType, body: contentType.startsWith('application/json') ? JSON.parse(text) : text };
}

/** The body of an HTTP/1.1 answer once it is all there (Content-Length or chunked), else undefined. */
function completeBody(head: string, rest: string): string | undefined {
  if (/\r\ntransfer-encoding: chunked/i.test(head)) {
    if (!rest.endsWith('0\r\n\r\n')) return undefined;
    let body = '';
    for (let at = 0; ;) {
      const lineEnd = rest.indexOf('\r\n', at);
      const size = parseInt(rest.slice(at, lineEnd), 16);
      if (!size) return body;
      body += rest.slice(lineEnd + 2, lineEnd + 2 + size);
      at = lineEnd + 2 + size + 2;
    }
  }
  const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
  return Buffer.byteLength(rest) >= length ? rest : undefined;
}

/** A request whose body never arrives in time: its answer, read off the socket as soon as it is complete. */
function slowBody(port: number, path: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' });
    let received = '';
    socket.on('error', reject);
    socket.on('data', (data) => {
      received += data.toString('latin1'); // one character a byte, as the lengths count
      const split = received.indexOf('\r\n\r\n');
      const head = received.slice(0, split);
      const body = split < 0 ? undefined : completeBody(head, received.slice(split + 4));
      if (body === undefined) return;
      socket.destroy();
      const contentType = /\r\ncontent-type: ([^\r]+)/i.exec(head)?.[1] ?? '';
      try {
        resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), contentType, body: contentType.startsWith('application/json') ? JSON.parse(Buffer.from(body, 'latin1').toString('utf8')) : body });
      } catch (err) {
        reject(err);
      }
    });
    const lines = Object.entries({ host: 'localhost', 'content-type': 'application/json', 'content-length': '1000', ...headers }).map(([name, value]) => `${name}: ${value}\r\n`);
    socket.write(`POST ${path} HTTP/1.1\r\n${lines.join('')}\r\n{`);
  });
}

describe('the ingest port answers as its document says', () => {
  let doc: Conformance;
  beforeAll(async () => {
    doc = new Conformance(await (await fetch(`${ingestBase}/api/v1/openapi.json`)).json());
  });
  const get = async (path: string, headers: Record<string, string> = {}) => answer(await fetch(`${ingestBase}${path}`, { headers: { 'x-forwarded-for': freshIp(), ...headers } }));

  it('GET /install/{token}', async () => {
    const op = 'GET /install/{token}';
    const { token } = await relay.app.installTokens.create(relay.app.sourceId);
    doc.check(op, await get(`/install/${token}?format=env`));
    doc.check(op, await get(`/install/${token}?format=helm`));
    doc.check(op, await get('/install/no-such-token'));
    const ip = freshIp();
    for (let i = 0; i < 4; i++) doc.check(op, await get('/install/no-such-token', { 'x-forwarded-for': ip }));
    doc.expectAllSeen(op);
  });

  it('GET /api/v1/agent/config', async () => {
    const op = 'GET /api/v1/agent/config';
    const key = { 'x-api-key': relay.app.apiKey };
    const response = await fetch(`${ingestBase}/api/v1/agent/config`, { headers: { ...key, 'x-forwarded-for': freshIp() } });
    const etag = response.headers.get('etag')!;
    doc.check(op, await answer(response));
    doc.check(op, await get('/api/v1/agent/config', { ...key, 'if-none-match': etag }));
    doc.check(op, await get('/api/v1/agent/config', { 'x-api-key': 'slk_unknown' }));
    const ip = freshIp();
    for (let i = 0; i < 4; i++) doc.check(op, await get('/api/v1/agent/config', { ...key, 'x-forwarded-for': ip }));
    doc.expectAllSeen(op);
  });

  it('POST /api/v1/ingest', async () => {
    const op = 'POST /api/v1/ingest';
    const post = async (body: string, headers: Record<string, string> = {}) =>
      answer(await fetch(`${ingestBase}/api/v1/ingest`, { method: 'POST', headers: { 'x-api-key': relay.app.apiKey, 'content-type': 'application/json', 'x-forwarded-for': freshIp(), ...headers }, body }));
    doc.check(op, await post(JSON.stringify({ entries: [{ message: 'conformance' }] })));
    doc.check(op, await post('{"entries":'));
    doc.check(op, await post('{}', { 'x-api-key': 'slk_unknown' }));
    doc.check(op, await post('x'.repeat(65 * 1024)));
    doc.check(op, await post('{}', { 'content-type': 'text/plain' }));
    const ip = freshIp();
    for (let i = 0; i < 4; i++) doc.check(op, await post('{"entries":[]}', { 'x-forwarded-for': ip }));
    doc.check(op, await slowBody(relay.app.httpPort, '/api/v1/ingest', { 'x-api-key': relay.app.apiKey, 'x-forwarded-for': freshIp() }));
    // 503 needs the bus or storage down (test/storage-down.test.ts and test/stream-full.test.ts make it).
    doc.expectAllSeen(op, ['503']);
  });

  it('GET /api/v1/docs/assets/{file}', async () => {
    const op = 'GET /api/v1/docs/assets/{file}';
    doc.check(op, await get('/api/v1/docs/assets/swagger-ui.css'));
    doc.check(op, await get('/api/v1/docs/assets/index.html'));
    doc.expectAllSeen(op);
  });
});

describe('the relay port answers as its document says', () => {
  let doc: Conformance;
  beforeAll(async () => {
    doc = new Conformance((await relay.call('GET', '/openapi.json')).body);
  });
  const check = async (op: string, reply: Promise<{ status: number; headers: Headers; body: unknown; text: string }>) => {
    const { status, headers, body, text } = await reply;
    doc.check(op, { status, contentType: headers.get('content-type') ?? '', body: body ?? text });
  };

  /** A user of the fixture's tenant, signed in: `oneTime` leaves them with the one-time password (they must change it first). */
  async function signedIn(role: 'member' | 'admin', oneTime = false): Promise<string> {
    const email = `user-${randomBytes(4).toString('hex')}@relay.test`;
    const password = 'a long password for tests';
    const created = await relay.admin('POST', '/admin/users', { email, role, ...(oneTime ? {} : { password }) });
    const login = await relay.call('POST', '/admin/login', { body: { email, password: created.oneTimePassword ?? password } });
    return login.body.token;
  }

  it('POST /api/v1/admin/login', async () => {
    const op = 'POST /api/v1/admin/login';
    const member = `member-${randomBytes(4).toString('hex')}@relay.test`;
    await relay.admin('POST', '/admin/users', { email: member, role: 'member', password: 'a long password for tests' });
    await check(op, relay.call('POST', '/admin/login', { body: { email: member, password: 'a long password for tests' } }));
    await check(op, relay.call('POST', '/admin/login', { body: { email: member } }));
    await check(op, relay.call('POST', '/admin/login', { body: { email: member, password: 'not the password' } }));
    // The same email and password as the owner of another tenant: which one?
    await relay.app.relay!.admin.tenants.onboard({ name: 'Second', owner: { email: member, password: 'a long password for tests' } });
    await check(op, relay.call('POST', '/admin/login', { body: { email: member, password: 'a long password for tests' } }));
    await check(op, relay.call('POST', '/admin/login', { raw: 'x'.repeat(1024 * 1024 + 1), headers: { 'content-type': 'application/json' } }));
    await check(op, relay.call('POST', '/admin/login', { raw: '{}', headers: { 'content-type': 'text/plain' } }));
    const ip = freshIp();
    for (let i = 0; i < 11; i++) await check(op, relay.call('POST', '/admin/login', { ip, body: { email: 'nobody@relay.test', password: 'x' } }));
    doc.check(op, await slowBody(relay.app.relay!.port, '/api/v1/admin/login', { 'x-forwarded-for': freshIp() }));
    // 503 needs the in-flight budget used up (test/inflight-budget.test.ts holds it with admin bodies).
    doc.expectAllSeen(op, ['503']);
  });

  it('GET /api/v1/admin/sites/{siteId} and DELETE /api/v1/admin/api-keys/{keyId}', async () => {
    const { site } = await relay.siteWithForm();
    const key = await relay.apiKey(site.id);
    const [member, newcomer] = [await signedIn('member'), await signedIn('admin', true)];
    const getSite = 'GET /api/v1/admin/sites/{siteId}';
    await check(getSite, relay.call('GET', `/admin/sites/${site.id}`, { token: member }));
    await check(getSite, relay.call('GET', `/admin/sites/${site.id}`));
    await check(getSite, relay.call('GET', `/admin/sites/${site.id}`, { token: newcomer }));
    await check(getSite, relay.call('GET', '/admin/sites/site_none', { token: relay.token }));
    doc.expectAllSeen(getSite);
    const revoke = 'DELETE /api/v1/admin/api-keys/{keyId}';
    await check(revoke, relay.call('DELETE', `/admin/api-keys/${key.id}`, { token: member }));
    await check(revoke, relay.call('DELETE', `/admin/api-keys/${key.id}`, { token: 'not-a-session' }));
    await check(revoke, relay.call('DELETE', `/admin/api-keys/${key.id}`, { token: relay.token }));
    await check(revoke, relay.call('DELETE', '/admin/api-keys/key_none', { token: relay.token }));
    doc.expectAllSeen(revoke);
  });

  it('GET /api/v1/admin/templates and POST /api/v1/admin/templates/preview', async () => {
    const [member, newcomer] = [await signedIn('member'), await signedIn('admin', true)];
    await relay.admin('POST', '/admin/templates', { name: 'Listed', subject: 's', html: '<p>{{ name }}</p>' });
    const list = 'GET /api/v1/admin/templates';
    await check(list, relay.call('GET', '/admin/templates?limit=1', { token: member }));
    await check(list, relay.call('GET', '/admin/templates?limit=0', { token: member }));
    await check(list, relay.call('GET', '/admin/templates'));
    await check(list, relay.call('GET', '/admin/templates', { token: newcomer }));
    doc.expectAllSeen(list);
    const preview = 'POST /api/v1/admin/templates/preview';
    await check(preview, relay.call('POST', '/admin/templates/preview', { token: relay.token, body: { data: { name: 'Ada' } } }));
    await check(preview, relay.call('POST', '/admin/templates/preview', { token: relay.token, body: { html: '{{ @fields }}{{ @fields }}', data: fieldsOf(100, 9000) } }));
    await check(preview, relay.call('POST', '/admin/templates/preview', { token: relay.token, body: { data: 'not an object' } }));
    await check(preview, relay.call('POST', '/admin/templates/preview', { token: relay.token, body: { templateId: 'tpl_none' } }));
    await check(preview, relay.call('POST', '/admin/templates/preview', { token: member, body: {} }));
    await check(preview, relay.call('POST', '/admin/templates/preview', { body: {} }));
    await check(preview, relay.call('POST', '/admin/templates/preview', { token: relay.token, raw: 'x'.repeat(1024 * 1024 + 1), headers: { 'content-type': 'application/json' } }));
    await check(preview, relay.call('POST', '/admin/templates/preview', { token: relay.token, raw: '{}', headers: { 'content-type': 'text/plain' } }));
    doc.check(preview, await slowBody(relay.app.relay!.port, '/api/v1/admin/templates/preview', { 'x-forwarded-for': freshIp(), authorization: `Bearer ${relay.token}` }));
    // 503 needs the in-flight budget used up (test/inflight-budget.test.ts holds it with admin bodies).
    doc.expectAllSeen(preview, ['503']);
  });

  it('POST /api/v1/submissions', async () => {
    const op = 'POST /api/v1/submissions';
    const origin = 'https://conformance.example';
    const { site } = await relay.siteWithForm({ origins: [origin] });
    const submit = (body: unknown, options: { ip?: string; headers?: Record<string, string> } = {}) =>
      relay.call('POST', '/submissions', { body, ...options, headers: { origin, ...options.headers } });
    const valid = { siteKey: site.siteKey, formKey: 'contact', data: { message: 'conformance' } };
    await check(op, submit(valid));
    await check(op, submit({ ...valid, data: 'not an object' }));
    await check(op, submit({ ...valid, formKey: 'nope' }));
    await check(op, relay.call('POST', '/submissions', { raw: 'x'.repeat(1024 * 1024 + 1), headers: { 'content-type': 'application/json' } }));
    const idempotencyKey = `conformance-${randomBytes(4).toString('hex')}`;
    await check(op, submit(valid, { headers: { 'idempotency-key': idempotencyKey } }));
    await check(op, submit({ ...valid, data: { message: 'another body' } }, { headers: { 'idempotency-key': idempotencyKey } }));
    const ip = freshIp();
    for (let i = 0; i < 11; i++) await check(op, submit({ ...valid, formKey: 'nope' }, { ip }));
    doc.check(op, await slowBody(relay.app.relay!.port, '/api/v1/submissions', { 'x-forwarded-for': freshIp(), origin }));
    // A provider named without a secret: refused (503), never let through.
    await relay.admin('PUT', `/admin/sites/${site.id}/captcha`, { provider: 'turnstile', siteKey: 'conformance' });
    await check(op, submit({ ...valid, captchaToken: 'token' }));
    // 409 needs a request still at work when its repeat comes (test/relay-idempotency.test.ts holds one with a slow CAPTCHA provider).
    doc.expectAllSeen(op, ['409']);
  });
});
