/**
 * The form snippet is one text: the "Embed a form" block of docs/reference/relay.md is
 * core/form-snippet.ts's snippet with the page's placeholders (and test/relay-browser.test.ts sends that block from
 * Chromium), and `sluice relay example-page` serves it filled in, with nothing a site key or URL
 * holds able to end its script.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { formSnippet, REFERENCE_SNIPPET_VALUES } from '../core/form-snippet.ts';
import { examplePageHtml } from './example-page.ts';

describe('the form snippet', () => {
  it("is the relay reference's Embed a form block, word for word", async () => {
    const page = await readFile(new URL('../docs/reference/relay.md', import.meta.url), 'utf8');
    const section = page.slice(page.indexOf('\n## Embed a form\n'));
    const block = /```html\n([\s\S]*?)```/.exec(section)?.[1];
    expect(block).toBe(formSnippet(REFERENCE_SNIPPET_VALUES));
  });

  it('is served filled in: the relay, the site key and the form key as script literals that cannot close the script', () => {
    const html = examplePageHtml({ relayUrl: 'http://127.0.0.1:8080', siteKey: 'sk_</script><script>alert(1)//', formKey: 'contact', origin: 'http://127.0.0.1:8090' });
    expect(html).toContain('const RELAY = "http://127.0.0.1:8080";');
    expect(html).toContain('const FORM_KEY = "contact";');
    expect(html.match(/<\/script>/g)).toHaveLength(1);
    expect(html).toContain('const SITE_KEY = "sk_\\u003c/script>\\u003cscript>alert(1)//";');
    expect(html).toContain('site key <code>sk_&#60;/script&#62;&#60;script&#62;alert(1)//</code>');
  });
});
