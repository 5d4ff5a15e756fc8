/**
 * The WhatsApp sender against the local Cloud API (test/whatsapp-cloud-api.ts): what goes on
 * the wire, and which outcome each of the API's answers becomes. A few answers no Graph server
 * gives (a redirect, an HTML 502, an HTTP-date Retry-After) come from a bare node:http server.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeWhatsApp, type FakeWhatsApp } from '../test/whatsapp-cloud-api.ts';
import type { RenderedMessage } from './channel.ts';
import { clipCharacters, MAX_TEXT_BODY_CHARS, WhatsAppSender, type WhatsAppSettings } from './whatsapp.ts';

const TOKEN = 'EAAG-test-system-user-token';
const PHONE_NUMBER_ID = '106540352242922';
const TEMPLATE = { name: 'form_notification', language: 'en_US' };
/** Generous: CI is a loaded 2-core machine, and only 'hang' waits for it. */
const TIMEOUT_MS = 20_000;

const message: RenderedMessage = {
  subject: 'New submission: Contact form',
  html: '<p>Name: Ada</p>',
  text: 'Name: Ada\nMessage: Hello',
};

let api: FakeWhatsApp;
let settings: WhatsAppSettings;
const sender = new WhatsAppSender();

beforeEach(async () => {
  api = await startFakeWhatsApp({
    token: TOKEN,
    phoneNumberId: PHONE_NUMBER_ID,
    templates: [{ ...TEMPLATE, bodyParameters: 1 }],
  });
  settings = { graphUrl: api.url, phoneNumberId: PHONE_NUMBER_ID, token: TOKEN, timeoutMs: TIMEOUT_MS };
});

afterEach(async () => {
  await api.close();
});

describe('WhatsAppSender: what it sends', () => {
  it('sends a text message: path, bearer token and body as the Cloud API wants them, the number as digits', async () => {
    const outcome = await sender.send(settings, '+15551234567', message);

    expect(api.messages).toHaveLength(1);
    const [sent] = api.messages;
    expect(outcome).toEqual({ kind: 'delivered', providerStatus: 'http 200', providerId: sent!.wamid });
    expect(sent!.wamid).toMatch(/^wamid\./);
    expect(sent!.path).toBe(`/v21.0/${PHONE_NUMBER_ID}/messages`);
    expect(sent!.authorization).toBe(`Bearer ${TOKEN}`);
    expect(sent!.contentType).toBe('application/json');
    expect(sent!.body).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '15551234567',
      type: 'text',
      text: { preview_url: false, body: 'New submission: Contact form\n\nName: Ada\nMessage: Hello' },
    });
  });

  it('sends the configured template with the message text as its one body parameter, on one line', async () => {
    const multiline = { ...message, text: 'Name:\tAda\r\nMessage:     Hello\n\nBye ' };
    const outcome = await sender.send({ ...settings, template: TEMPLATE }, '+447700900123', multiline);

    expect(outcome.kind).toBe('delivered');
    expect(api.messages[0]!.body).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '447700900123',
      type: 'template',
      template: {
        name: 'form_notification',
        language: { code: 'en_US' },
        components: [{ type: 'body', parameters: [{ type: 'text', text: 'Name: Ada Message: Hello Bye' }] }],
      },
    });
  });

  it('clips a template parameter to 1024 characters', async () => {
    const outcome = await sender.send({ ...settings, template: TEMPLATE }, '+15551234567', { ...message, text: 'word '.repeat(1000) });

    expect(outcome.kind).toBe('delivered');
    const template = api.messages[0]!.body.template as { components: Array<{ parameters: Array<{ text: string }> }> };
    const text = template.components[0]!.parameters[0]!.text;
    expect(Array.from(text)).toHaveLength(1024);
    expect(text.endsWith('…')).toBe(true);
  });

  it('clips the text body to 4096 characters, counting an emoji as one and never splitting it', async () => {
    const long = { ...message, subject: 'Alert', text: '😀'.repeat(5000) };
    const outcome = await sender.send(settings, '+15551234567', long);

    // The fake refuses a body over 4096 characters: delivered means it fitted.
    expect(outcome.kind).toBe('delivered');
    const body = (api.messages[0]!.body.text as { body: string }).body;
    expect(Array.from(body)).toHaveLength(MAX_TEXT_BODY_CHARS);
    expect(body.startsWith('Alert\n\n😀')).toBe(true);
    expect(body.endsWith('😀…')).toBe(true);
    expect(hasLoneSurrogate(body)).toBe(false);
  });

  it('leaves a body of exactly 4096 characters whole', async () => {
    const text = 'é'.repeat(MAX_TEXT_BODY_CHARS - 'Alert\n\n'.length);
    await sender.send(settings, '+15551234567', { ...message, subject: 'Alert', text });

    expect((api.messages[0]!.body.text as { body: string }).body).toBe(`Alert\n\n${text}`);
  });

  it('refuses a recipient that is not E.164 without calling the API', async () => {
    for (const to of ['15551234567', '+1 555 123 4567', '+0123456', '+1234567890123456', '']) {
      const outcome = await sender.send(settings, to, message);
      expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'not sent' });
    }
    expect(api.requestCount()).toBe(0);
  });

  it('sends to what the relay accepts as a recipient: 8 to 15 digits, not 7, not 16', async () => {
    expect(await sender.send(settings, '+1234567', message)).toMatchObject({ kind: 'permanent', providerStatus: 'not sent' });
    expect(await sender.send(settings, '+1234567890123456', message)).toMatchObject({ kind: 'permanent', providerStatus: 'not sent' });
    expect(api.requestCount()).toBe(0);
    expect(await sender.send(settings, '+12345678', message)).toMatchObject({ kind: 'delivered' });
    expect(await sender.send(settings, '+123456789012345', message)).toMatchObject({ kind: 'delivered' });
  });
});

