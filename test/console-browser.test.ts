/**
 * The web console in a real browser (Debian's Chromium, playwright-core) against a whole
 * `sluice serve`: the first owner signs in with the one-time link, creates a source, sends
 * traces, logs and metrics with the official OpenTelemetry exporters and a deploy marker with
 * curl, and finds each in its page, the marker drawn on the metric's chart; a second tenant's
 * user sees none of it; sign-out ends the session. Screenshots of every page go to test-output/.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { context, trace, TraceFlags } from '@opentelemetry/api';
import { SeverityNumber } from '@opentelemetry/api-logs';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { AggregationType, MeterProvider } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LogPage, TraceSummary } from '../console/api.ts';
import { accessibilityProblems, launchChromium, SCREENSHOTS, watchPage } from './browser.ts';
import { ConsoleClient } from './console-client.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { exportOnce, exporterFor, ManualReader, type Target } from './otel-clients.ts';
import { sendDemo } from '../bin/demo.ts';
import { seededRandom } from './seeded-random.ts';

const run = promisify(execFile);
const PASSWORD = 'correct horse battery staple';
let app: TestSluice;
let browser: Browser;
let page: Page;
let seen: ReturnType<typeof watchPage>;
let apiKey = '';

const consoleUrl = (path: string) => app.console!.url + path;
/** What axe found on each page shot, by the shot's name. */
const accessibility = new Map<string, string[]>();
/** A screenshot of the page as it is, and what axe finds on it. */
async function shot(name: string, on: Page = page): Promise<void> {
  await on.screenshot({ path: `${SCREENSHOTS}console-${name}.png` });
  accessibility.set(name, await accessibilityProblems(on));
}
const byTestId = (id: string) => page.getByTestId(id);

/**
 * Drags across a chart's plot (uPlot's `.u-over`) from one fraction of its width to another, in
 * ten moves. The events are made in the page: uPlot ignores a move without movement (a guard
 * against phantom drags), and the moves CDP sends carry none at times.
 */
async function dragAcross(over: Locator, from: number, to: number): Promise<void> {
  await over.waitFor({ timeout: 15_000 });
  await over.evaluate((element, [start, end]) => {
    const box = element.getBoundingClientRect();
    const x = (fraction: number) => box.left + fraction * (box.width - 1);
    const send = (type: string, target: EventTarget, fraction: number, movementX: number) =>
      target.dispatchEvent(new MouseEvent(type, { clientX: x(fraction), clientY: box.top + box.height / 2, movementX, bubbles: true, button: 0, buttons: type === 'mouseup' ? 0 : 1 }));
    send('mousedown', element, start, 0);
    for (let step = 1; step <= 10; step++) send('mousemove', element, start + ((end - start) * step) / 10, ((end - start) * box.width) / 10);
    send('mouseup', document, end, 0);
  }, [from, to]);
}

/** A checkout trace of three services, the payment span failed; its trace id. */
async function sendTraces(target: Target): Promise<string> {
  const memory = new InMemorySpanExporter();
  const provider = (service: string) => new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': service }), spanProcessors: [new SimpleSpanProcessor(memory)] });
  const frontend = provider('frontend').getTracer('shop');
  const payment = provider('payment').getTracer('shop');
  const root = frontend.startSpan('POST /checkout', { attributes: { 'http.route': '/checkout' } });
  const inRoot = trace.setSpan(context.active(), root);
  const charge = payment.startSpan('payment.Charge', { attributes: { 'card.kind': 'visa' } }, inRoot);
  charge.addEvent('card declined', { code: 51 });
  charge.setStatus({ code: 2, message: 'card declined' });
  charge.end();
  provider('inventory').getTracer('shop').startSpan('inventory.Reserve', {}, inRoot).end();
  root.end();
  const result = await exportOnce(exporterFor('traces', 'http/protobuf', target), memory.getFinishedSpans());
  expect(result.code).toBe(0);
  return root.spanContext().traceId;
}

