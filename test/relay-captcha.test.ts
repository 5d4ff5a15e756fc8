/**
 * CAPTCHA on POST /api/v1/submissions (relay spec 4.1 and 7) against local servers that answer
 * as reCAPTCHA v2/v3, hCaptcha and Turnstile do (test/captcha-providers.ts), configured through
 * the SLUICE_RELAY_*_VERIFY_URL settings: every refusal of the spec's table, for each provider.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CaptchaProvider } from '../relay/model.ts';
import { CAPTCHA_PLACEHOLDER } from '../relay/public.ts';
import { startCaptchaProviders, type FakeCaptchaProviders } from './captcha-providers.ts';
import { expectError, startRelayFixture, type RelayFixture } from './relay-fixture.ts';

const ORIGIN = 'https://forms.example.com';
const HOST = 'forms.example.com';
let providers: FakeCaptchaProviders;
let relay: RelayFixture;

beforeAll(async () => {
  providers = await startCaptchaProviders();
  relay = await startRelayFixture({
    'relay.recaptchaVerifyUrl': providers.endpoints.recaptcha,
    'relay.hcaptchaVerifyUrl': providers.endpoints.hcaptcha,
    'relay.turnstileVerifyUrl': providers.endpoints.turnstile,
    'relay.captchaTimeoutMs': 1000,
  });
});
afterAll(async () => {
  await relay?.stop();
  await providers?.close();
});

interface CaptchaSite {
  site: any;
  providerKey: string;
  submit(token: string | undefined, origin?: string): Promise<Awaited<ReturnType<RelayFixture['call']>>>;
}

let sites = 0;
/** A site with `provider` configured (secret registered at the fake provider) and a form `contact`. */
async function captchaSite(provider: CaptchaProvider, options: { secret?: string; scoreThreshold?: number } = {}): Promise<CaptchaSite> {
  const { site } = await relay.siteWithForm({ origins: [ORIGIN] });
  const providerKey = `site-key-${provider}-${++sites}`;
  const secret = options.secret ?? `secret-${provider}-${sites}`;
  providers.registerSite(provider, providerKey, `secret-${provider}-${sites}`);
  await relay.admin('PUT', `/admin/sites/${site.id}/captcha`, { provider, siteKey: providerKey, secret, ...(options.scoreThreshold !== undefined ? { scoreThreshold: options.scoreThreshold } : {}) });
  return {
    site,
    providerKey,
    submit: (token, origin = ORIGIN) =>
      relay.call('POST', '/submissions', { body: { siteKey: site.siteKey, formKey: 'contact', ...(token !== undefined ? { captchaToken: token } : {}), data: { name: 'Ann' } }, headers: { origin } }),
  };
}

const FAILED = 'CAPTCHA verification failed';

