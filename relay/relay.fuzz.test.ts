/**
 * Fuzzing what the relay's public endpoints do with a body before any I/O: the JSON parse,
 * the schema (schemas.ts), the `data` limits (data.ts), the Idempotency-Key and the fingerprint
 * of the body, and the sanitiser (sanitize.ts). Valid bodies pass; anything else is a 4xx
 * `RelayError`, never another exception. What the sanitiser returns never holds a script, an
 * event handler or a javascript: link (body), nor a line break or control character (subject).
 * Settings and replay: test/fuzz.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FUZZ_TEST_TIMEOUT_MS, fuzzParameters, mutated } from '../test/fuzz.ts';
import { checkData } from './data.ts';
import { RelayError } from './errors.ts';
import { fingerprint, idempotencyKey } from './idempotency.ts';
import { parseJson, refuseWebhookChannel } from './public.ts';
import { sanitizeBody, sanitizeSubject } from './sanitize.ts';
import { createBodyValidator } from './schemas.ts';

const validate = createBodyValidator();
type Endpoint = 'Submission' | 'Notification' | 'TenantDiscovery';
const ENDPOINTS: Endpoint[] = ['Submission', 'Notification', 'TenantDiscovery'];

/** The steps of a public endpoint's body, in order, up to the first that needs storage. */
function readBody(endpoint: Endpoint, raw: Buffer, contentType: string | undefined, key: string | undefined): void {
  const body = parseJson(raw, contentType);
  const input = validate<{ data?: unknown; subject?: string; body?: string }>(endpoint, endpoint === 'Notification' ? refuseWebhookChannel(body) : body);
  if (input.data !== undefined) checkData(input.data);
  idempotencyKey(key);
  fingerprint(body);
  if (endpoint === 'Notification') {
    sanitizeSubject(input.subject ?? '');
    sanitizeBody(input.body ?? '');
  }
}

/** Passes when `run` returns or refuses with a 4xx RelayError; rethrows anything else. */
function passesOrRefuses(run: () => void): RelayError | undefined {
  try {
    run();
    return undefined;
  } catch (err) {
    if (err instanceof RelayError && err.statusCode >= 400 && err.statusCode < 500) return err;
    throw err;
  }
}

// ---- valid bodies ------------------------------------------------------------------------------

const key = fc.stringMatching(/^[A-Za-z0-9_-]{1,100}$/);
const text = (maxLength: number) => fc.string({ unit: 'binary', maxLength });
const fieldName = text(40).filter((name) => name.length > 0 && !['_subject', '_body', '_footer'].includes(name));
const scalar = fc.oneof(text(60), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
const meta = fc.oneof(scalar, fc.array(scalar, { maxLength: 5 }), fc.dictionary(fieldName, scalar, { maxKeys: 5 }));
const data = fc.dictionary(fieldName, meta, { maxKeys: 8 });
const email = fc.tuple(fc.stringMatching(/^[a-z0-9]([a-z0-9+_-]{0,20}[a-z0-9])?$/), fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?$/)).map(([local, host]) => `${local}@${host}.example`);

const VALID: Record<Endpoint, fc.Arbitrary<object>> = {
  Submission: fc.record({ siteKey: key, formKey: key, captchaToken: text(100), data }, { requiredKeys: ['siteKey', 'formKey', 'data'] }),
  Notification: fc.record({
    siteKey: key, formKey: key, channels: fc.uniqueArray(fc.constantFrom('email', 'whatsapp')),
    recipients: fc.record({ email: fc.array(email, { minLength: 1, maxLength: 3 }), whatsapp: fc.array(fc.stringMatching(/^\+[1-9]\d{7,14}$/), { minLength: 1, maxLength: 3 }) }, { requiredKeys: [] }),
    data, template: text(100), subject: text(500), body: text(2000),
  }, { requiredKeys: ['siteKey'] }),
  TenantDiscovery: fc.record({ email }),
};

const JSON_TYPES = ['application/json', 'application/json; charset=utf-8', ' Application/JSON '];
const contentTypes = fc.oneof(fc.constantFrom(...JSON_TYPES), fc.constantFrom(undefined, '', 'text/plain', 'constructor', '__proto__', 'application/json;'), text(40));
const keys = fc.oneof(fc.constant(undefined), text(300));

