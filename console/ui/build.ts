/**
 * The console's single-page app, built in memory when the server starts: esbuild bundles
 * main.tsx (Preact, uPlot) and styles.css (ours and uPlot's) into one script and one style
 * sheet, named by a hash of their content, and index.html refers to both. Nothing is written to
 * disk and there is no separate build step: `npm start` is enough.
 *
 * The page runs under `default-src 'self'`: index.html has no inline script or style, and the
 * bundle loads nothing from another origin (build.test.ts checks both). uPlot and the app set
 * element styles from script (CSSOM), which that policy allows.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/** One file the console serves. */
export interface ConsoleAsset {
  body: Buffer;
  contentType: string;
  /** True for the hashed files under /assets/: a new build is a new URL, so they are cached for good. */
  immutable: boolean;
}

/**
 * URL path → file: `/` (index.html, to be served for every GET path outside /api, as the app
 * routes on the client), `/assets/app.<hash>.js`, `/assets/app.<hash>.css`, `/assets/icon.<hash>.svg`.
 * A Map, so a path such as `/constructor` finds nothing.
 */
export type ConsoleAssets = ReadonlyMap<string, ConsoleAsset>;

const HERE = fileURLToPath(new URL('.', import.meta.url));

/** A quiet mark for the browser tab, so its request for an icon does not get index.html. */
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1f4e8c"/><path d="M7 11h18M7 16h12M7 21h15" stroke="#fff" stroke-width="3" stroke-linecap="round"/></svg>`;

function hashed(name: string, extension: string, body: Buffer): string {
  const hash = createHash('sha256').update(body).digest('base64url').slice(0, 12).replace(/[-_]/g, 'x');
  return `/assets/${name}.${hash}.${extension}`;
}

function page(script: string, style: string, icon: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>Sluice console</title>
<link rel="icon" href="${icon}" type="image/svg+xml">
<link rel="stylesheet" href="${style}">
<script type="module" src="${script}"></script>
</head>
<body>
<div id="app"></div>
<noscript>The Sluice console needs JavaScript.</noscript>
</body>
</html>
`;
}

/** Bundles the app and renders index.html; rejects with esbuild's messages when the sources do not build. */
export async function buildConsoleAssets(): Promise<ConsoleAssets> {
  const result = await build({
    absWorkingDir: HERE,
    entryPoints: { app: 'main.tsx', 'app-style': 'styles.css' },
    bundle: true,
    write: false,
    minify: true,
    sourcemap: false,
    target: 'es2020',
    format: 'esm',
    platform: 'browser',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    // A path the output files are named under; nothing is written there.
    outdir: '/console-build',
    logLevel: 'silent',
    legalComments: 'none',
  });
  let script: Buffer | undefined;
  let style: Buffer | undefined;
  for (const file of result.outputFiles) {
    if (file.path.endsWith('/app.js')) script = Buffer.from(file.contents);
    else if (file.path.endsWith('/app-style.css')) style = Buffer.from(file.contents);
  }
  if (!script || !style) throw new Error(`console build: esbuild gave ${result.outputFiles.map((file) => file.path).join(', ')}, not app.js and app-style.css`);

  const icon = Buffer.from(ICON);
  const files: Array<[string, ConsoleAsset]> = [
    [hashed('app', 'js', script), { body: script, contentType: 'text/javascript; charset=utf-8', immutable: true }],
    [hashed('app', 'css', style), { body: style, contentType: 'text/css; charset=utf-8', immutable: true }],
    [hashed('icon', 'svg', icon), { body: icon, contentType: 'image/svg+xml', immutable: true }],
  ];
  const html = Buffer.from(page(files[0]![0], files[1]![0], files[2]![0]));
  return new Map([['/', { body: html, contentType: 'text/html; charset=utf-8', immutable: false }], ...files]);
}
