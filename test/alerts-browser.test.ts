/**
 * The Alerts page in Debian's Chromium (playwright-core) against a whole `sluice serve` that
 * evaluates every 5 s and delivers to an SMTP server of the test's own: the owner makes a rule
 * through the form (a refusal of the API said beside it first), spans that cross it make the
 * page show it firing while the mail "[FIRING] …" arrives; the rule's page shows the change in
 * its history; a silence made on the page holds the resolve back, marked "silenced" in the
 * history, and ends with "End now"; the rule is disabled and enabled again, and deleted after a
 * confirmation. A member reads it all and is shown no control. Screenshots go to test-output/;
 * every page shot must pass axe's WCAG 2.1 A/AA rules.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { OWNER, sendSpans, startAlertingSluice, subjectsAbout, type AlertingSluice } from './alerting.ts';
import { accessibilityProblems, launchChromium, SCREENSHOTS, watchPage } from './browser.ts';
import { eventually } from './harness.ts';

/** Rounds are 5 s apart, the page reads again every 10 s: a few rounds and a delivery on a loaded machine. */
const WAIT_MS = 60_000;
const RULE = 'Checkout failing';

let alerting: AlertingSluice;
let browser: Browser;
let page: Page;
let seen: ReturnType<typeof watchPage>;
const contexts: BrowserContext[] = [];
/** What axe found on each page shot, by the shot's name. */
const accessibility = new Map<string, string[]>();

async function shot(name: string, on: Page = page, fullPage = false): Promise<void> {
  await on.screenshot({ path: `${SCREENSHOTS}console-${name}.png`, fullPage });
  accessibility.set(name, await accessibilityProblems(on));
}

async function signedInTab(email: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 }, baseURL: alerting.app.console!.url });
  contexts.push(context);
  const tab = await context.newPage();
  await tab.goto('/sign-in');
  await tab.getByTestId('sign-in-email').fill(email);
  await tab.getByTestId('sign-in-password').fill(OWNER.password);
  await tab.getByTestId('sign-in-submit').click();
  await tab.getByTestId('nav-user').waitFor({ timeout: 15_000 });
  return tab;
}

const ruleRow = (on: Page = page) => on.locator(`[data-testid="rule-row"][data-rule="${RULE}"]`);
/** Until `check` holds, pressing the page's Refresh between looks (the page also reads again every 10 s by itself). */
async function untilShown(check: () => Promise<boolean>): Promise<void> {
  await eventually(async () => (await check()) || (await page.getByTestId('alerts-refresh').click(), false), WAIT_MS, 1000);
}

beforeAll(async () => {
  alerting = await startAlertingSluice();
  // Another service's spans, so the form has a service of the last day to offer.
  await sendSpans(alerting.app, 'payment', 5, 0);
  // A 200 means queued, not stored; the form reads the services once, when it opens.
  await eventually(async () => {
    const { services } = await alerting.owner.json<{ services: string[] }>('/api/query/services', { method: 'POST', body: { from: Date.now() - 86_400_000, to: Date.now() } });
    return services.includes('payment');
  }, 60_000, 250);
  browser = await launchChromium();
  page = await signedInTab(OWNER.email);
  seen = watchPage(page);
}, 90_000);
// A failed step leaves a picture of what the page showed.
afterEach(async ({ task }) => {
  if (task.result?.state === 'fail' && page) await page.screenshot({ path: `${SCREENSHOTS}console-alerts-failed-${task.name.slice(0, 40).replace(/\W+/g, '-')}.png`, fullPage: true });
});
afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  await alerting?.stop();
});