describe.each(['recaptcha_v2', 'recaptcha_v3', 'hcaptcha', 'turnstile'] as const)('%s', (provider) => {
  it('accepts a fresh token and sends the provider the site secret, the token and the visitor IP', async () => {
    const { submit, providerKey, site } = await captchaSite(provider);
    const token = providers.issue(provider, providerKey, { hostname: HOST });
    const before = providers.requests.length;
    const reply = await submit(token);
    expect(reply.status, reply.text).toBe(201);
    const [sent] = providers.requests.slice(before);
    expect(sent!.form).toMatchObject({ secret: `secret-${provider}-${sites}`, response: token, remoteip: expect.stringMatching(/^198\.18\./) });
    if (provider === 'hcaptcha') expect(sent!.form.sitekey).toBe(providerKey);
    expect(site.id).toBeTruthy();
  });

  it('requires a token, and refuses the placeholder, an invalid, a reused and an expired token', async () => {
    const { submit, providerKey } = await captchaSite(provider);
    expectError(await submit(undefined), 400, 'CAPTCHA token is required for this site');
    expectError(await submit(''), 400, 'CAPTCHA token is required for this site');
    expectError(await submit(CAPTCHA_PLACEHOLDER), 400, FAILED);
    expectError(await submit('not-a-token-the-provider-issued'), 400, FAILED);
    const token = providers.issue(provider, providerKey, { hostname: HOST });
    expect((await submit(token)).status).toBe(201);
    const asked = providers.requests.length;
    expectError(await submit(token), 400, FAILED);
    // A token seen before is refused without asking the provider again.
    expect(providers.requests.length).toBe(asked);
    const expired = providers.issue(provider, providerKey, { hostname: HOST });
    providers.expire(expired);
    expectError(await submit(expired), 400, FAILED);
  });

  it('refuses a token of another key pair, and one solved on a hostname the site does not allow', async () => {
    const { providerKey } = await captchaSite(provider);
    // This site holds a secret that is not the one of the key pair its tokens come from.
    const mismatched = await captchaSite(provider, { secret: 'secret-of-another-key-pair' });
    expectError(await mismatched.submit(providers.issue(provider, mismatched.providerKey, { hostname: HOST })), 400, FAILED);
    const other = await captchaSite(provider);
    expectError(await other.submit(providers.issue(provider, providerKey, { hostname: HOST })), 400, FAILED);
    expectError(await other.submit(providers.issue(provider, other.providerKey, { hostname: 'evil.example.net' })), 400, FAILED);
  });

  it('answers 503 while the provider is down, hangs past the timeout or answers 500, and retrying with a fresh token works after', async () => {
    const { submit, providerKey } = await captchaSite(provider);
    for (const mode of ['down', 'hang', 'http500', 'garbage'] as const) {
      providers.setMode(provider, mode);
      const reply = await submit(providers.issue(provider, providerKey, { hostname: HOST }));
      expectError(reply, 503, 'CAPTCHA verification temporarily unavailable. Please try again.');
      expect(Number(reply.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    providers.setMode(provider, 'ok');
    expect((await submit(providers.issue(provider, providerKey, { hostname: HOST }))).status).toBe(201);
  });

  it('refuses with 503 when the site names the provider but its secret was removed, and recovers when one is set', async () => {
    const { submit, providerKey, site } = await captchaSite(provider);
    const removed = await relay.admin('DELETE', `/admin/sites/${site.id}/captcha/secret`);
    expect(removed.captcha).toMatchObject({ provider, secretConfigured: false });
    const asked = providers.requests.length;
    const reply = await submit(providers.issue(provider, providerKey, { hostname: HOST }));
    expectError(reply, 503, 'CAPTCHA is misconfigured for this site');
    expect(reply.headers.get('retry-after')).toBeNull();
    expect(providers.requests.length).toBe(asked);
    await relay.admin('PUT', `/admin/sites/${site.id}/captcha`, { provider, siteKey: providerKey, secret: `secret-${provider}-${sites}` });
    expect((await submit(providers.issue(provider, providerKey, { hostname: HOST }))).status).toBe(201);
  });
});

describe('reCAPTCHA v3 scores', () => {
  it('refuses a score under the site threshold and accepts one at it', async () => {
    const { submit, providerKey } = await captchaSite('recaptcha_v3', { scoreThreshold: 0.7 });
    expectError(await submit(providers.issue('recaptcha_v3', providerKey, { hostname: HOST, score: 0.3 })), 400, FAILED);
    expect((await submit(providers.issue('recaptcha_v3', providerKey, { hostname: HOST, score: 0.7 }))).status).toBe(201);
  });
});

describe('a site without CAPTCHA', () => {
  it('takes no token, the placeholder word, or any token, without asking a provider', async () => {
    const { site } = await relay.siteWithForm({ origins: [ORIGIN] });
    const asked = providers.requests.length;
    for (const token of [undefined, CAPTCHA_PLACEHOLDER, 'left-over-token']) {
      const reply = await relay.call('POST', '/submissions', { body: { siteKey: site.siteKey, formKey: 'contact', ...(token !== undefined ? { captchaToken: token } : {}), data: {} }, headers: { origin: ORIGIN } });
      expect(reply.status).toBe(201);
    }
    expect(providers.requests.length).toBe(asked);
  });
});
