/**
 * A real browser posts the form snippet of docs/reference/relay.md ("Embed a form") to the
 * relay: Debian's Chromium driven by playwright-core (deploy/services.sh installs it). Three
 * pages, each served from an origin of its own on loopback: one the site allows (201, "thank
 * you"), one only another site allows (the preflight passes, the POST gets the 404, the page
 * sees a network error), one no site allows (the preflight fails: nothing is even posted).
 * Screenshots go to $SLUICE_TEST_SCREENSHOTS when it is set.
 */
import { readFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './browser.ts';
import { startRelayFixture, type RelayFixture } from './relay-fixture.ts';

let relay: RelayFixture;
let browser: Browser;
const servers: Server[] = [];
let snippet = '';
/** What every page server answers: the snippet for the site under test. */
let pageHtml = '';

/** The relay reference's "Embed a form" HTML block, as a user would paste it. */
async function referenceSnippet(): Promise<string> {
  const page = await readFile(new URL('../docs/reference/relay.md', import.meta.url), 'utf8');
  const section = page.slice(page.indexOf('\n## Embed a form\n'));
  const block = /```html\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error('docs/reference/relay.md has no html block under "## Embed a form"');
  return block[1]!;
}

/** Serves the page at / on a loopback port of its own: a web site of its own origin. */
async function servePage(): Promise<string> {
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(pageHtml);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A submission POST as the relay answered it, whether or not the page's script may see the answer. */
interface Answered {
  origin: string;
  status: number;
}
const answered: Answered[] = [];

/**
 * Sits between the browser and the relay and notes what the relay answered each submission POST.
 * Chromium's DevTools events do not always carry the status of a response CORS kept from the
 * script (Network.responseReceivedExtraInfo may never come), so the status is read on the wire.
 */
async function recordingProxy(target: string): Promise<string> {
  const server = createServer((incoming, outgoing) => {
    const upstream = httpRequest(new URL(incoming.url!, target), { method: incoming.method, headers: incoming.headers }, (response) => {
      if (incoming.method === 'POST' && incoming.url!.endsWith('/submissions')) answered.push({ origin: String(incoming.headers.origin), status: response.statusCode! });
      outgoing.writeHead(response.statusCode!, response.headers);
      response.pipe(outgoing);
    });
    upstream.on('error', () => outgoing.destroy());
    incoming.pipe(upstream);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The snippet filled in as its user would: the relay's address (here, the proxy's) and the site's key. */
function page(relayUrl: string, siteKey: string): string {
  const filled = snippet.replace("'https://relay.acme.example'", JSON.stringify(relayUrl)).replace("'sk_…'", JSON.stringify(siteKey));
  expect(filled).toContain(relayUrl);
  expect(filled).toContain(siteKey);
  return `<!doctype html><html><head><meta charset="utf-8"><title>Contact</title></head><body><h1>Contact us</h1>${filled}</body></html>`;
}

beforeAll(async () => {
  snippet = await referenceSnippet();
  relay = await startRelayFixture();
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
  await relay?.stop();
});

interface Visit {
  /** What the page showed in its status line. */
  status: string;
  /**
   * The submission POSTs the browser sent, as its network layer saw them (DevTools protocol): the
   * CORS error that kept the answer from the page's script, if any.
   */
  posts: Array<{ corsError?: string }>;
}

/** Opens `origin`, fills in the form and sends it; returns what the visitor sees. */
async function fillAndSend(origin: string, screenshot: string): Promise<Visit> {
  const context = await browser.newContext();
  const tab = await context.newPage();
  const posts = new Map<string, { corsError?: string; done?: true }>();
  const cdp = await context.newCDPSession(tab);
  await cdp.send('Network.enable');
  cdp.on('Network.requestWillBeSent', ({ requestId, request }) => {
    if (request.method === 'POST' && request.url.endsWith('/api/v1/submissions')) posts.set(requestId, {});
  });
  cdp.on('Network.loadingFinished', ({ requestId }) => {
    const post = posts.get(requestId);
    if (post) post.done = true;
  });
  cdp.on('Network.loadingFailed', ({ requestId, corsErrorStatus }) => {
    const post = posts.get(requestId);
    if (!post) return;
    post.done = true;
    if (corsErrorStatus) post.corsError = corsErrorStatus.corsError;
  });
  await tab.goto(origin);
  await tab.fill('input[name="name"]', 'Ann Example');
  await tab.fill('input[name="email"]', 'ann@example.com');
  await tab.fill('textarea[name="message"]', `Hello from ${origin}`);
  await tab.click('button[type="submit"]');
  await tab.waitForFunction(() => document.getElementById('contact-status')!.textContent !== '', undefined, { timeout: 20_000 });
  const status = (await tab.textContent('#contact-status'))!;
  // A request's last DevTools event may follow what the page already shows: wait for it.
  const deadline = Date.now() + 10_000;
  while ([...posts.values()].some((post) => !post.done) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  if (process.env.SLUICE_TEST_SCREENSHOTS) await tab.screenshot({ path: join(process.env.SLUICE_TEST_SCREENSHOTS, screenshot), fullPage: true });
  await context.close();
  return { status, posts: [...posts.values()].map(({ done: _done, ...post }) => post) };
}

/** What the relay answered the POSTs sent from `origin`. */
function answeredTo(origin: string): number[] {
  return answered.filter((answer) => answer.origin === origin).map((answer) => answer.status);
}

async function storedFrom(origin: string): Promise<number> {
  return Number((await relay.rows(`SELECT count() AS n FROM otel.relay_submissions WHERE Origin = '${origin}'`))[0]!.n);
}

describe('the reference form snippet in Chromium', () => {
  it('is sent from an allowed origin (201), refused from an origin another site allows (the 404), and never posted from an origin no site allows', async () => {
    const [allowed, otherSites, nowhere] = [await servePage(), await servePage(), await servePage()];
    const { site } = await relay.siteWithForm({ origins: [allowed], recipients: [{ channel: 'email', address: 'sales@example.com' }] });
    await relay.siteWithForm({ origins: [otherSites], formKey: 'other' });
    // All three origins serve the same page, for the first site.
    pageHtml = page(await recordingProxy(relay.base.replace(/\/api\/v1$/, '')), site.siteKey);

    const sent = await fillAndSend(allowed, 'relay-form-allowed.png');
    expect(sent.status).toBe('Thank you, your message was sent.');
    expect(sent.posts).toEqual([{}]);
    expect(answeredTo(allowed)).toEqual([201]);
    const [row] = await relay.rows<{ Data: string; UserAgent: string }>(`SELECT Data, UserAgent FROM otel.relay_submissions WHERE Origin = '${allowed}'`);
    expect(JSON.parse(row!.Data)).toEqual({ name: 'Ann Example', email: 'ann@example.com', message: `Hello from ${allowed}` });
    expect(row!.UserAgent).toMatch(/Chrome/);

    const refused = await fillAndSend(otherSites, 'relay-form-other-site.png');
    expect(refused.status).toBe('The form could not be sent. Please try again.');
    // The POST went out (the preflight allows an origin some site allows) and got the 404,
    // which carries no Allow-Origin: the page's script only sees a network error.
    expect(refused.posts).toEqual([{ corsError: 'MissingAllowOriginHeader' }]);
    expect(answeredTo(otherSites)).toEqual([404]);
    expect(await storedFrom(otherSites)).toBe(0);

    const blocked = await fillAndSend(nowhere, 'relay-form-nowhere.png');
    expect(blocked.status).toBe('The form could not be sent. Please try again.');
    // The preflight got no Allow-Origin: the POST itself never left the browser.
    expect(blocked.posts).toEqual([{ corsError: 'PreflightMissingAllowOriginHeader' }]);
    expect(answeredTo(nowhere)).toEqual([]);
    expect(await storedFrom(nowhere)).toBe(0);
  });
});