describe('the Alerts page, as an owner uses it', () => {
  it('makes a rule through the form: a refusal is said beside it in the form\'s words, and the rule is listed', async () => {
    await page.getByTestId('nav-alerts').click();
    await page.getByTestId('rules-empty').waitFor({ timeout: 15_000 });
    expect(await page.title()).toBe('Alerts · Sluice');
    await page.getByTestId('rule-new').click();
    const form = page.getByTestId('rule-form');
    await form.waitFor();
    // The services of the last day are offered; the contact points are the tenant's forms.
    await expect.poll(() => page.locator('#rule-services option').evaluateAll((options) => options.map((one) => (one as HTMLOptionElement).value)), { timeout: 15_000 }).toContain('payment');
    await expect.poll(() => page.getByTestId('rule-notify').locator('option').allTextContents()).toEqual(['none', 'ops / On call']);

    // Each kind asks for what it needs.
    await page.getByTestId('rule-kind').selectOption({ label: 'Metric' });
    await page.getByTestId('rule-metric').fill('queue.depth');
    expect(await page.getByTestId('rule-aggregation').locator('option').allTextContents()).toEqual(['avg', 'min', 'max', 'sum', 'count']);
    await page.getByTestId('rule-metric-kind').selectOption('histogram');
    expect(await page.getByTestId('rule-aggregation').inputValue()).toBe('p95');
    await shot('alerts-rule-metric', page, true);
    await page.getByTestId('rule-kind').selectOption({ label: 'Log count' });
    expect(await page.getByTestId('rule-service').count()).toBe(0);
    await page.getByTestId('rule-log-text').waitFor();
    await page.getByTestId('rule-kind').selectOption({ label: 'Latency' });
    expect(await page.getByTestId('rule-percentile').inputValue()).toBe('95');
    await page.getByTestId('rule-kind').selectOption({ label: 'Error rate' });

    await page.getByTestId('rule-name').fill(RULE);
    await page.getByTestId('rule-service').fill('x'.repeat(1100));
    await page.getByTestId('rule-threshold').fill('0.5');
    await page.getByTestId('rule-submit').click();
    const refusal = page.getByTestId('rule-refusal');
    await expect.poll(() => refusal.textContent(), { timeout: 15_000 }).toBe('Service: must NOT have more than 1024 characters');
    expect(await page.getByTestId('rule-service').getAttribute('aria-invalid')).toBe('true');
    await shot('alerts-rule-refused');

    await page.getByTestId('rule-service').fill('checkout');
    // Corrected, the field is no longer marked, and the refusal is gone.
    expect(await page.getByTestId('rule-service').getAttribute('aria-invalid')).toBe(null);
    expect(await refusal.count()).toBe(0);
    await page.getByTestId('rule-window').selectOption({ label: '5 min' });
    await page.getByTestId('rule-for').selectOption('0');
    await page.getByTestId('rule-notify').selectOption({ label: 'ops / On call' });
    await page.getByTestId('rule-labels').fill('team=payments, severity=page');
    await shot('alerts-new-rule', page, true);
    await page.getByTestId('rule-submit').click();
    await page.getByTestId('rule-created').waitFor({ timeout: 15_000 });
    expect(await page.getByTestId('rule-form').count()).toBe(0);
    expect(await ruleRow().getByTestId('rule-condition').textContent()).toBe('error rate of checkout above 0.5 over 5 min');
    expect(await ruleRow().textContent()).toContain('ops / On call');
    const { rules } = await alerting.owner.json<{ rules: Array<{ rule: any }> }>('/api/alerts/rules');
    expect(rules.map(({ rule }) => rule)).toEqual([expect.objectContaining({
      name: RULE, condition: { kind: 'error_rate', service: 'checkout' }, comparator: 'above', threshold: 0.5, windowSeconds: 300, forSeconds: 0,
      labels: { team: 'payments', severity: 'page' }, notify: alerting.contactPoint, repeatSeconds: 0, enabled: true,
    })]);
  });

  it('shows the rule firing, in words and colour, once spans cross it, while the mail "[FIRING] …" arrives', async () => {
    await sendSpans(alerting.app, 'checkout', 10, 8);
    const state = ruleRow().getByTestId('rule-state');
    await untilShown(async () => (await state.getAttribute('data-state')) === 'firing' && subjectsAbout(alerting.smtp, RULE).length > 0);
    expect(await state.textContent()).toBe('Firing');
    expect(subjectsAbout(alerting.smtp, RULE)).toEqual([`[FIRING] ${RULE}`]);
    expect(await ruleRow().getByTestId('rule-value').textContent()).toBe('0.8 (80 %)');
    expect(await page.getByTestId('rule-counts').textContent()).toBe('1 rule: 1 firing, 0 pending, 0 OK');
    await shot('alerts');
  });

  it("opens the rule: its definition, its state, and the change in its history", async () => {
    await ruleRow().getByTestId('rule-link').click();
    await page.getByTestId('rule-title').waitFor({ timeout: 15_000 });
    expect(await page.title()).toBe(`${RULE} · Sluice`);
    expect(await page.getByTestId('rule-definition').textContent()).toContain('error rate of checkout above 0.5 over 5 min');
    expect(await page.getByTestId('rule-status-state').textContent()).toBe('Firing');
    const row = page.getByTestId('history-row');
    expect(await row.count()).toBe(1);
    expect(await row.getByTestId('history-from').textContent()).toBe('OK');
    expect(await row.getByTestId('history-to').textContent()).toBe('Firing');
    expect(await row.textContent()).toContain('0.8 (80 %)');
    expect(await row.textContent()).toContain('handed over');
    // Its last evaluations as a chart: the value, the threshold, and where it fired.
    await page.getByTestId('rule-chart').waitFor({ timeout: WAIT_MS });
    expect(await page.locator('[data-testid="rule-chart"] .u-legend').textContent()).toMatch(/value.*threshold \(above\).*firing/);
    // Edit opens the form with the rule's own values; Cancel leaves it as it was.
    await page.getByTestId('rule-edit').click();
    expect(await page.getByTestId('rule-service').inputValue()).toBe('checkout');
    expect(await page.getByTestId('rule-window').inputValue()).toBe('300');
    await page.getByTestId('rule-cancel').click();
    await shot('alert-rule', page, true);
  });

  it('makes a silence on the page; on a rule and on labels; the resolve they hold back is marked "silenced" in the history, and "End now" ends each', async () => {
    await page.getByTestId('nav-alerts').click();
    await page.getByTestId('silence-new').click();
    expect(await page.getByTestId('silence-rule').locator('option:checked').textContent()).toBe(RULE);
    await page.getByTestId('silence-duration').selectOption({ label: '4 h' });
    await page.getByTestId('silence-comment').fill('deploy window');
    await shot('alerts-new-silence');
    await page.getByTestId('silence-submit').click();
    const silence = page.getByTestId('silence-row').filter({ hasText: 'deploy window' });
    await silence.waitFor({ timeout: 15_000 });
    expect(await silence.textContent()).toContain(`rule ${RULE}`);
    expect(await silence.textContent()).toContain('in 4 h');
    expect(await silence.getByTestId('silence-comment-text').textContent()).toBe('deploy window');
    expect(await silence.textContent()).toContain(OWNER.email);
    // One on labels too: every rule carrying team=payments.
    await page.getByTestId('silence-new').click();
    await page.getByTestId('silence-by-labels').check();
    await page.getByTestId('silence-labels').fill('team=payments');
    await page.getByTestId('silence-comment').fill('payments freeze');
    await page.getByTestId('silence-submit').click();
    const byLabels = page.getByTestId('silence-row').filter({ hasText: 'payments freeze' });
    await byLabels.waitFor({ timeout: 15_000 });
    expect(await byLabels.textContent()).toContain('labels team=payments');
    expect(await byLabels.textContent()).toContain('in 1 h');
    await shot('alerts-silence', page, true);

    // 8 errors in 50 spans: under the threshold; the resolve is held back.
    await sendSpans(alerting.app, 'checkout', 40, 0);
    await ruleRow().getByTestId('rule-link').click();
    const resolved = page.locator('[data-testid="history-row"][data-kind="resolved"]');
    await eventually(async () => (await resolved.count()) > 0 || (await page.reload(), false), WAIT_MS, 1000);
    expect(await resolved.getByTestId('history-silenced').textContent()).toBe('silenced');
    expect(await page.getByTestId('rule-status-state').textContent()).toBe('OK');
    await shot('alert-rule-silenced', page, true);
    expect(subjectsAbout(alerting.smtp, RULE)).toEqual([`[FIRING] ${RULE}`]);

    await page.getByTestId('nav-alerts').click();
    await page.getByTestId('silence-row').nth(1).waitFor({ timeout: 15_000 });
    await page.getByTestId('silence-row').filter({ hasText: 'payments freeze' }).getByTestId('silence-end').click();
    await expect.poll(() => page.getByTestId('silence-row').count(), { timeout: 15_000 }).toBe(1);
    await page.getByTestId('silence-end').click();
    await page.getByTestId('silences-empty').waitFor({ timeout: 15_000 });
    expect((await alerting.owner.json<{ silences: unknown[] }>('/api/alerts/silences')).silences).toEqual([]);
  });

  it('disables and enables the rule again with the same fields', async () => {
    await ruleRow().getByTestId('rule-link').click();
    await page.getByTestId('rule-toggle').click();
    await expect.poll(() => page.getByTestId('rule-toggle').textContent(), { timeout: 15_000 }).toBe('Enable');
    const disabled = await alerting.owner.json<{ rule: any }>(`/api/alerts/rules/${new URL(page.url()).pathname.split('/').pop()}`);
    expect(disabled.rule).toMatchObject({ enabled: false, threshold: 0.5, windowSeconds: 300, labels: { team: 'payments', severity: 'page' }, notify: alerting.contactPoint });
    await page.getByTestId('rule-toggle').click();
    await expect.poll(() => page.getByTestId('rule-toggle').textContent(), { timeout: 15_000 }).toBe('Disable');
  });
});