/** An error log inside the trace's root span. */
async function sendLogs(target: Target, traceId: string): Promise<void> {
  const memory = new InMemoryLogRecordExporter();
  const provider = new LoggerProvider({ resource: resourceFromAttributes({ 'service.name': 'payment' }), processors: [new SimpleLogRecordProcessor({ exporter: memory })] });
  const spanContext = { traceId, spanId: '00f067aa0ba902b7', traceFlags: TraceFlags.SAMPLED };
  provider.getLogger('shop').emit({
    severityNumber: SeverityNumber.ERROR, severityText: 'ERROR', body: 'payment declined: card 4242 over its limit',
    attributes: { 'order.id': 'o-1001' }, context: trace.setSpanContext(context.active(), spanContext),
  });
  const result = await exportOnce(exporterFor('logs', 'http/protobuf', target), memory.getFinishedLogRecords());
  expect(result.code).toBe(0);
}

/** A duration histogram and an order counter of the payment service. */
async function sendMetrics(target: Target): Promise<void> {
  const reader = new ManualReader();
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ 'service.name': 'payment' }),
    readers: [reader],
    views: [{ instrumentName: 'http.server.duration', aggregation: { type: AggregationType.EXPLICIT_BUCKET_HISTOGRAM, options: { boundaries: [10, 50, 100, 500] } } }],
  });
  const meter = provider.getMeter('shop');
  const duration = meter.createHistogram('http.server.duration', { unit: 'ms', description: 'Duration of HTTP server requests' });
  for (const value of [8, 40, 45, 90, 300, 420]) duration.record(value, { 'http.route': '/charge' });
  meter.createCounter('orders.placed').add(12, { 'http.route': '/charge' });
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  const result = await exportOnce(exporterFor('metrics', 'http/protobuf', target), resourceMetrics);
  expect(result.code).toBe(0);
}

beforeAll(async () => {
  app = await startTestSluice({ 'console.enabled': true, 'console.port': 0 });
  await app.relay!.admin.tenants.onboard({ name: 'Other Co', owner: { email: 'bob@other.example', password: PASSWORD } });
  browser = await launchChromium();
  const tab = await browser.newContext({ viewport: { width: 1366, height: 768 }, baseURL: app.console!.url });
  page = await tab.newPage();
  seen = watchPage(page);
}, 60_000);
// A failed step leaves a picture of what the page showed.
afterEach(async ({ task }) => {
  if (task.result?.state === 'fail' && page) await shot(`failed-${task.name.slice(0, 40).replace(/\W+/g, '-')}`);
});
afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

