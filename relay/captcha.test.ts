import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startCaptchaProviders, type FakeCaptchaProviders, type IssuedFor, type ProviderMode } from '../test/captcha-providers.ts';
import { freePort } from '../test/sluice-processes.ts';
import { CaptchaVerifier, DEFAULT_CAPTCHA_ENDPOINTS, type CaptchaCheck } from './captcha.ts';
import { CAPTCHA_PROVIDERS, type CaptchaProvider } from './model.ts';

let providers: FakeCaptchaProviders;
let verifier: CaptchaVerifier;

beforeAll(async () => {
  providers = await startCaptchaProviders();
  verifier = new CaptchaVerifier({ endpoints: providers.endpoints, timeoutMs: 10_000 });
});
afterEach(() => {
  for (const provider of CAPTCHA_PROVIDERS) providers.setMode(provider, 'ok');
});
afterAll(() => providers?.close());

const ALLOWED = 'www.example.com';

/** A site registered with the provider (its own keys), and checks of its tokens. */
function registeredSite(provider: CaptchaProvider, registeredAs: CaptchaProvider = provider) {
  const siteKey = `sitekey-${randomUUID()}`;
  const secret = `secret-${randomUUID()}`;
  providers.registerSite(registeredAs, siteKey, secret);
  return {
    siteKey,
    secret,
    token: (issued: IssuedFor = { hostname: ALLOWED }) => providers.issue(registeredAs, siteKey, issued),
    check: (token: string, overrides: Partial<CaptchaCheck> = {}): CaptchaCheck => ({
      provider,
      secret,
      siteKey,
      token,
      remoteIp: '203.0.113.7',
      allowedHostnames: [ALLOWED],
      ...overrides,
    }),
  };
}

/** The code each provider's docs give for a token verified before, or too old. */
const spentCode = (provider: CaptchaProvider) =>
  provider === 'hcaptcha' ? 'invalid-or-already-seen-response' : 'timeout-or-duplicate';


it('points at the real providers by default', () => {
  expect(DEFAULT_CAPTCHA_ENDPOINTS).toEqual({
    recaptcha: 'https://www.google.com/recaptcha/api/siteverify',
    hcaptcha: 'https://api.hcaptcha.com/siteverify',
    turnstile: 'https://challenges.cloudflare.com/turnstile/v0/siteverify',
  });
});

