/**
 * GET /api/v1/docs on both ports: Swagger UI (the npm package swagger-ui-dist) showing the port's
 * own /api/v1/openapi.json. Everything the page loads comes from the port itself, under
 * /api/v1/docs/assets/: no CDN, no analytics, no validator badge, and a Content-Security-Policy
 * that allows 'self' only. Assets are read from the package on first use and kept; their URLs
 * carry a hash of their content, so they are cached for good and a new version is a new URL.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** What the docs page needs of an OpenAPI document. */
export interface OpenApiDocument extends Record<string, unknown> {
  info: { title: string; version: string } & Record<string, unknown>;
}

/** The `info` both ports' documents share: the API version (the relay spec's) and Sluice's license. */
export const OPENAPI_INFO = {
  version: '1.0.0',
  license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
} as const;

/** An answer of the docs routes (structurally an HttpResponse of either port). */
export interface DocsResponse {
  status: number;
  headers: Record<string, string>;
  body: string | Uint8Array;
}

export const DOCS_ASSETS_PATH = '/api/v1/docs/assets/';

/** How both ports' OpenAPI documents describe their document and docs routes: each GET and the body of its 200. */
export const DOCS_OPERATIONS: Record<string, { id: string; summary: string; description: string; content: Record<string, unknown> }> = {
  '/api/v1/openapi.json': { id: 'getOpenApiDocument', summary: 'This document', description: 'OpenAPI 3.1, as JSON.', content: { 'application/json': { schema: { type: 'object' } } } },
  '/api/v1/docs': {
    id: 'getApiDocs',
    summary: 'This document in Swagger UI',
    description: 'Everything the page loads comes from /api/v1/docs/assets/.',
    content: { 'text/html': { schema: { type: 'string' } } },
  },
  '/api/v1/docs/assets/{file}': {
    id: 'getApiDocsAsset',
    summary: 'A file of the docs page',
    description: 'Swagger UI\'s files (npm swagger-ui-dist), its icons and its starter. Cached for good: the page names them with a hash of their content.',
    content: {
      'text/css': { schema: { type: 'string' } },
      'text/javascript': { schema: { type: 'string' } },
      'image/*': { schema: { type: 'string', contentMediaType: 'image/*' } },
    },
  },
};
export const DOCS_ASSET_PARAMETER = { name: 'file', in: 'path', required: true, schema: { type: 'string' }, description: 'A name the page gives, e.g. swagger-ui-bundle.js.' };

/** What swagger-ui-dist gives the page: its file name and content type. */
const PACKAGE_FILES: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

/** Starts Swagger UI: a file of its own, as the policy allows no inline script. */
const STARTER = `window.ui = SwaggerUIBundle({
  url: '/api/v1/openapi.json',
  dom_id: '#swagger-ui',
  // A deep link would be a link inside the operation's button (axe: nested-interactive).
  deepLinking: false,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
});
// Swagger UI leaves some selects without a name (the server, a parameter's values): a screen
// reader would announce only "combo box". Each gets one as it appears.
new MutationObserver(function () {
  document.querySelectorAll('#swagger-ui select:not([aria-label])').forEach(function (select) {
    var parameter = select.closest('tr[data-param-name]');
    select.setAttribute('aria-label', select.id === 'servers' ? 'Server' : parameter ? parameter.getAttribute('data-param-name') : 'Value');
  });
}).observe(document.getElementById('swagger-ui'), { childList: true, subtree: true });
`;

/**
 * Colours of Swagger UI's that fall short of WCAG AA's 4.5:1 (axe-core, test/api-docs-browser):
 * white on its light method badges, grey small print, pale links and buttons.
 */
const OVERRIDES = `.swagger-ui .info .title small { background: #4b5563; }
.swagger-ui .info .title small.version-stamp { background-color: #3f6212; }
.swagger-ui .info a, .swagger-ui .info .url { color: #1d4ed8; }
.swagger-ui .opblock .opblock-summary-method { text-shadow: none; }
.swagger-ui .opblock.opblock-get .opblock-summary-method { background: #1d4ed8; }
.swagger-ui .opblock.opblock-post .opblock-summary-method { background: #047857; }
.swagger-ui .opblock.opblock-put .opblock-summary-method { background: #b45309; }
.swagger-ui .opblock.opblock-patch .opblock-summary-method { background: #0f766e; }
.swagger-ui .opblock.opblock-delete .opblock-summary-method { background: #b91c1c; }
.swagger-ui .opblock.opblock-head .opblock-summary-method { background: #6d28d9; }
.swagger-ui .opblock.opblock-options .opblock-summary-method { background: #1e40af; }
.swagger-ui .parameter__in, .swagger-ui .parameter__type, .swagger-ui .prop-format { color: #4b5563; }
.swagger-ui .json-schema-2020-12-expand-deep-button { color: #374151; }
.swagger-ui .btn.authorize { color: #047857; border-color: #047857; }
.swagger-ui .btn.authorize svg { fill: #047857; }
`;

