/**
 * The relay tutorial's browser half, in Debian's Chromium (playwright-core) against a whole
 * `sluice serve` with the development inbox on: `sluice relay example-page` serves the form
 * snippet on 127.0.0.1, a visitor fills it in and sends it, and the console's Inbox page shows
 * what delivery kept — channel, destination, subject, time, text part — with the email's HTML
 * part in a sandboxed frame: the visitor's markup stays text in the console. Another tenant's
 * Inbox is empty. Screenshots go to test-output/; the page must pass axe's WCAG 2.1 A/AA rules.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InboxMessage } from '../delivery/inbox.ts';
import { accessibilityProblems, launchChromium, SCREENSHOTS, watchPage } from './browser.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { freePort } from './free-port.ts';

const SLUICE = fileURLToPath(new URL('../bin/sluice.mjs', import.meta.url));
const PASSWORD = 'correct horse battery staple';
const MARKUP = '<img src=x onerror="document.title=\'pwned\'"><b>bold?</b>';

let app: TestSluice;
let browser: Browser;
let examplePage: ChildProcess | undefined;
let pageOrigin = '';
let tenantId = '';
const contexts: BrowserContext[] = [];

async function newTab(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
  contexts.push(context);
  return context.newPage();
}

async function signIn(tab: Page, email: string): Promise<void> {
  await tab.goto(`${app.console!.url}/sign-in`);
  await tab.getByTestId('sign-in-email').fill(email);
  await tab.getByTestId('sign-in-password').fill(PASSWORD);
  await tab.getByTestId('sign-in-submit').click();
  await tab.getByTestId('nav-user').waitFor({ timeout: 15_000 });
}

beforeAll(async () => {
  app = await startTestSluice({ 'console.enabled': true, 'console.port': 0, 'delivery.inbox': true });
  const admin = app.relay!.admin;
  const onboarded = await admin.tenants.onboard({ name: 'Acme', owner: { email: 'owner@acme.example', password: PASSWORD } }) as { tenant: { id: string } };
  tenantId = onboarded.tenant.id;
  await admin.tenants.onboard({ name: 'Other Co', owner: { email: 'bob@other.example', password: PASSWORD } });
  const operator = { tenantId, role: 'operator' as const };
  const pagePort = await freePort();
  pageOrigin = `http://127.0.0.1:${pagePort}`;
  const site = await admin.sites.create(operator, { name: 'Marketing site', allowedOrigins: [pageOrigin] }) as { id: string; siteKey: string };
  const form = await admin.forms.create(operator, site.id, { name: 'Contact', formKey: 'contact' }) as { id: string };
  await admin.forms.addRecipient(operator, site.id, form.id, { channel: 'email', address: 'sales@acme.example' });
  await admin.forms.addRecipient(operator, site.id, form.id, { channel: 'whatsapp', address: '+4915112345678' });

  // The command as the tutorial runs it; the relay's address from the same settings the server has.
  examplePage = spawn(process.execPath, [SLUICE, 'relay', 'example-page', '--site-key', site.siteKey, '--port', String(pagePort)], {
    env: { ...process.env, SLUICE_RELAY_PORT: String(app.relay!.port), SLUICE_DATA_DIR: app.dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let said = '';
  examplePage.stdout!.on('data', (chunk: Buffer) => (said += chunk.toString()));
  examplePage.stderr!.on('data', (chunk: Buffer) => (said += chunk.toString()));
  await eventually(() => said.includes('Ctrl-C stops it'), 30_000, 100).catch((err) => {
    throw new Error(`sluice relay example-page did not start:\n${said}`, { cause: err });
  });
  expect(said).toContain(`${pageOrigin}/`);
  expect(said).toContain(`the site must allow the origin ${pageOrigin}`);
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  if (examplePage && examplePage.exitCode === null) {
    examplePage.kill('SIGTERM');
    await new Promise((resolve) => examplePage!.once('exit', resolve));
  }
  await app?.stop();
});

describe('the example page and the Inbox page', () => {
  it('sends the form from the example page; the console shows what delivery kept, the HTML part sandboxed', async () => {
    const visitor = await newTab();
    const visitorSeen = watchPage(visitor);
    await visitor.goto(`${pageOrigin}/`);
    await visitor.fill('input[name="name"]', 'Ann Example');
    await visitor.fill('input[name="email"]', 'ann@example.com');
    await visitor.fill('textarea[name="message"]', `Hello ${MARKUP}`);
    await visitor.screenshot({ path: `${SCREENSHOTS}relay-example-page.png` });
    await visitor.click('button[type="submit"]');
    await expect.poll(() => visitor.textContent('#contact-status'), { timeout: 20_000 }).toBe('Thank you, your message was sent.');
    expect(visitorSeen.complaints).toEqual([]);
    expect(await accessibilityProblems(visitor)).toEqual([]);

    const owner = await newTab();
    const seen = watchPage(owner);
    let dialogs = 0;
    owner.on('dialog', (dialog) => {
      dialogs++;
      void dialog.dismiss();
    });
    await signIn(owner, 'owner@acme.example');
    await owner.getByTestId('nav-inbox').click();
    const messages = owner.getByTestId('inbox-message');
    // Delivery runs a moment after the 201: the page is reloaded until both are there.
    await eventually(async () => (await messages.count()) === 2 || (await owner.getByTestId('inbox-reload').click(), false), 20_000, 500);
    const channels = await owner.getByTestId('inbox-channel').allTextContents();
    expect(channels.sort()).toEqual(['Email', 'WhatsApp']);
    const email = messages.filter({ has: owner.getByTestId('inbox-channel').getByText('Email', { exact: true }) });
    expect(await email.getByTestId('inbox-destination').textContent()).toBe('sales@acme.example');
    expect(await email.getByTestId('inbox-subject').textContent()).toBe('New submission: name, email, message');
    expect(await email.getByTestId('inbox-time').textContent()).toMatch(/ago|now/);
    // The text part as text: the visitor's markup is shown, not made.
    expect(await email.getByTestId('inbox-text').textContent()).toContain(`message: Hello ${MARKUP}`);
    expect(await owner.locator('main img').count()).toBe(0);
    expect(await owner.title()).toBe('Inbox · Sluice');
    await email.scrollIntoViewIfNeeded();
    await owner.screenshot({ path: `${SCREENSHOTS}console-inbox.png` });
    expect(await accessibilityProblems(owner)).toEqual([]);

    // Opened, the HTML part is a frame that runs no script and shares no origin with the console.
    await email.getByTestId('inbox-html-toggle').click();
    const frame = email.getByTestId('inbox-html');
    expect(await frame.getAttribute('sandbox')).toBe('');
    const inside = (await (await frame.elementHandle())!.contentFrame())!;
    await expect.poll(() => inside.textContent('body'), { timeout: 10_000 }).toContain('Ann Example');
    // Escaped by the template: an image tag the visitor typed is text in the HTML part as well.
    expect(await inside.locator('img').count()).toBe(0);
    expect(await inside.textContent('body')).toContain(MARKUP);
    await frame.scrollIntoViewIfNeeded();
    await owner.screenshot({ path: `${SCREENSHOTS}console-inbox-html.png` });
    expect(dialogs).toBe(0);
    expect(await owner.title()).toBe('Inbox · Sluice');
    const origin = new URL(app.console!.url).origin;
    expect(seen.requests.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith('about:'))).toEqual([]);
    expect(seen.complaints.filter((line) => !line.includes('status of 401'))).toEqual([]);

    // The API the page read is the tenant's, the same as the relay's admin API shows it.
    const listed = await app.relay!.admin.inbox.list(tenantId, {});
    expect(listed.messages.map((message: InboxMessage) => message.channel).sort()).toEqual(['email', 'whatsapp']);
  });

  it("shows another tenant's user an empty Inbox", async () => {
    const other = await newTab();
    await signIn(other, 'bob@other.example');
    await other.getByTestId('nav-inbox').click();
    await other.getByTestId('inbox-empty').waitFor({ timeout: 15_000 });
    expect(await other.getByTestId('inbox-message').count()).toBe(0);
    await other.screenshot({ path: `${SCREENSHOTS}console-inbox-empty.png` });
    expect(await accessibilityProblems(other)).toEqual([]);
  });
});
