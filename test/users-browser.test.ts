/**
 * Users in the console, in Debian's Chromium (playwright-core) against a whole `sluice serve`:
 * the owner invites an admin on the Users page and copies the link shown once; in another
 * browser the invited person opens it, sees what it is for, chooses a name and a password and is
 * signed in, once (the link opened again says it is spent). The admin can change a member but
 * is shown no control over the owner; a member is shown none at all. The owner deactivates the
 * member, whose open page goes to sign-in. On the account page a new password needs the current
 * one, and "Sign out everywhere" ends the session. Every page shot passes axe's WCAG 2.1 A/AA rules.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { accessibilityProblems, launchChromium, SCREENSHOTS, watchPage } from './browser.ts';
import { ConsoleClient } from './console-client.ts';
import { startTestSluice, type TestSluice } from './harness.ts';

const OWNER = { name: 'Ada', email: 'ada@people.test', password: 'correct horse battery staple' };
const PASSWORD = 'a long password for tests';

let app: TestSluice;
let browser: Browser;
let page: Page;
let seen: ReturnType<typeof watchPage>;
const contexts: BrowserContext[] = [];
const accessibility = new Map<string, string[]>();

async function shot(name: string, on: Page = page): Promise<void> {
  await on.screenshot({ path: `${SCREENSHOTS}console-${name}.png` });
  accessibility.set(name, await accessibilityProblems(on));
}

/**
 * A browser of its own, as each person here has: its own address too (X-Forwarded-For from the
 * loopback proxy the server trusts), or the dozen sign-ins, invitation look-ups and accepts of
 * this file from one address would meet the per-address sign-in limit (10 a minute) whenever the
 * file runs in under about 15 s.
 */
async function newTab(): Promise<Page> {
  const address = `198.51.100.${contexts.length + 1}`;
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 }, baseURL: app.console!.url, extraHTTPHeaders: { 'X-Forwarded-For': address } });
  contexts.push(context);
  return context.newPage();
}

async function signedInTab(email: string, password = PASSWORD): Promise<Page> {
  const tab = await newTab();
  await tab.goto('/sign-in');
  await tab.getByTestId('sign-in-email').fill(email);
  await tab.getByTestId('sign-in-password').fill(password);
  await tab.getByTestId('sign-in-submit').click();
  await tab.getByTestId('nav-user').waitFor({ timeout: 15_000 });
  return tab;
}

/** Invites through the page: the link the callout shows once. */
async function inviteOnPage(on: Page, email: string, role: string): Promise<string> {
  await on.getByTestId('invite-email').fill(email);
  await on.getByTestId('invite-role').selectOption(role);
  await on.getByTestId('invite-submit').click();
  const link = (await on.getByTestId('invitation-url').textContent({ timeout: 15_000 }))!.trim();
  await on.getByTestId('callout-close').click();
  return link;
}

beforeAll(async () => {
  app = await startTestSluice({ 'console.enabled': true, 'console.port': 0, 'limits.trustedProxies': ['127.0.0.1'] });
  await new ConsoleClient(app.console!.url).firstRun(app.console!.firstRunLink!, OWNER);
  browser = await launchChromium();
  page = await signedInTab(OWNER.email, OWNER.password);
  seen = watchPage(page);
}, 90_000);
afterEach(async (context) => {
  if (context.task.result?.state === 'fail') await page?.screenshot({ path: `${SCREENSHOTS}console-users-failed.png` }).catch(() => {});
});
afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => {});
  await browser?.close();
  await app?.stop();
});

