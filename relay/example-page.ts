/**
 * The page `sluice relay example-page` serves with the form snippet (core/form-snippet.ts) filled
 * in, so a form can be tried from a browser on one machine: the page's origin
 * (http://127.0.0.1:<port>) is what the site allows.
 */
import { formSnippet, scriptLiteral } from '../core/form-snippet.ts';


const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export interface ExamplePage {
  /** The relay's base URL as the browser reaches it (http://127.0.0.1:8080). */
  relayUrl: string;
  siteKey: string;
  formKey: string;
  /** The page's own origin, which the site must allow (http://127.0.0.1:8090). */
  origin: string;
}

/** The whole page: a heading, what it is, and the snippet filled in. */
export function examplePageHtml({ relayUrl, siteKey, formKey, origin }: ExamplePage): string {
  const snippet = formSnippet({ relay: scriptLiteral(relayUrl), siteKey: scriptLiteral(siteKey), formKey: scriptLiteral(formKey) });
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Contact: Sluice relay example page</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 36rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; color: #1e293b; }
  label { display: block; margin: 0.75rem 0; }
  input, textarea { display: block; width: 100%; font: inherit; padding: 0.35rem; margin-top: 0.2rem; }
  button { font: inherit; padding: 0.4rem 1rem; }
  .about { color: #475569; font-size: 0.9rem; }
</style>
</head>
<body>
<h1>Contact us</h1>
<p class="about">An example page served by <code>sluice relay example-page</code> from ${escapeHtml(origin)}, an allowed origin of the site.
It posts the form to the relay at ${escapeHtml(relayUrl)} (site key <code>${escapeHtml(siteKey)}</code>, form <code>${escapeHtml(formKey)}</code>).</p>
${snippet}</body>
</html>
`;
}
