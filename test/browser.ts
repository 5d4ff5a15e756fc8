/**
 * Debian's Chromium driven by playwright-core, for the tests of the pages Sluice serves
 * (deploy/services.sh installs it; playwright's own browser download cannot work here), and
 * where their screenshots go: test-output/ (not committed).
 */
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { AxeBuilder } from '@axe-core/playwright';
import { chromium, type Browser, type Page } from 'playwright-core';

const CHROMIUM = process.env.SLUICE_TEST_CHROMIUM ?? '/usr/bin/chromium';
export const SCREENSHOTS = fileURLToPath(new URL('../test-output/', import.meta.url));

export async function launchChromium(): Promise<Browser> {
  await mkdir(SCREENSHOTS, { recursive: true });
  try {
    return await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  } catch (err) {
    throw new Error(`Chromium could not start from ${CHROMIUM} (deploy/services.sh installs Debian's chromium): ${(err as Error).message}`);
  }
}

/** Console errors and warnings and uncaught exceptions of a page, and every URL it asked for. */
export function watchPage(page: Page): { complaints: string[]; requests: string[] } {
  const seen = { complaints: [] as string[], requests: [] as string[] };
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') seen.complaints.push(`${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (err) => seen.complaints.push(`exception: ${err.message}`));
  page.on('request', (request) => seen.requests.push(request.url()));
  return seen;
}

/**
 * What axe-core finds against WCAG 2.1 A and AA on the page as it is now: one line per rule
 * broken, with the first few elements that break it. Empty when the page passes. `frames: false`
 * leaves the page's frames out (a frame that runs no script cannot run axe).
 */
export async function accessibilityProblems(page: Page, { frames = true }: { frames?: boolean } = {}): Promise<string[]> {
  const builder = new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']);
  // A frame sandboxed without scripts (a message preview) cannot run axe: it is left out.
  if (!frames) builder.options({ iframes: false }).exclude('iframe');
  const { violations } = await builder.analyze();
  return violations.map((violation) => `${violation.id} (${violation.impact}): ${violation.nodes.slice(0, 3).map((node) => node.target.join(' ')).join(', ')}`);
}
