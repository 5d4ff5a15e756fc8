/**
 * Sanitising of what a backend sends in a notification (relay spec 4.2, rule 7), with
 * sanitize-html (maintained; htmlparser2 underneath). Entities are decoded before anything is
 * removed, not after: `&#106;avascript:` is seen as `javascript:` and dropped, and escaped markup
 * (`&lt;script&gt;`) is decoded and removed like the real thing, until decoding changes nothing
 * more (double escaping). The sanitiser always has the last word, so what is stored is its output.
 */
import { decodeHTML } from 'entities';
import sanitizeHtml from 'sanitize-html';

const BODY: sanitizeHtml.IOptions = { allowedSchemes: ['http', 'https', 'mailto', 'tel'], allowProtocolRelative: false };

/** The HTML body: sanitize-html's default tags (no script or style), no event handlers, http(s)/mailto/tel links only. */
export function sanitizeBody(html: string): string {
  let text = sanitizeHtml(decodeHTML(html), BODY);
  for (let round = 0; round < 4; round++) {
    const next = sanitizeHtml(decodeHTML(text), BODY);
    if (next === text) break;
    text = next;
  }
  return text;
}

const TEXT_ONLY: sanitizeHtml.IOptions = { allowedTags: [], allowedAttributes: {} };

/**
 * The subject as plain text for a mail header: tags removed (script and style with their
 * content), entities decoded, line breaks and other control characters turned into spaces.
 * Text that still reads as a tag after decoding (`&amp;lt;script&amp;gt;`) is stripped again.
 */
export function sanitizeSubject(subject: string): string {
  let text = subject;
  for (let round = 0; round < 4; round++) {
    const stripped = decodeHTML(sanitizeHtml(text, TEXT_ONLY));
    if (stripped === text) break;
    text = stripped;
  }
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').replace(/ {2,}/g, ' ').trim();
}
