/**
 * The form snippet a web site embeds to post submissions to the relay: "Embed a form" in
 * docs/reference/relay.md shows it with placeholders (relay/example-page.test.ts holds the two
 * equal), `sluice relay example-page` serves it filled in, and the console's form page shows it
 * with the relay's URL and the form's keys. Plain text, no dependency: the relay and the
 * console's app both build it.
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
export function scriptLiteral(value: string): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