describe.each(CAPTCHA_PROVIDERS)('%s', (provider) => {
  it('accepts a fresh token solved on an allowed hostname', async () => {
    const site = registeredSite(provider);
    expect(await verifier.verify(site.check(site.token()))).toEqual({ ok: true });
  });

  it('rejects a token the provider never issued', async () => {
    const site = registeredSite(provider);
    const outcome = await verifier.verify(site.check('forged-token-of-the-right-length-0123456789'));
    expect(outcome).toMatchObject({ ok: false, reason: 'rejected' });
    expect(outcome.ok === false && outcome.detail).toContain('invalid-input-response');
  });

  it('rejects a token verified a second time', async () => {
    const site = registeredSite(provider);
    const token = site.token();
    expect(await verifier.verify(site.check(token))).toEqual({ ok: true });
    const again = await verifier.verify(site.check(token));
    expect(again).toMatchObject({ ok: false, reason: 'rejected' });
    expect(again.ok === false && again.detail).toContain(spentCode(provider));
  });

  it('rejects an expired token', async () => {
    const site = registeredSite(provider);
    const token = site.token();
    providers.expire(token);
    const outcome = await verifier.verify(site.check(token));
    expect(outcome).toMatchObject({ ok: false, reason: 'rejected' });
    expect(outcome.ok === false && outcome.detail).toContain(spentCode(provider));
  });

  it("rejects a token checked with another site's secret (key pair mismatch)", async () => {
    const site = registeredSite(provider);
    const other = registeredSite(provider);
    const outcome = await verifier.verify(site.check(site.token(), { secret: other.secret }));
    expect(outcome).toMatchObject({ ok: false, reason: 'rejected' });
    // hCaptcha is sent the site key, so it names the mismatch itself.
    expect(outcome.ok === false && outcome.detail).toContain(provider === 'hcaptcha' ? 'sitekey-secret-mismatch' : 'invalid-input-secret');
  });

  it('rejects a secret the provider does not know', async () => {
    const site = registeredSite(provider);
    const outcome = await verifier.verify(site.check(site.token(), { secret: 'not-a-secret-anyone-issued' }));
    expect(outcome).toMatchObject({ ok: false, reason: 'rejected' });
    expect(outcome.ok === false && outcome.detail).toContain('invalid-input-secret');
  });

  it('rejects a token solved on a hostname not among the allowed ones', async () => {
    const site = registeredSite(provider);
    const outcome = await verifier.verify(site.check(site.token({ hostname: 'phish.example.net' })));
    expect(outcome).toMatchObject({ ok: false, reason: 'rejected' });
    expect(outcome.ok === false && outcome.detail).toContain('"phish.example.net"');
  });

  it('compares hostnames case-insensitively', async () => {
    const site = registeredSite(provider);
    expect(await verifier.verify(site.check(site.token(), { allowedHostnames: ['WWW.Example.COM'] }))).toEqual({ ok: true });
    expect(await verifier.verify(site.check(site.token({ hostname: 'Www.Example.Com' })))).toEqual({ ok: true });
  });

  it('skips the hostname check when the site allows no hostnames', async () => {
    const site = registeredSite(provider);
    const token = site.token({ hostname: 'anywhere.example.org' });
    expect(await verifier.verify(site.check(token, { allowedHostnames: [] }))).toEqual({ ok: true });
  });

  it('sends the secret, the token and the remote IP form-encoded (and the site key to hCaptcha)', async () => {
    const site = registeredSite(provider);
    const token = site.token();
    await verifier.verify(site.check(token));
    expect(providers.requests.at(-1)).toEqual({
      provider: provider.startsWith('recaptcha') ? 'recaptcha' : provider,
      contentType: 'application/x-www-form-urlencoded',
      // Exactly these fields: no sitekey but to hCaptcha, no idempotency_key to Turnstile.
      form: {
        secret: site.secret,
        response: token,
        remoteip: '203.0.113.7',
        ...(provider === 'hcaptcha' ? { sitekey: site.siteKey } : {}),
      },
    });
  });

  it('sends no remoteip when the visitor address is unknown', async () => {
    const site = registeredSite(provider);
    expect(await verifier.verify(site.check(site.token(), { remoteIp: undefined }))).toEqual({ ok: true });
    expect(providers.requests.at(-1)!.form).not.toHaveProperty('remoteip');
  });

  it('rejects an empty token and one over 4096 characters without asking the provider', async () => {
    const site = registeredSite(provider);
    const before = providers.requests.length;
    const empty = await verifier.verify(site.check(''));
    const long = await verifier.verify(site.check('x'.repeat(4097)));
    expect(empty).toMatchObject({ ok: false, reason: 'rejected' });
    expect(long).toMatchObject({ ok: false, reason: 'rejected' });
    expect(providers.requests.length).toBe(before);
    // 4096 characters is within the limit: the provider is asked (and does not know it).
    expect(await verifier.verify(site.check('x'.repeat(4096)))).toMatchObject({ ok: false, reason: 'rejected' });
    expect(providers.requests.length).toBe(before + 1);
  });

  it.each<[ProviderMode, RegExp]>([
    ['down', /request to http:\/\/127\.0\.0\.1:\d+\/\S+ failed/],
    ['http500', /HTTP 500 from/],
    ['garbage', /is not siteverify JSON: "<!DOCTYPE html>/],
    ['wrong-json', /is not siteverify JSON/],
  ])('is unavailable when the provider is %s', async (mode, detail) => {
    const site = registeredSite(provider);
    const token = site.token();
    providers.setMode(provider, mode);
    const outcome = await verifier.verify(site.check(token));
    expect(outcome).toMatchObject({ ok: false, reason: 'unavailable' });
    expect(outcome.ok === false && outcome.detail).toMatch(detail);
  });

  it('is unavailable when the provider never answers, and aborts the request', async () => {
    const site = registeredSite(provider);
    const token = site.token();
    providers.setMode(provider, 'hang');
    const aborted = providers.abortedByClient();
    const impatient = new CaptchaVerifier({ endpoints: providers.endpoints, timeoutMs: 300 });
    const outcome = await impatient.verify(site.check(token));
    expect(outcome).toMatchObject({ ok: false, reason: 'unavailable' });
    expect(outcome.ok === false && outcome.detail).toContain('within 300 ms');
    // The provider sees the connection closed: the request was abandoned, not left open.
    await expect.poll(() => providers.abortedByClient(), { timeout: 10_000 }).toBe(aborted + 1);
  });

  it('is unavailable when the connection is refused', async () => {
    const site = registeredSite(provider);
    const url = `http://127.0.0.1:${await freePort()}/siteverify`;
    const unreachable = new CaptchaVerifier({ endpoints: { recaptcha: url, hcaptcha: url, turnstile: url }, timeoutMs: 5_000 });
    const outcome = await unreachable.verify(site.check(site.token()));
    expect(outcome).toMatchObject({ ok: false, reason: 'unavailable' });
    expect(outcome.ok === false && outcome.detail).toContain('ECONNREFUSED');
  });
});

describe('recaptcha_v3 scores', () => {
  it('accepts a score at the threshold and rejects one below it', async () => {
    const site = registeredSite('recaptcha_v3');
    expect(await verifier.verify(site.check(site.token({ hostname: ALLOWED, score: 0.7 }), { scoreThreshold: 0.7 }))).toEqual({ ok: true });
    const low = await verifier.verify(site.check(site.token({ hostname: ALLOWED, score: 0.3, action: 'submit' }), { scoreThreshold: 0.7 }));
    expect(low).toMatchObject({ ok: false, reason: 'rejected' });
    expect(low.ok === false && low.detail).toBe('recaptcha_v3: score 0.3 is below the threshold 0.7 (hostname "www.example.com", score 0.3, action "submit")');
  });

  it('applies 0.5 when the site has no threshold', async () => {
    const site = registeredSite('recaptcha_v3');
    expect(await verifier.verify(site.check(site.token({ hostname: ALLOWED, score: 0.5 })))).toEqual({ ok: true });
    expect(await verifier.verify(site.check(site.token({ hostname: ALLOWED, score: 0.4 })))).toMatchObject({ ok: false, reason: 'rejected' });
  });

  it('rejects an answer without a score (v2 keys configured as v3)', async () => {
    const site = registeredSite('recaptcha_v3', 'recaptcha_v2');
    const outcome = await verifier.verify(site.check(site.token(), { scoreThreshold: 0.5 }));
    expect(outcome).toMatchObject({ ok: false, reason: 'rejected' });
    expect(outcome.ok === false && outcome.detail).toContain('no score');
  });
});

describe('recaptcha_v2', () => {
  it('rejects an answer carrying a score (a v3 token: the key pair does not match)', async () => {
    const site = registeredSite('recaptcha_v2', 'recaptcha_v3');
    const outcome = await verifier.verify(site.check(site.token({ hostname: ALLOWED, score: 0.9 })));
    expect(outcome).toMatchObject({ ok: false, reason: 'rejected' });
    expect(outcome.ok === false && outcome.detail).toContain('carries a score (0.9)');
  });
});

describe('turnstile', () => {
  it('is unavailable when Turnstile answers internal-error (its docs: the request can be retried)', async () => {
    const site = registeredSite('turnstile');
    const token = site.token();
    providers.setMode('turnstile', 'internal-error');
    const outcome = await verifier.verify(site.check(token));
    expect(outcome).toMatchObject({ ok: false, reason: 'unavailable' });
    expect(outcome.ok === false && outcome.detail).toContain('internal-error');
  });
});