describe('the console, as its first owner uses it', () => {
  it('signs in with the one-time link the server printed', async () => {
    await page.goto(app.console!.firstRunLink!);
    await byTestId('first-run-name').fill('Ada Lovelace');
    await byTestId('first-run-email').fill('ada@example.com');
    await byTestId('first-run-password').fill(PASSWORD);
    await shot('first-run');
    await byTestId('first-run-submit').click();
    await expect.poll(() => byTestId('nav-user').textContent(), { timeout: 15_000 }).toContain('Ada');
    // The development inbox is off (SLUICE_DELIVERY_INBOX): no Inbox page in the nav.
    expect(await byTestId('nav-inbox').count()).toBe(0);
    await byTestId('nav-sources').click();
    await byTestId('sources-table').or(byTestId('sources-empty')).first().waitFor();
  });

  it('creates a source; the key is shown once, and an install command is ready', async () => {
    await byTestId('source-name').fill('shop');
    await byTestId('source-create').click();
    apiKey = (await byTestId('api-key').textContent({ timeout: 15_000 }))!.trim();
    expect(apiKey).toMatch(/^slk_/);
    await shot('sources-key');
    const shopRow = byTestId('source-row').filter({ hasText: 'shop' });
    await shopRow.getByTestId('install-token-create').click();
    expect(await byTestId('install-command').textContent({ timeout: 15_000 })).toMatch(/^curl -fsS http:\/\/localhost:\d+\/install\/\S+ \| kubectl apply -f -$/);
    await shot('sources');
  });

  it('shows the traces, logs and metrics the official exporters sent, and the deploy marker on the chart', async () => {
    const target: Target = { baseUrl: app.baseUrl, grpcAddress: app.grpcAddress, apiKey };
    const traceId = await sendTraces(target);
    await sendLogs(target, traceId);
    await sendMetrics(target);
    await run('curl', ['-fsS', `${app.baseUrl}/api/v1/webhooks/deploy`, '-H', `X-API-Key: ${apiKey}`, '-H', 'Content-Type: application/json',
      '-d', JSON.stringify({ service: 'payment', version: '1.9.2', commit: '9f1c2e7', deployedBy: 'ci', timestamp: new Date(Date.now() - 60_000).toISOString() })]);

    await byTestId('nav-logs').click();
    const logRow = byTestId('log-row').filter({ hasText: 'payment declined' });
    await eventually(async () => (await logRow.count()) > 0 || (await byTestId('logs-search').click(), false), 20_000, 500);
    // The volume chart and the facets sum up what matches; a facet's value filters by it.
    await byTestId('logs-volume').waitFor({ timeout: 15_000 });
    const facets = byTestId('log-facets');
    await expect.poll(() => facets.textContent(), { timeout: 15_000 }).toContain('order.id');
    await facets.getByTestId('facet-value').filter({ hasText: 'o-1001' }).click();
    await expect.poll(() => new URL(page.url()).searchParams.getAll('attr')).toEqual(['order.id=o-1001']);
    await expect.poll(() => facets.locator('[aria-current]').allTextContents(), { timeout: 15_000 }).toEqual([expect.stringContaining('o-1001')]);
    // Dragging across the chart's second half narrows the range to it: the entry, sent just now, stays.
    await expect.poll(() => byTestId('logs-volume').getAttribute('data-total'), { timeout: 15_000 }).toBe('1');
    // Dragged again only if the first drag left no range after 10 s: on a loaded machine the chart
    // may be drawn anew (its data refreshed) between the events, and a drag on no chart does nothing.
    await eventually(async () => {
      if (new URL(page.url()).searchParams.get('from') !== null) return true;
      await dragAcross(page.locator('[data-testid="logs-volume"] .u-over'), 0.5, 1);
      return expect.poll(() => new URL(page.url()).searchParams.get('from'), { timeout: 10_000 }).not.toBeNull().then(() => true, () => false);
    }, 40_000, 0);
    const zoomed = new URL(page.url()).searchParams;
    const [from, to] = [Number(zoomed.get('from')), Number(zoomed.get('to'))];
    expect(to - from).toBeGreaterThan(0.45 * 3_600_000);
    expect(to - from).toBeLessThan(0.55 * 3_600_000);
    await expect.poll(() => byTestId('logs-volume').getAttribute('data-total'), { timeout: 15_000 }).toBe('1');
    await expect.poll(() => logRow.count(), { timeout: 15_000 }).toBe(1);
    await shot('logs-facets');
    // Back twice: the last hour again, unfiltered (the pages below keep the range).
    await page.goBack();
    await page.goBack();
    await expect.poll(() => new URL(page.url()).search).toBe('');
    await logRow.first().click();
    await byTestId('log-detail').waitFor();
    expect(await byTestId('log-attributes').textContent()).toContain('o-1001');
    await shot('logs');
    await byTestId('log-view-trace').click();
    await byTestId('waterfall').waitFor({ timeout: 15_000 });
    expect(page.url()).toContain(`/traces/${traceId}`);
    expect(await byTestId('waterfall-row').count()).toBe(3);
    await byTestId('waterfall-row').filter({ hasText: 'payment.Charge' }).click();
    expect(await byTestId('span-events').textContent()).toContain('card declined');
    await shot('trace');
    // The trace's logs, and a search's matches marked.
    await byTestId('trace-logs').click();
    await byTestId('logs-trace-filter').waitFor({ timeout: 15_000 });
    await expect.poll(() => byTestId('log-row').allTextContents(), { timeout: 15_000 }).toEqual([expect.stringContaining('payment declined')]);
    await byTestId('logs-text').fill('DECLINED');
    await byTestId('logs-search').click();
    await expect.poll(() => page.locator('[data-testid="log-row"] mark').allTextContents(), { timeout: 15_000 }).toEqual(['declined']);
    await shot('trace-logs');

    await byTestId('nav-traces').click();
    await byTestId('traces-search').click();
    await byTestId('trace-row').first().waitFor({ timeout: 15_000 });
    expect(await byTestId('traces-table').textContent()).toContain('POST /checkout');
    await shot('traces');

    await byTestId('nav-metrics').click();
    await byTestId('metric-link').filter({ hasText: 'http.server.duration' }).first().click({ timeout: 15_000 });
    await byTestId('metric-chart').waitFor({ timeout: 15_000 });
    const marker = byTestId('deploy-marker').filter({ hasText: '1.9.2' });
    await marker.first().waitFor({ timeout: 15_000 });
    expect(await marker.first().getAttribute('data-service')).toBe('payment');
    await marker.first().hover();
    await shot('metrics');

    await byTestId('save-dashboard').click();
    await byTestId('save-dashboard-name').fill('Payments');
    await byTestId('save-dashboard-submit').click();
    await byTestId('save-dashboard-done').waitFor({ timeout: 15_000 });
    await byTestId('nav-dashboards').click();
    await byTestId('dashboard-link').filter({ hasText: 'Payments' }).click();
    await byTestId('dashboard-chart').first().waitFor({ timeout: 15_000 });
    await byTestId('deploy-marker').first().waitFor({ timeout: 15_000 });
    // A chart takes the whole row, saved; the service variable narrows it, and the link keeps both.
    await byTestId('chart-width').first().click();
    await expect.poll(() => byTestId('dashboard-chart').first().getAttribute('data-width'), { timeout: 15_000 }).toBe('full');
    await byTestId('dashboard-service').selectOption('payment');
    await expect.poll(() => new URL(page.url()).searchParams.get('service')).toBe('payment');
    const shared = new URL((await byTestId('dashboard-share').getAttribute('data-copy')) ?? page.url());
    expect(shared.searchParams.get('service')).toBe('payment');
    await page.reload();
    await expect.poll(() => byTestId('dashboard-chart').first().getAttribute('data-width'), { timeout: 15_000 }).toBe('full');
    expect(await byTestId('dashboard-service').inputValue()).toBe('payment');
    await byTestId('deploy-marker').first().waitFor({ timeout: 15_000 });
    await shot('dashboard');

    await byTestId('nav-ingest').click();
    await byTestId('overview-chart').first().waitFor({ timeout: 30_000 });
    await shot('overview');
  });

  it("judges the demo's deploys: payment 1.9.2 a regression, inventory 5.0.1 no change, on the Deploys page and on a chart's marker", async () => {
    // Seeded: inventory's durations are drawn alike before and after its deploy, so "no change" is
    // what they show, but now and then an unseeded draw differed enough to be called an improvement.
    await sendDemo({ url: app.baseUrl, apiKey, minutes: 15, requests: 300, random: seededRandom(35) });
    await byTestId('nav-deploys').click();
    const rows = (service: string) => page.locator(`[data-testid="deploy-row"][data-service="${service}"]`);
    await eventually(async () => (await rows('inventory').count()) > 0 || (await page.reload(), false), 30_000, 1000);
    // Two payment markers: the demo's, a regression, and this test's own of a minute or so before the demo was sent, whose
    // verdict depends on how long the steps before took (how many of the demo's requests came after it).
    const verdicts = async (service: string) => (await rows(service).getByTestId('verdict').allTextContents()).sort();
    expect(await verdicts('payment')).toHaveLength(2);
    expect(await verdicts('payment')).toContain('Regression');
    expect(await rows('payment').filter({ has: page.getByText('Regression') }).first().getByTestId('verdict-reason').textContent()).toContain('latency');
    expect(await verdicts('inventory')).toEqual(['No change']);
    await shot('deploys');

    await byTestId('nav-metrics').click();
    await byTestId('metric-link').filter({ hasText: 'http.server.request.duration' }).first().click({ timeout: 15_000 });
    const markers = page.locator('[data-testid="deploy-marker"][data-service="payment"]');
    await markers.first().waitFor({ timeout: 15_000 });
    let seen = '';
    for (let i = 0; i < await markers.count(); i++) {
      await markers.nth(i).hover();
      const verdict = markers.nth(i).getByTestId('deploy-marker-verdict');
      await expect.poll(() => verdict.textContent(), { timeout: 15_000 }).toMatch(/^Verdict: [A-Z]/);
      seen += `${await verdict.textContent()}\n`;
    }
    expect(seen).toMatch(/Verdict: Regression — .*latency worse/);
    await shot('metrics-verdict');
  });

  it("lands on Services: each service's requests as SQL over the spans counts them, and a service's page with its operations and charts", async () => {
    await byTestId('nav-services').click();
    const table = byTestId('services-table');
    await table.waitFor({ timeout: 15_000 });
    const counted = await app.rows<{ service: string; requests: string; errors: string }>(
      `SELECT ServiceName AS service, count() AS requests, countIf(StatusCode = 'Error') AS errors FROM otel.otel_traces
       WHERE SpanKind IN ('Server', 'Consumer') AND Timestamp >= now() - INTERVAL 1 HOUR GROUP BY service ORDER BY service`,
    );
    expect(counted.map((row) => row.service)).toContain('payment');
    for (const { service, requests } of counted) {
      const row = page.locator(`[data-testid="service-row"][data-service="${service}"]`);
      expect(await row.getByTestId('service-requests').textContent(), service).toBe(Number(requests).toLocaleString('en-US'));
    }
    await shot('services');
    await page.locator('[data-testid="service-row"][data-service="payment"]').getByTestId('service-link').click();
    await byTestId('operations-table').waitFor({ timeout: 15_000 });
    expect(await byTestId('operation-row').allTextContents()).toEqual(expect.arrayContaining([expect.stringContaining('Charge')]));
    await byTestId('service-p95-chart').waitFor({ timeout: 15_000 });
    await page.locator('[data-testid="deploy-marker"][data-service="payment"]').first().waitFor({ timeout: 15_000 });
    await shot('service');
    await byTestId('service-traces').click();
    await byTestId('trace-row').first().waitFor({ timeout: 15_000 });
    expect(new URL(page.url()).searchParams.get('service')).toBe('payment');
  });

  it('loads nothing from anywhere but the console itself, and logs no error', () => {
    const origin = new URL(app.console!.url).origin;
    expect(seen.requests.filter((url) => !url.startsWith(`${origin}/`))).toEqual([]);
    // Opened signed out, the app asks GET /api/me and is told 401: Chromium logs that answer.
    expect(seen.complaints.filter((line) => !line.includes('status of 401'))).toEqual([]);
  });
});