describe('WhatsAppSender: what each answer becomes', () => {
  it('an undeliverable number (131026) is permanent, with the API message', async () => {
    api.setMode('undeliverable', { to: '+15550000001' });
    const outcome = await sender.send(settings, '+15550000001', message);

    expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'http 400 code 131026' });
    expect(outcome.kind !== 'delivered' && outcome.error).toContain('(#131026) Message undeliverable');
    expect(outcome.kind !== 'delivered' && outcome.error).toContain('fbtrace_id');
  });

  it('a mode set for one number leaves the others alone', async () => {
    api.setMode('undeliverable', { to: '+15550000001' });
    expect((await sender.send(settings, '+15550000002', message)).kind).toBe('delivered');
    expect((await sender.send(settings, '+15550000001', message)).kind).toBe('permanent');
    expect(api.messages.map((sent) => sent.waId)).toEqual(['15550000002']);
  });

  it('an expired token (190, 401) is permanent and does not throw', async () => {
    api.setMode('bad-token');
    const outcome = await sender.send(settings, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'http 401 code 190' });
    expect(outcome.kind !== 'delivered' && outcome.error).toContain('Session has expired');
  });

  it('a wrong token is permanent, and the error does not repeat it', async () => {
    const outcome = await sender.send({ ...settings, token: 'EAAG-revoked' }, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'http 401 code 190' });
    expect(JSON.stringify(outcome)).not.toContain('EAAG');
  });

  it('a wrong phone number ID (100) is permanent', async () => {
    const outcome = await sender.send({ ...settings, phoneNumberId: '999' }, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'http 400 code 100' });
  });

  it('a template the account does not have (132001) is permanent', async () => {
    const outcome = await sender.send({ ...settings, template: { name: 'gone', language: 'en_US' } }, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'http 404 code 132001' });
  });

  it('throttling (130429, 429) is transient, with no retryAfterMs when there is no Retry-After', async () => {
    api.setMode('throttled');
    const outcome = await sender.send(settings, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'http 429 code 130429' });
    expect(outcome).not.toHaveProperty('retryAfterMs');
  });

  it('throttling honours Retry-After in seconds', async () => {
    api.setMode('throttled', { retryAfterSeconds: 7 });
    const outcome = await sender.send(settings, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'http 429 code 130429', retryAfterMs: 7000 });
  });

  it('throttling is transient by its code even when it comes with HTTP 400', async () => {
    api.setMode('throttled', { httpStatus: 400, retryAfterSeconds: 2 });
    const outcome = await sender.send(settings, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'http 400 code 130429', retryAfterMs: 2000 });
  });

  it('a server error (131000, 500) is transient', async () => {
    api.setMode('error-500');
    const outcome = await sender.send(settings, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'http 500 code 131000' });
  });

  it('an API that never answers is transient after timeoutMs, and the connection is closed', async () => {
    api.setMode('hang');
    const outcome = await sender.send({ ...settings, timeoutMs: 300 }, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'timeout' });
    expect(outcome.kind !== 'delivered' && outcome.error).toContain('300 ms');
    await waitFor(() => api.abortedByClient() === 1);
  });

  it('an endless answer body is cut at the cap: transient, no memory blow-up', async () => {
    api.setMode('oversized');
    const outcome = await sender.send(settings, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'http 200' });
    expect(outcome.kind !== 'delivered' && outcome.error).toContain('exceeds 65536 bytes');
    await waitFor(() => api.abortedByClient() === 1);
  });

  it('a refused connection is transient', async () => {
    // A port that was just free: nothing listens there now.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const outcome = await sender.send({ ...settings, graphUrl: `http://127.0.0.1:${port}/v21.0` }, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'network error' });
    expect(outcome.kind !== 'delivered' && outcome.error).toContain('ECONNREFUSED');
  });
});