describe('a member of the tenant', () => {
  it('reads the rules, the rule and the silences, and is shown no control the API would refuse', async () => {
    const email = 'mo@example.com';
    await alerting.app.relay!.admin.users.create({ tenantId: 'ten_default', role: 'owner' }, { email, name: 'Mo', role: 'member', password: OWNER.password });
    const member = await signedInTab(email);
    await member.getByTestId('nav-alerts').click();
    await ruleRow(member).waitFor({ timeout: 15_000 });
    await member.getByTestId('read-only').waitFor();
    await member.getByTestId('silences-empty').waitFor({ timeout: 15_000 });
    for (const control of ['rule-new', 'rule-form', 'silence-new', 'silence-end']) expect(await member.getByTestId(control).count(), control).toBe(0);
    await shot('alerts-member', member);
    await ruleRow(member).getByTestId('rule-link').click();
    await member.getByTestId('history-table').waitFor({ timeout: 15_000 });
    for (const control of ['rule-edit', 'rule-toggle', 'rule-delete']) expect(await member.getByTestId(control).count(), control).toBe(0);
  });
});

describe('deleting a rule', () => {
  it('asks first: dismissed, the rule stays; accepted, it is gone', async () => {
    await page.getByTestId('nav-alerts').click();
    await ruleRow().getByTestId('rule-link').click();
    const asked: string[] = [];
    page.once('dialog', (dialog) => void (asked.push(dialog.message()), dialog.dismiss()));
    await page.getByTestId('rule-delete').click();
    await expect.poll(() => asked).toEqual([`Delete the alert rule “${RULE}”? Its state and history go with it.`]);
    expect(await page.getByTestId('rule-title').count()).toBe(1);
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByTestId('rule-delete').click();
    await page.getByTestId('rules-empty').waitFor({ timeout: 15_000 });
    expect(new URL(page.url()).pathname).toBe('/alerts');
    expect((await alerting.owner.json<{ rules: unknown[] }>('/api/alerts/rules')).rules).toEqual([]);
  });
});

describe('the pages', () => {
  it('meet WCAG 2.1 A and AA as axe-core checks them, load nothing from elsewhere and log no error', () => {
    expect([...accessibility.keys()].sort()).toEqual(['alert-rule', 'alert-rule-silenced', 'alerts', 'alerts-member', 'alerts-new-rule', 'alerts-new-silence', 'alerts-rule-metric', 'alerts-rule-refused', 'alerts-silence']);
    expect(Object.fromEntries([...accessibility].filter(([, problems]) => problems.length > 0))).toEqual({});
    const origin = new URL(alerting.app.console!.url).origin;
    expect(seen.requests.filter((url) => !url.startsWith(`${origin}/`))).toEqual([]);
    // The refused rule is a 400 Chromium logs as it comes.
    expect(seen.complaints.filter((line) => !line.includes('status of 400'))).toEqual([]);
  });
});