describe("another tenant's user", () => {
  it("sees none of it, in the pages and through the console API", async () => {
    const tab = await browser.newContext({ viewport: { width: 1366, height: 768 }, baseURL: app.console!.url });
    const other = await tab.newPage();
    await other.goto('/sign-in');
    await other.getByTestId('sign-in-email').fill('bob@other.example');
    await other.getByTestId('sign-in-password').fill(PASSWORD);
    await other.getByTestId('sign-in-submit').click();
    await expect.poll(() => other.getByTestId('nav-tenant').textContent(), { timeout: 15_000 }).toContain('Other Co');
    await other.getByTestId('nav-logs').click();
    await other.getByTestId('empty-state').waitFor({ timeout: 15_000 });
    await shot('other-tenant-logs', other);
    await tab.close();

    const api = new ConsoleClient(app.console!.url);
    await api.signIn('bob@other.example', PASSWORD);
    const range = { from: Date.now() - 3_600_000, to: Date.now() + 60_000 };
    expect((await api.json<LogPage>('/api/query/logs', { method: 'POST', body: range })).logs).toEqual([]);
    expect((await api.json<{ traces: TraceSummary[] }>('/api/query/traces', { method: 'POST', body: range })).traces).toEqual([]);
    expect((await api.json<{ metrics: unknown[] }>('/api/query/metric-names', { method: 'POST', body: range })).metrics).toEqual([]);
    expect((await api.json<{ deploys: unknown[] }>('/api/query/deploys', { method: 'POST', body: range })).deploys).toEqual([]);
    expect((await api.json<{ sources: unknown[] }>('/api/sources')).sources).toEqual([]);
  });
});