const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  // "Try it out" calls this port.
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = { 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' };

interface Asset {
  body: Uint8Array;
  type: string;
  /** The first characters of its SHA-256: its `v` in the page (images: their name). */
  version: string;
}

const asset = (body: Uint8Array, type: string): Asset => ({ body, type, version: createHash('sha256').update(body).digest('hex').slice(0, 16) });

let loading: Promise<Map<string, Asset>> | undefined;

function assets(): Promise<Map<string, Asset>> {
  loading ??= (async () => {
    const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
    const files = new Map<string, Asset>();
    for (const [name, type] of Object.entries(PACKAGE_FILES)) {
      const body = await readFile(join(dir, name));
      files.set(name, asset(name.endsWith('.css') ? Buffer.from(imagesApart(body.toString('utf8'), files)) : body, type));
    }
    files.set('start.js', asset(Buffer.from(STARTER), 'text/javascript; charset=utf-8'));
    files.set('sluice.css', asset(Buffer.from(OVERRIDES), 'text/css; charset=utf-8'));
    return files;
  })();
  return loading;
}

/** `url("data:<type>[;params],<payload>")` (a CSS string) or `url(data:...)` in a stylesheet. */
const DATA_URL = /url\((?:"data:([^;,"]+)([^,"]*),((?:[^"\\]|\\.)*)"|data:([^;,)]+)([^,)]*),([^)]*))\)/g;

/**
 * swagger-ui.css draws its icons with data: URLs, which an img-src of 'self' refuses: each one
 * becomes a file of its own, named by its content, and the stylesheet points there instead.
 */
function imagesApart(css: string, files: Map<string, Asset>): string {
  return css.replace(DATA_URL, (_url, quotedType?: string, quotedParams?: string, quoted?: string, type?: string, params?: string, payload?: string) => {
    const [mediaType, parameters, data] = quotedType ? [quotedType, quotedParams!, quoted!.replace(/\\(.)/g, '$1')] : [type!, params!, payload!];
    const image = asset(parameters.endsWith(';base64') ? Buffer.from(data, 'base64') : Buffer.from(decodeURIComponent(data)), mediaType);
    files.set(`image-${image.version}`, image);
    return `url(${DOCS_ASSETS_PATH}image-${image.version})`;
  });
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** GET /api/v1/docs: the page, titled `title`. */
export async function docsPage(title: string): Promise<DocsResponse> {
  const files = await assets();
  const url = (name: string) => `${DOCS_ASSETS_PATH}${name}?v=${files.get(name)!.version}`;
  const body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" type="image/png" href="${url('favicon-32x32.png')}">
<link rel="stylesheet" href="${url('swagger-ui.css')}">
<link rel="stylesheet" href="${url('sluice.css')}">
</head><body>
<noscript>This page needs JavaScript. The OpenAPI document itself: <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</noscript>
<div id="swagger-ui"></div>
<script src="${url('swagger-ui-bundle.js')}"></script>
<script src="${url('start.js')}"></script>
</body></html>
`;
  return {
    status: 200,
    headers: { ...SECURITY_HEADERS, 'content-type': 'text/html; charset=utf-8', 'content-security-policy': CONTENT_SECURITY_POLICY, 'cache-control': 'no-cache' },
    body,
  };
}

/** GET /api/v1/docs/assets/<name>: a file of the page, or undefined when there is no such file. */
export async function docsAsset(name: string): Promise<DocsResponse | undefined> {
  const asset = (await assets()).get(name);
  if (!asset) return undefined;
  return { status: 200, headers: { ...SECURITY_HEADERS, 'content-type': asset.type, 'cache-control': 'public, max-age=31536000, immutable' }, body: asset.body };
}
