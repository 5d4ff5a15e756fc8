/**
 * The form snippet a web site embeds to post submissions to the relay ("Embed a form" in
 * docs/reference/relay.md shows it with placeholders: relay/example-page.test.ts holds the two
 * equal), and the page `sluice relay example-page` serves with it filled in, so a form can be tried from a browser on
 * one machine: the page's origin (http://127.0.0.1:<port>) is what the site allows.
 */

/** The snippet's three settings, each as a JavaScript literal. */
export interface SnippetValues {
  relay: string;
  siteKey: string;
  formKey: string;
}

/** What docs/reference/relay.md shows: a relay's public address and a site key to fill in. */
export const REFERENCE_SNIPPET_VALUES: SnippetValues = { relay: "'https://relay.acme.example'", siteKey: "'sk_…'", formKey: "'contact'" };

/** The HTML form and its script, posting JSON with fetch (the relay answers CORS for the site's origins). */
export function formSnippet({ relay, siteKey, formKey }: SnippetValues): string {
  const settings: Array<[string, string]> = [
    [`const RELAY = ${relay};`, 'where the relay port is reachable (SLUICE_RELAY_PUBLIC_URL)'],
    [`const SITE_KEY = ${siteKey};`, "the site's siteKey"],
    [`const FORM_KEY = ${formKey};`, "the form's formKey"],
  ];
  const width = Math.max(...settings.map(([code]) => code.length));
  const declared = settings.map(([code, comment]) => `  ${code.padEnd(width)}   // ${comment}`).join('\n');
  return `<form id="contact-form">
  <label>Name <input name="name" required></label>
  <label>Email <input name="email" type="email" required></label>
  <label>Message <textarea name="message" required></textarea></label>
  <button type="submit">Send</button>
  <p id="contact-status" role="status"></p>
</form>
<script>
${declared}
  const form = document.getElementById('contact-form');
  const status = document.getElementById('contact-status');
  // One key per filled-in form: a retry after a lost answer is not stored twice.
  let idempotencyKey = crypto.randomUUID();
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    try {
      const response = await fetch(\`\${RELAY}/api/v1/submissions\`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Idempotency-Key': idempotencyKey },
        // 'no-captcha': the placeholder for a site without a CAPTCHA; with one, the widget's token.
        body: JSON.stringify({ siteKey: SITE_KEY, formKey: FORM_KEY, captchaToken: 'no-captcha', data }),
      });
      const answer = await response.json();
      if (response.ok) {
        status.textContent = 'Thank you, your message was sent.';
        form.reset();
        idempotencyKey = crypto.randomUUID();
      } else {
        status.textContent = answer.message;
      }
    } catch {
      status.textContent = 'The form could not be sent. Please try again.';
    }
  });
</script>
`;
}

/** A value as a JavaScript string literal that is safe inside a <script> element (no `</script>`, no `<!--`). */
function scriptLiteral(value: string): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

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