describe('a member of the tenant', () => {
  it('reads every page but is shown no control the API would refuse', async () => {
    await app.relay!.admin.users.create({ tenantId: 'ten_default', role: 'operator' }, { email: 'mia@example.com', name: 'Mia', role: 'member', password: PASSWORD });
    const tab = await browser.newContext({ viewport: { width: 1366, height: 768 }, baseURL: app.console!.url });
    const member = await tab.newPage();
    await member.goto('/sign-in');
    await member.getByTestId('sign-in-email').fill('mia@example.com');
    await member.getByTestId('sign-in-password').fill(PASSWORD);
    await member.getByTestId('sign-in-submit').click();
    await member.getByTestId('nav-sources').click();
    await member.getByTestId('source-row').first().waitFor({ timeout: 15_000 });
    await member.getByTestId('read-only').waitFor({ timeout: 15_000 });
    for (const control of ['source-create', 'key-add', 'key-rotate', 'key-revoke', 'install-token-create']) expect(await member.getByTestId(control).count()).toBe(0);
    await shot('member-sources', member);
    await member.getByTestId('nav-dashboards').click();
    await member.getByTestId('dashboard-link').filter({ hasText: 'Payments' }).click();
    await member.getByTestId('dashboard-chart').first().waitFor({ timeout: 15_000 });
    for (const control of ['dashboard-delete', 'chart-remove', 'chart-move-up']) expect(await member.getByTestId(control).count()).toBe(0);
    await member.getByTestId('nav-metrics').click();
    await member.getByTestId('metric-link').filter({ hasText: 'http.server.duration' }).first().click({ timeout: 15_000 });
    await member.getByTestId('metric-chart').waitFor({ timeout: 15_000 });
    expect(await member.getByTestId('save-dashboard').count()).toBe(0);
    // The relay's pages: a site and form an owner made, read, and no control.
    const actor = { tenantId: 'ten_default', role: 'operator' } as const;
    const site = await app.relay!.admin.sites.create(actor, { name: 'Shop', allowedOrigins: ['https://shop.example'] }) as { id: string };
    await app.relay!.admin.forms.create(actor, site.id, { name: 'Orders', formKey: 'orders' });
    await member.getByTestId('nav-relay').click();
    await member.getByTestId('site-link').filter({ hasText: 'Shop' }).click();
    await member.getByTestId('form-link').filter({ hasText: 'Orders' }).click();
    await member.getByTestId('jobs').waitFor({ timeout: 15_000 });
    await member.getByTestId('read-only').waitFor();
    for (const control of ['form-active', 'form-template', 'recipient-form', 'webhook-form', 'job-retry', 'jobs-retry-dead']) expect(await member.getByTestId(control).count(), control).toBe(0);
    await shot('member-relay-form', member);
    await member.goBack();
    await member.getByTestId('forms-table').waitFor({ timeout: 15_000 });
    for (const control of ['form-create-form', 'site-origins-form', 'captcha-form']) expect(await member.getByTestId(control).count(), control).toBe(0);
    await member.goto('/relay/settings');
    await member.getByTestId('templates').waitFor({ timeout: 15_000 });
    for (const control of ['relay-key-form', 'delivery-email-form', 'delivery-whatsapp-form', 'template-new']) expect(await member.getByTestId(control).count(), control).toBe(0);
    await tab.close();
  });
});

