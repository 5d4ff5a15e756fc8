/**
 * The relay configured entirely in the console, in Debian's Chromium (playwright-core) against a
 * whole `sluice serve`: the owner makes a site that allows a page's origin, a form, an email
 * recipient (an SMTP server of the test's own) and a signed webhook (a receiver that answers 503
 * at first). The form page's embed snippet, copied into a page served from another origin on
 * loopback, posts a submission: the mail arrives; the webhook's job dies after its attempts and
 * shows as dead with its attempts; retried from the console, it is delivered, signed with the
 * secret the console showed once. The submission is found by the search. Every page shot passes
 * axe's WCAG 2.1 A/AA rules.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { accessibilityProblems, launchChromium, SCREENSHOTS, watchPage } from './browser.ts';
import { ConsoleClient } from './console-client.ts';
import { startSmtpInbox, startWebhookReceiver, type SmtpInbox, type WebhookReceiver } from './delivery-peers.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';

const OWNER = { name: 'Ada', email: 'ada@relay-pages.test', password: 'correct horse battery staple' };
/** Attempts are a fraction of a second apart: a failing webhook's job dies within seconds. */
const WAIT_MS = 45_000;

let app: TestSluice;
let smtp: SmtpInbox;
let hook: WebhookReceiver;
let browser: Browser;
let page: Page;
let seen: ReturnType<typeof watchPage>;
let website: Server;
let websiteUrl = '';
/** What the web site serves at /: set once the console showed the snippet. */
let websiteHtml = '';
const accessibility = new Map<string, string[]>();

async function shot(name: string, on: Page = page, frames = true): Promise<void> {
  await on.screenshot({ path: `${SCREENSHOTS}console-${name}.png`, fullPage: true });
  accessibility.set(name, await accessibilityProblems(on, { frames }));
}
const byTestId = (id: string) => page.getByTestId(id);

beforeAll(async () => {
  [smtp, hook] = await Promise.all([startSmtpInbox(), startWebhookReceiver()]);
  hook.then = 503; // failing until the test says otherwise
  website = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Contact</title></head><body><main><h1>Contact us</h1>${websiteHtml}</main></body></html>`);
  });
  await new Promise<void>((resolve) => website.listen(0, '127.0.0.1', resolve));
  websiteUrl = `http://127.0.0.1:${(website.address() as AddressInfo).port}`;
  app = await startTestSluice({
    'console.enabled': true,
    'console.port': 0,
    'relay.allowPrivateWebhooks': true,
    'delivery.smtpUrl': smtp.url,
    'delivery.smtpFrom': 'Sluice Relay <relay@relay-pages.test>',
    'delivery.attempts': 2,
    'delivery.backoffBaseMs': 200,
    'delivery.backoffMaxMs': 400,
  });
  await new ConsoleClient(app.console!.url).firstRun(app.console!.firstRunLink!, OWNER);
  browser = await launchChromium();
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 }, baseURL: app.console!.url });
  page = await context.newPage();
  seen = watchPage(page);
  await page.goto('/sign-in');
  await byTestId('sign-in-email').fill(OWNER.email);
  await byTestId('sign-in-password').fill(OWNER.password);
  await byTestId('sign-in-submit').click();
  await byTestId('nav-user').waitFor({ timeout: 15_000 });
}, 90_000);
afterEach(async (context) => {
  if (context.task.result?.state === 'fail') await page?.screenshot({ path: `${SCREENSHOTS}console-relay-failed.png`, fullPage: true }).catch(() => {});
});
afterAll(async () => {
  await browser?.close();
  await app?.stop();
  await hook?.close();
  await smtp?.stop();
  await new Promise((resolve) => website?.close(resolve));
});