describe('users, as the owner and the people they invite', () => {
  let adminLink = '';

  it('the owner invites an admin; the link is shown once', async () => {
    await page.getByTestId('nav-users').click();
    await page.getByTestId('users-table').waitFor();
    await page.getByTestId('invite-email').fill('grace@people.test');
    await page.getByTestId('invite-role').selectOption('admin');
    await page.getByTestId('invite-submit').click();
    adminLink = (await page.getByTestId('invitation-url').textContent({ timeout: 15_000 }))!.trim();
    expect(adminLink).toMatch(/\/invite#token=inv_/);
    await expect.poll(() => page.getByTestId('invitation-row').allTextContents()).toEqual([expect.stringContaining('grace@people.test')]);
    await shot('users-invited');
    await page.getByTestId('callout-close').click();
  });

  it('the invited person joins with the link, once', async () => {
    const tab = await newTab();
    await tab.goto(adminLink);
    expect(await tab.getByTestId('invite-offer').textContent({ timeout: 15_000 })).toBe('You are invited as an admin, with the email grace@people.test.');
    await shot('invite', tab);
    await tab.getByTestId('invite-name').fill('Grace');
    await tab.getByTestId('invite-password').fill(PASSWORD);
    await tab.getByTestId('invite-accept').click();
    expect(await tab.getByTestId('nav-user').textContent({ timeout: 15_000 })).toBe('Grace');
    // The link again, in a browser of its own: spent.
    const late = await newTab();
    await late.goto(adminLink);
    await late.getByTestId('invite-invalid').waitFor({ timeout: 15_000 });
    await shot('invite-spent', late);
  });

  it('an admin changes a member, and is shown no control over the owner; a member none at all', async () => {
    const admin = await signedInTab('grace@people.test');
    await admin.getByTestId('nav-users').click();
    await admin.getByTestId('users-table').waitFor();
    const memberLink = await inviteOnPage(admin, 'dennis@people.test', 'member');
    expect(await admin.getByTestId('invite-role').locator('option').allTextContents()).toEqual(['Member', 'Admin']);
    const joining = await newTab();
    await joining.goto(memberLink);
    await joining.getByTestId('invite-name').fill('Dennis');
    await joining.getByTestId('invite-password').fill(PASSWORD);
    await joining.getByTestId('invite-accept').click();
    await joining.getByTestId('nav-user').waitFor({ timeout: 15_000 });

    await admin.reload();
    const ownerRow = admin.getByTestId('user-row').filter({ hasText: OWNER.email });
    const memberRow = admin.getByTestId('user-row').filter({ hasText: 'dennis@people.test' });
    await memberRow.waitFor({ timeout: 15_000 });
    expect(await ownerRow.getByTestId('user-role').count()).toBe(0);
    expect(await ownerRow.getByTestId('user-active').count()).toBe(0);
    expect(await memberRow.getByTestId('user-role').count()).toBe(1);
    await shot('users-as-admin', admin);

    await joining.getByTestId('nav-users').click();
    await joining.getByTestId('users-table').waitFor();
    expect(await joining.getByTestId('read-only').count()).toBe(1);
    expect(await joining.getByTestId('invite-form').count()).toBe(0);
    expect(await joining.getByTestId('user-role').count()).toBe(0);
    expect(await joining.getByTestId('user-active').count()).toBe(0);
    await shot('users-as-member', joining);

    // The owner deactivates the member: the member's open page goes to sign-in at its next call.
    await page.reload();
    const row = page.getByTestId('user-row').filter({ hasText: 'dennis@people.test' });
    await row.getByTestId('user-active').click();
    await expect.poll(() => row.textContent(), { timeout: 15_000 }).toContain('Deactivated');
    await shot('users');
    await joining.getByTestId('nav-logs').click();
    await joining.getByTestId('sign-in-form').waitFor({ timeout: 15_000 });
  });

  it('the account page changes the password with the current one, and signs out everywhere', async () => {
    const tab = await signedInTab('grace@people.test');
    const other = await signedInTab('grace@people.test');
    await tab.getByTestId('nav-user').click();
    await tab.getByTestId('password-form').waitFor();
    await tab.getByTestId('password-current').fill('not my password at all');
    await tab.getByTestId('password-new').fill('a newer long password');
    await tab.getByTestId('password-submit').click();
    expect(await tab.getByTestId('account-error').textContent({ timeout: 15_000 })).toBe('The current password is wrong');
    await tab.getByTestId('password-current').fill(PASSWORD);
    await tab.getByTestId('password-submit').click();
    await tab.getByTestId('account-done').waitFor({ timeout: 15_000 });
    await shot('account', tab);
    // The other session ended; this one goes on until it signs out everywhere.
    await other.getByTestId('nav-logs').click();
    await other.getByTestId('sign-in-form').waitFor({ timeout: 15_000 });
    await tab.getByTestId('sign-out-everywhere').click();
    await tab.getByTestId('sign-in-form').waitFor({ timeout: 15_000 });
    expect((await signedInTab('grace@people.test', 'a newer long password')).url()).not.toContain('/sign-in');
  });

  it('works by keyboard alone: the skip link, the nav, and an invitation made without the mouse', async () => {
    const tab = await signedInTab(OWNER.email, OWNER.password);
    const focused = () => tab.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.testid ?? document.activeElement?.textContent ?? '');
    const tabTo = async (testid: string) => {
      for (let presses = 0; presses < 40 && (await focused()) !== testid; presses++) await tab.keyboard.press('Tab');
      expect(await focused()).toBe(testid);
    };
    await tab.keyboard.press('Tab');
    expect(await focused()).toBe('Skip to the page');
    await tabTo('nav-users');
    await tab.keyboard.press('Enter');
    await tab.getByTestId('users-table').waitFor({ timeout: 15_000 });
    await tabTo('invite-email');
    await tab.keyboard.type('keys@people.test');
    await tab.keyboard.press('Tab');
    expect(await focused()).toBe('invite-role');
    await tab.keyboard.press('ArrowDown');
    await tabTo('invite-submit');
    await tab.keyboard.press('Enter');
    const link = (await tab.getByTestId('invitation-url').textContent({ timeout: 15_000 }))!;
    expect(link).toMatch(/\/invite#token=inv_/);
    expect(await tab.getByTestId('invitation-row').filter({ hasText: 'keys@people.test' }).textContent()).toContain('Admin');
  });

  it('logs no error in the browser, and every page shot meets WCAG 2.1 A and AA as axe-core checks it', () => {
    expect(seen.complaints.filter((line) => !line.includes('401'))).toEqual([]);
    expect([...accessibility].filter(([, problems]) => problems.length > 0)).toEqual([]);
  });
});
