/**
 * The console's build as the server runs it at start-up: the page must work under the strict
 * policy the server sends (`default-src 'self'`) and load nothing from another origin. So
 * index.html names only files the build made, carries no inline script, style or handler, and
 * the bundle names no URL but the XML namespaces the DOM libraries pass to createElementNS.
 */
import { describe, expect, it } from 'vitest';
import { buildConsoleAssets, type ConsoleAssets } from './build.ts';

/** Namespace names (identifiers, never fetched) that Preact and the icon use. */
/** RFC 2606's reserved example names. */
const EXAMPLE_HOST = /(^|\.)example(\.com|\.org|\.net)?$/;
const XML_NAMESPACES = new Set(['http://www.w3.org/2000/svg', 'http://www.w3.org/1998/Math/MathML', 'http://www.w3.org/1999/xhtml', 'http://www.w3.org/1999/xlink']);

function text(assets: ConsoleAssets, path: string): string {
  const asset = assets.get(path);
  if (!asset) throw new Error(`no ${path} among ${[...assets.keys()].join(', ')}`);
  return asset.body.toString('utf8');
}

describe('buildConsoleAssets', () => {
  it('renders index.html that refers only to files it built, with no inline script or style', async () => {
    const assets = await buildConsoleAssets();
    const html = text(assets, '/');
    expect(assets.get('/')).toMatchObject({ contentType: 'text/html; charset=utf-8', immutable: false });

    const referred = [...html.matchAll(/\s(?:src|href)="([^"]*)"/g)].map((found) => found[1]!);
    expect(referred.filter((url) => url.endsWith('.js'))).toHaveLength(1);
    expect(referred.filter((url) => url.endsWith('.css'))).toHaveLength(1);
    for (const url of referred) {
      expect(url).toMatch(/^\/assets\/[a-z]+\.[A-Za-z0-9]+\.(js|css|svg)$/);
      expect(assets.get(url), url).toMatchObject({ immutable: true });
    }
    // Every file the build made is one the page names: nothing unreachable, nothing missing.
    expect([...assets.keys()].filter((path) => path !== '/').sort()).toEqual([...referred].sort());

    for (const script of html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)) {
      expect(script[1]).toMatch(/\ssrc="/);
      expect(script[2]!.trim()).toBe('');
    }
    expect(html).not.toMatch(/<style\b/i);
    expect(html).not.toMatch(/\sstyle=/i);
    expect(html).not.toMatch(/\son[a-z]+=/i);
  });

  it('serves each file with its content type, the bundle and sheet minified', async () => {
    const assets = await buildConsoleAssets();
    const [script] = [...assets.keys()].filter((path) => path.endsWith('.js'));
    const [sheet] = [...assets.keys()].filter((path) => path.endsWith('.css'));
    expect(assets.get(script!)!.contentType).toBe('text/javascript; charset=utf-8');
    expect(assets.get(sheet!)!.contentType).toBe('text/css; charset=utf-8');
    const js = text(assets, script!);
    // Minified: a bundle of Preact, uPlot and the app in long lines (the embed snippet's
    // template keeps its own line breaks).
    expect(js.length / js.split('\n').length).toBeGreaterThan(2000);
    expect(js).not.toContain('sourceMappingURL');
    // uPlot's sheet is bundled in ours, not left as an @import of a file the server does not have.
    const css = text(assets, sheet!);
    expect(css).toContain('.uplot');
    expect(css).not.toContain('@import');
  });

  it('loads nothing from another origin and needs no eval', async () => {
    const assets = await buildConsoleAssets();
    for (const [path, asset] of assets) {
      const body = asset.body.toString('utf8');
      const urls = [...new Set(body.match(/https?:\/\/[^\s"'`)<>\\]*/g) ?? [])];
      // Placeholders in forms name RFC 2606's example domains, which nothing can be loaded from.
      expect(urls.filter((url) => !XML_NAMESPACES.has(url) && !EXAMPLE_HOST.test(new URL(url).hostname)), path).toEqual([]);
      expect(body, path).not.toMatch(/url\(\s*["']?(https?:)?\/\//);
      if (path.endsWith('.js')) {
        // script-src 'self' without 'unsafe-eval'.
        expect(body).not.toMatch(/\beval\(|new Function\(/);
      }
    }
  });

  it('names files by their content: the same sources give the same URLs', async () => {
    const [first, second] = await Promise.all([buildConsoleAssets(), buildConsoleAssets()]);
    expect([...first.keys()]).toEqual([...second.keys()]);
    expect(text(first, '/')).toBe(text(second, '/'));
  });
});