describe('a person with accounts in two tenants', () => {
  it('chooses the tenant after the password, and is signed in to that one', async () => {
    const otherTenant = app.relay!.store.accounts.tenants.find((tenant) => tenant.name === 'Other Co')!;
    for (const tenantId of ['ten_default', otherTenant.id]) {
      await app.relay!.admin.users.create({ tenantId, role: 'operator' }, { email: 'sam@example.com', name: 'Sam', role: 'member', password: PASSWORD });
    }
    const tab = await browser.newContext({ viewport: { width: 1366, height: 768 }, baseURL: app.console!.url });
    const sam = await tab.newPage();
    await sam.goto('/sign-in');
    await sam.getByTestId('sign-in-email').fill('sam@example.com');
    await sam.getByTestId('sign-in-password').fill(PASSWORD);
    await sam.getByTestId('sign-in-submit').click();
    const choice = sam.getByTestId('sign-in-tenant');
    await choice.waitFor({ timeout: 15_000 });
    expect(await choice.locator('option').allTextContents()).toEqual(['Default', 'Other Co']);
    await shot('sign-in-tenant', sam);
    await choice.selectOption({ label: 'Other Co' });
    await sam.getByTestId('sign-in-submit').click();
    await expect.poll(() => sam.getByTestId('nav-tenant').textContent(), { timeout: 15_000 }).toContain('Other Co');
    await tab.close();
  });
});

describe('sign-out', () => {
  it('ends the session: the page goes to sign-in, and the old cookie is refused', async () => {
    const cookie = (await page.context().cookies()).find((c) => c.name === 'sluice_session')!;
    await byTestId('sign-out').click();
    await byTestId('sign-in-form').waitFor({ timeout: 15_000 });
    await shot('signed-out');
    const replay = await fetch(consoleUrl('/api/me'), { headers: { cookie: `${cookie.name}=${cookie.value}`, origin: new URL(app.console!.url).origin } });
    expect(replay.status).toBe(401);
  });
});

describe('accessibility', () => {
  it('every page shot above meets WCAG 2.1 A and AA as axe-core checks it', () => {
    expect(accessibility.size).toBeGreaterThanOrEqual(10);
    expect(Object.fromEntries([...accessibility].filter(([, problems]) => problems.length > 0))).toEqual({});
  });
});