describe('WhatsAppSender: answers no Graph server gives', () => {
  let raw: Server | undefined;
  afterEach(async () => {
    raw?.closeAllConnections();
    await new Promise<void>((resolve) => (raw ? raw.close(() => resolve()) : resolve()));
    raw = undefined;
  });

  async function rawApi(handler: RequestListener): Promise<WhatsAppSettings> {
    raw = createServer(handler);
    await new Promise<void>((resolve) => raw!.listen(0, '127.0.0.1', resolve));
    return { ...settings, graphUrl: `http://127.0.0.1:${(raw.address() as AddressInfo).port}/v21.0` };
  }

  it('a redirect is not followed (it would carry the token) and is permanent', async () => {
    let requests = 0;
    const target = await rawApi((req, res) => {
      requests++;
      res.writeHead(307, { location: 'http://127.0.0.1:9/steal' }).end();
    });
    const outcome = await sender.send(target, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'permanent', providerStatus: 'http 307' });
    expect(requests).toBe(1);
  });

  it('an HTML 502 from a proxy is transient, classified by its status', async () => {
    const target = await rawApi((req, res) => void res.writeHead(502, { 'content-type': 'text/html' }).end('<html>Bad Gateway</html>'));
    const outcome = await sender.send(target, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'http 502' });
    expect(outcome.kind !== 'delivered' && outcome.error).toContain('Bad Gateway');
  });

  it('a body that drips forever is given up at timeoutMs (transient), the connection closed', async () => {
    let closed = false;
    const target = await rawApi((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).write('{"messages":[');
      // A byte every 20 ms: never idle, never done.
      const drip = setInterval(() => res.write(' '), 20);
      res.on('close', () => {
        clearInterval(drip);
        closed = true;
      });
    });
    const started = Date.now();
    const outcome = await sender.send({ ...target, timeoutMs: 300 }, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'timeout' });
    expect(Date.now() - started).toBeLessThan(5000);
    await waitFor(() => closed);
  });

  it('a Retry-After given as an HTTP date is honoured', async () => {
    const target = await rawApi((req, res) => {
      const retryAt = new Date(Date.now() + 60_000).toUTCString();
      res.writeHead(503, { 'retry-after': retryAt, 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: '(#2) Service temporarily unavailable', type: 'OAuthException', code: 2 } }));
    });
    const outcome = await sender.send(target, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'http 503 code 2' });
    const retryAfterMs = outcome.kind === 'transient' ? outcome.retryAfterMs : undefined;
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(60_000);
  });

  it('a 200 that is not a send result is transient: nothing says the message was taken', async () => {
    const target = await rawApi((req, res) => void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>Welcome</html>'));
    const outcome = await sender.send(target, '+15551234567', message);

    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'http 200' });
  });
});

describe('the fake Cloud API refuses what the real one refuses', () => {
  async function post(body: string, headers: Record<string, string> = {}) {
    const response = await fetch(`${api.url}/${PHONE_NUMBER_ID}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
      body,
    });
    return { status: response.status, error: ((await response.json()) as { error: { code: number; type: string } }).error };
  }

  it('a body that is not JSON, or lacks messaging_product, is 400 code 100', async () => {
    expect(await post('{"to":')).toMatchObject({ status: 400, error: { code: 100 } });
    expect(await post(JSON.stringify({ to: '15551234567', type: 'text', text: { body: 'hi' } }))).toMatchObject({ status: 400, error: { code: 100 } });
  });

  it('a template parameter with a newline is 400 code 100', async () => {
    const template = { name: TEMPLATE.name, language: { code: 'en_US' }, components: [{ type: 'body', parameters: [{ type: 'text', text: 'a\nb' }] }] };
    const body = { messaging_product: 'whatsapp', to: '15551234567', type: 'template', template };
    expect(await post(JSON.stringify(body))).toMatchObject({ status: 400, error: { code: 100 } });
  });

  it('no bearer token is 401 code 190 OAuthException', async () => {
    const body = { messaging_product: 'whatsapp', to: '15551234567', type: 'text', text: { body: 'hi' } };
    expect(await post(JSON.stringify(body), { authorization: '' })).toMatchObject({ status: 401, error: { code: 190, type: 'OAuthException' } });
    expect(api.messages).toHaveLength(0);
  });
});

describe('clipCharacters', () => {
  it('counts code points and cuts between them', () => {
    expect(clipCharacters('abc', 3)).toBe('abc');
    expect(clipCharacters('abcd', 3)).toBe('ab…');
    expect(clipCharacters('😀😀😀', 3)).toBe('😀😀😀');
    expect(clipCharacters('😀😀😀😀', 3)).toBe('😀😀…');
  });
});

/** Polls until `condition` holds; a generous deadline, no timing asserted. */
async function waitFor(condition: () => boolean, deadlineMs = 15_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error('condition not met within the deadline');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A UTF-16 surrogate without its pair: what a cut through an emoji leaves. */
function hasLoneSurrogate(text: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);
}