/** HTML built to get past a sanitiser: scripts, handlers and javascript: links, plain and entity-escaped, nested and broken. */
const hostileHtml = fc.tuple(
  fc.array(fc.constantFrom(
    '<script>alert(1)</script>', '<img src=x onerror=alert(1)>', '<a href="javascript:alert(1)">x</a>', '<a href="jav&#x09;ascript:alert(1)">x</a>',
    '<svg onload=alert(1)>', '<scr<script>ipt>alert(1)</script>', '<a href="&#106;avascript:alert(1)">x</a>', '<iframe src="javascript:alert(1)">',
    '<p style="background:url(javascript:alert(1))">', '<a href=" JaVaScRiPt:alert(1)">x</a>', '<<script>script>', '<b onmouseover="x">b</b>', '</textarea><script>',
  ), { minLength: 1, maxLength: 4 }),
  fc.nat({ max: 12 }),
  text(20),
).map(([parts, escapes, filler]) => {
  let html = parts.join(filler);
  for (let i = 0; i < escapes; i++) html = html.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  return html;
});

/** A script or handler left in sanitised HTML as markup (escaped text is harmless). */
const UNSAFE_HTML = [/<\s*script/i, /<[^>]*\son[a-z]+\s*=/i, /<[^>]*=\s*["']?\s*javascript:/i, /<\s*(iframe|svg|object|embed|style)/i];

describe('relay bodies under fuzzing', () => {
  for (const endpoint of ENDPOINTS) {
    it(`${endpoint}: a valid body passes every step`, () => {
      fc.assert(fc.property(VALID[endpoint], fc.constantFrom(...JSON_TYPES), (body, contentType) => {
        readBody(endpoint, Buffer.from(JSON.stringify(body)), contentType, undefined);
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);

    it(`${endpoint}: broken, random or deep bodies, odd content types and keys pass or get a 4xx`, () => {
      const bodies = fc.oneof(
        mutated(VALID[endpoint].map((body) => Buffer.from(JSON.stringify(body)))).map((bytes) => Buffer.from(bytes)),
        fc.jsonValue({ maxDepth: 40 }).map((value) => Buffer.from(JSON.stringify(value) ?? '')),
        fc.tuple(VALID[endpoint], fc.jsonValue({ maxDepth: 4 }), fc.constantFrom('data', 'recipients', 'channels', 'subject', 'siteKey', 'email', '__proto__', 'constructor'))
          .map(([body, value, field]) => Buffer.from(JSON.stringify({ ...body, [field]: value }))),
        fc.uint8Array({ maxLength: 256 }).map((bytes) => Buffer.from(bytes)),
      );
      fc.assert(fc.property(bodies, contentTypes, keys, (raw, contentType, key) => {
        const refusal = passesOrRefuses(() => readBody(endpoint, raw, contentType, key));
        if (refusal) expect(refusal.message.length).toBeGreaterThan(0);
      }), fuzzParameters());
    }, FUZZ_TEST_TIMEOUT_MS);
  }

  it('the sanitised body holds no script, event handler or javascript: link, and sanitising it again changes nothing', () => {
    fc.assert(fc.property(fc.oneof(hostileHtml, text(200)), (html) => {
      let clean = '';
      if (passesOrRefuses(() => (clean = sanitizeBody(html)))) return; // escaped over and over: 400
      for (const pattern of UNSAFE_HTML) expect(clean, String(pattern)).not.toMatch(pattern);
      expect(sanitizeBody(clean)).toBe(clean);
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);

  it('the sanitised subject is one line of text without control characters, and sanitising it again changes nothing', () => {
    fc.assert(fc.property(fc.oneof(hostileHtml, text(200), fc.string({ unit: 'binary-ascii', maxLength: 100 })), (subject) => {
      let clean = '';
      if (passesOrRefuses(() => (clean = sanitizeSubject(subject)))) return; // escaped over and over: 400
      // eslint-disable-next-line no-control-regex
      expect(clean).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/);
      expect(sanitizeSubject(clean)).toBe(clean);
    }), fuzzParameters());
  }, FUZZ_TEST_TIMEOUT_MS);
});
