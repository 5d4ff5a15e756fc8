/**
 * GET /api/v1/docs on both ports of a running Sluice, in a real browser: Debian's Chromium driven
 * by playwright-core (deploy/services.sh installs it). Swagger UI renders the port's OpenAPI
 * document from Sluice's own files: nothing is fetched from anywhere else, and the console shows
 * no error (a Content-Security-Policy violation would be one). A screenshot of each page goes to
 * test-output/ (not committed).
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessibilityProblems, launchChromium, SCREENSHOTS, watchPage } from './browser.ts';
import { startTestSluice, type TestSluice } from './harness.ts';

const ENGINE = process.env.SLUICE_TEST_HTTP_ENGINE ?? 'node';
let sluice: TestSluice;
let browser: Browser;

beforeAll(async () => {
  sluice = await startTestSluice();
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await sluice?.stop();
});

interface Visit {
  /** Console errors and warnings, and uncaught exceptions. */
  complaints: string[];
  /** Every URL the page asked for. */
  requests: string[];
  /** The summary Swagger UI shows for the operation. */
  summary: string;
  /** The statuses listed under the operation once it is opened. */
  statuses: string[];
  /** The status "Try it out" got from GET /api/v1/health. */
  triedHealth: string;
  /** What axe-core found with the operation open. */
  accessibility: string[];
}

/** Opens the docs page of `origin`, waits for Swagger UI to show `method path`, opens it and takes a screenshot. */
async function visit(origin: string, method: string, path: string, screenshot: string): Promise<Visit> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const tab = await context.newPage();
  const { complaints, requests } = watchPage(tab);
  const answer = await tab.goto(`${origin}/api/v1/docs`);
  expect(answer?.status()).toBe(200);
  const operation = tab.locator(`.opblock-${method.toLowerCase()}`).filter({ has: tab.locator(`.opblock-summary-path[data-path="${path}"]`) });
  await operation.first().waitFor({ timeout: 20_000 });
  const summary = (await operation.locator('.opblock-summary-description').first().textContent()) ?? '';
  await operation.locator('.opblock-summary-control').first().click();
  const responses = operation.locator('.responses-table tr.response');
  await responses.first().waitFor({ timeout: 20_000 });
  const statuses = await responses.evaluateAll((rows) => rows.map((row) => row.getAttribute('data-code') ?? ''));
  await tab.screenshot({ path: `${SCREENSHOTS}${screenshot}` });
  const accessibility = await accessibilityProblems(tab);
  // "Try it out" calls the port the page came from (servers: "/").
  const health = tab.locator('.opblock-get').filter({ has: tab.locator('.opblock-summary-path[data-path="/api/v1/health"]') }).first();
  await health.locator('.opblock-summary-control').click();
  await health.locator('.try-out__btn').click();
  await health.locator('.execute').click();
  const triedHealth = (await health.locator('.live-responses-table tbody .response-col_status').first().textContent({ timeout: 20_000 }))?.trim() ?? '';
  await context.close();
  return { complaints, requests, summary, statuses, triedHealth, accessibility };
}

describe.each([
  { port: 'ingest', method: 'POST', path: '/v1/traces', summary: 'Export traces (OTLP/HTTP)', statuses: ['200', '400', '401', '408', '413', '415', '429', '503'] },
  { port: 'relay', method: 'POST', path: '/api/v1/submissions', summary: 'Submit a form from a browser', statuses: ['201', '400', '404', '408', '409', '413', '422', '429', '503'] },
])('/api/v1/docs on the $port port', ({ port, method, path, summary, statuses }) => {
  const origin = () => (port === 'ingest' ? sluice.baseUrl : `http://127.0.0.1:${sluice.relay!.port}`);

  it(`shows ${method} ${path} with its summary and statuses, tries GET /api/v1/health, all from the port itself, with no console error`, async () => {
    const seen = await visit(origin(), method, path, `api-docs-${port}-${ENGINE}.png`);
    expect(seen.summary).toBe(summary);
    expect(seen.statuses).toEqual(statuses);
    expect(seen.triedHealth).toBe('200');
    expect(seen.requests).toContain(`${origin()}/api/v1/health`);
    expect(seen.complaints).toEqual([]);
    expect(seen.accessibility).toEqual([]);
    expect(seen.requests.length).toBeGreaterThan(3);
    expect(seen.requests.filter((url) => !url.startsWith(`${origin()}/`))).toEqual([]);
  });

  it('answers with a policy of its own origin only, and files cached for good under URLs that name their content', async () => {
    const page = await fetch(`${origin()}/api/v1/docs`);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('cache-control')).toBe('no-cache');
    const policy = page.headers.get('content-security-policy')!;
    expect(policy).toContain("default-src 'none'");
    expect(policy.split(';').flatMap((directive) => directive.trim().split(/\s+/).slice(1))).toSatisfy((sources: string[]) => sources.every((s) => s === "'self'" || s === "'none'"));
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="(\/api\/v1\/docs\/assets\/[^"]+)"/g)].map(([, url]) => url!);
    expect(assets.map((url) => url.replace(/\?v=[0-9a-f]{16}$/, ''))).toEqual(
      ['favicon-32x32.png', 'swagger-ui.css', 'sluice.css', 'swagger-ui-bundle.js', 'start.js'].map((name) => `/api/v1/docs/assets/${name}`),
    );
    const typeOf: Record<string, string> = { png: 'image/png', css: 'text/css; charset=utf-8', js: 'text/javascript; charset=utf-8' };
    for (const url of assets) {
      const asset = await fetch(`${origin()}${url}`);
      expect(asset.status, url).toBe(200);
      expect(asset.headers.get('content-type'), url).toBe(typeOf[url.replace(/\?.*/, '').split('.').pop()!]);
      expect(asset.headers.get('cache-control'), url).toBe('public, max-age=31536000, immutable');
      expect(asset.headers.get('x-content-type-options'), url).toBe('nosniff');
      expect((await asset.arrayBuffer()).byteLength, url).toBeGreaterThan(0);
    }
    // The stylesheet's icons are files of the port too (a data: URL would break the policy).
    const css = await (await fetch(`${origin()}${assets[1]}`)).text();
    expect(css).not.toContain('data:');
    const icons = [...new Set([...css.matchAll(/url\((\/api\/v1\/docs\/assets\/image-[0-9a-f]{16})\)/g)].map(([, url]) => url!))];
    expect(icons.length).toBeGreaterThan(10);
    const types = new Set<string>();
    for (const url of icons) {
      const icon = await fetch(`${origin()}${url}`);
      expect(icon.status, url).toBe(200);
      types.add(icon.headers.get('content-type')!);
    }
    expect([...types].sort()).toEqual(['image/jpeg', 'image/png', 'image/svg+xml']);
    const missing = await fetch(`${origin()}/api/v1/docs/assets/swagger-ui.js.map`);
    expect(missing.status).toBe(404);
    expect((await missing.json()).statusCode).toBe(404);
  });
});