describe('a relay form configured in the console', () => {
  it('makes a site that allows the web site\'s origin, a form, an email recipient and a webhook', async () => {
    await byTestId('nav-relay').click();
    await byTestId('site-name').fill('Web');
    await byTestId('site-origins').fill(websiteUrl);
    await byTestId('site-create').click();
    await byTestId('site-link').filter({ hasText: 'Web' }).click();
    expect(await byTestId('site-origins-edit').inputValue()).toBe(websiteUrl);
    await byTestId('form-name').fill('Contact');
    await byTestId('form-key').fill('contact');
    await byTestId('form-create').click();
    await byTestId('form-link').filter({ hasText: 'Contact' }).click();
    await byTestId('recipient-address').fill('sales@relay-pages.test');
    await byTestId('recipient-add').click();
    await byTestId('recipient-row').filter({ hasText: 'sales@relay-pages.test' }).waitFor({ timeout: 15_000 });
    await byTestId('webhook-url').fill(hook.url);
    await byTestId('webhook-add').click();
    hook.secret = (await byTestId('webhook-secret-value').textContent({ timeout: 15_000 }))!.trim();
    expect(hook.secret).toMatch(/^whsec_/);
    await shot('relay-form-secret');
    await byTestId('webhook-secret-close').click();
    expect(await byTestId('webhook-secret').count()).toBe(0);
  });

  it('the page with the console\'s snippet posts a submission from its own origin: the mail arrives, the failing webhook\'s job dies', async () => {
    websiteHtml = (await byTestId('embed-snippet').textContent())!;
    expect(websiteHtml).toContain('const RELAY = "http://');
    const visitor = await browser.newPage();
    await visitor.goto(websiteUrl);
    await visitor.getByLabel('Name').fill('Ann');
    await visitor.getByLabel('Email').fill('ann@example.com');
    await visitor.getByLabel('Message').fill('Do you ship to Lisbon?');
    await visitor.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => visitor.locator('#contact-status').textContent(), { timeout: 15_000 }).toBe('Thank you, your message was sent.');
    await eventually(() => smtp.mails.some((mail) => mail.rcptTo.includes('sales@relay-pages.test')), WAIT_MS, 200);
    // Two attempts, 503 each: the webhook's job is dead.
    await eventually(async () => {
      await byTestId('jobs-refresh').click();
      return (await page.locator('[data-testid="job-row"][data-state="dead"]').count()) === 1;
    }, WAIT_MS, 500);
    expect(hook.calls.map((call) => call.answer)).toEqual([503, 503]);
    await page.locator('[data-testid="job-row"][data-state="dead"]').getByTestId('job-attempts-toggle').click();
    await expect.poll(() => byTestId('job-attempts').locator('li').count(), { timeout: 15_000 }).toBe(2);
    await shot('relay-form-dead');
  });

  it('a dead job retried from the console is delivered, signed', async () => {
    hook.then = 200;
    await page.locator('[data-testid="job-row"][data-state="dead"]').getByTestId('job-retry').click();
    await eventually(() => hook.calls.some((call) => call.answer === 200), WAIT_MS, 200);
    const delivered = hook.calls.find((call) => call.answer === 200)!;
    expect(delivered.verified).toBe(true);
    expect(JSON.parse(delivered.body).data).toMatchObject({ formKey: 'contact', fields: { name: 'Ann', message: 'Do you ship to Lisbon?' } });
    await eventually(async () => {
      await byTestId('jobs-refresh').click();
      return (await page.locator('[data-testid="job-row"][data-state="delivered"]').count()) === 2;
    }, WAIT_MS, 500);
  });

  it('finds the submission by its text', async () => {
    await byTestId('submissions-search').fill('LISBON');
    await byTestId('submissions-search-submit').click();
    await expect.poll(() => byTestId('submission-row').allTextContents(), { timeout: 15_000 }).toEqual([expect.stringContaining('Do you ship to Lisbon?')]);
    await byTestId('submissions-search').fill('Porto');
    await byTestId('submissions-search-submit').click();
    await byTestId('submissions-empty').waitFor({ timeout: 15_000 });
    await shot('relay-form');
  });

  it('makes a template, previews it as the relay renders it, and the form uses it', async () => {
    await byTestId('nav-relay').click();
    await byTestId('relay-settings-link').click();
    await byTestId('template-new').click();
    await byTestId('template-name').fill('Lead');
    await byTestId('template-subject').fill('Lead from {{name}}');
    await byTestId('template-html').fill("<p><strong>{{name}}</strong> asks: {{message}}</p><script>parent.document.title = 'ran'</script>");
    await byTestId('template-preview').click();
    expect(await byTestId('preview-subject').textContent({ timeout: 15_000 })).toBe('Lead from Ann');
    const frame = page.frameLocator('[data-testid="preview-html"]');
    expect(await frame.locator('strong').textContent({ timeout: 15_000 })).toBe('Ann');
    // A template is its admin's HTML, script and all (mail clients run none); the preview's frame runs none either.
    expect(await byTestId('preview-html').getAttribute('sandbox')).toBe('');
    expect(await page.title()).not.toBe('ran');
    // The preview's frame runs no script, so axe cannot run in it: the page around it is checked.
    await shot('relay-settings-preview', page, false);
    await byTestId('template-save').click();
    await byTestId('template-row').filter({ hasText: 'Lead' }).waitFor({ timeout: 15_000 });
    await page.goBack();
    await byTestId('site-link').filter({ hasText: 'Web' }).click();
    await byTestId('form-link').filter({ hasText: 'Contact' }).click();
    await byTestId('form-template').selectOption({ label: 'Lead' });
    await expect.poll(async () => (await byTestId('form-template').inputValue()) !== '', { timeout: 15_000 }).toBe(true);
  });

  it('issues an API key shown once and revokes it; keeps the WhatsApp token and the CAPTCHA secret out of every page', async () => {
    await page.goto('/relay/settings');
    await byTestId('relay-key-name').fill('orders backend');
    await byTestId('relay-key-create').click();
    const key = (await byTestId('relay-key-value').textContent({ timeout: 15_000 }))!.trim();
    expect(key.length).toBeGreaterThan(30);
    await byTestId('relay-key-close').click();
    const row = byTestId('relay-key-row').filter({ hasText: 'orders backend' });
    await row.getByTestId('relay-key-revoke').click();
    await row.getByText('revoked').waitFor({ timeout: 15_000 });
    expect(await page.content()).not.toContain(key);

    await byTestId('delivery-phone-id').fill('1234567890');
    await byTestId('delivery-token').fill('EAAG-a-token-that-stays-sealed');
    await byTestId('delivery-whatsapp-save').click();
    await expect.poll(() => byTestId('delivery-whatsapp-state').textContent(), { timeout: 15_000 }).toContain('phone number id 1234567890, token set');
    await shot('relay-settings');
    await page.reload();
    await byTestId('delivery-whatsapp-state').waitFor();
    expect(await page.content()).not.toContain('EAAG-a-token-that-stays-sealed');

    await byTestId('nav-relay').click();
    await byTestId('site-link').filter({ hasText: 'Web' }).click();
    await byTestId('captcha-provider').selectOption('turnstile');
    await byTestId('captcha-site-key').fill('0x4AAAAAAAtest');
    await byTestId('captcha-secret').fill('0x4AAAAAAAsecret-that-stays-sealed');
    await byTestId('captcha-save').click();
    await expect.poll(() => byTestId('site-captcha').textContent(), { timeout: 15_000 }).toBe('Cloudflare Turnstile, site key 0x4AAAAAAAtest');
    await shot('relay-site');
    await page.reload();
    await byTestId('site-captcha').waitFor();
    expect(await page.content()).not.toContain('secret-that-stays-sealed');
    await byTestId('captcha-remove').click();
    await expect.poll(() => byTestId('site-captcha').textContent(), { timeout: 15_000 }).toBe('none');
  });

  it('logs no error in the browser, and every page shot meets WCAG 2.1 A and AA as axe-core checks it', () => {
    // The one 401: GET /api/me before signing in; the one blocked script: the template's, in the preview.
    expect(seen.complaints.filter((line) => !line.includes('401') && !line.includes("Blocked script execution in 'about:srcdoc'"))).toEqual([]);
    expect([...accessibility].filter(([, problems]) => problems.length > 0)).toEqual([]);
  });
});
