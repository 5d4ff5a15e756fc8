/**
 * Sanitising of what a backend sends in a notification (relay spec 4.2, rule 7), with
 * sanitize-html (maintained; htmlparser2 underneath). Entities are decoded before anything is
 * removed, not after: `&#106;avascript:` is seen as `javascript:` and dropped, and escaped markup
 * (`&lt;script&gt;`) is decoded and removed like the real thing, until decoding changes nothing
 * more (double escaping): the result is a fixed point, which sanitising again leaves as it is.
 * Each round unwinds one level of escaping, so text escaped more than MAX_ROUNDS times over is
 * refused (400) rather than unwound at a cost that grows with its length. The sanitiser always
 * has the last word, so what is stored is its output.
 */
import { decodeHTML } from 'entities';
import sanitizeHtml from 'sanitize-html';
import { validationFailed } from './errors.ts';

const BODY: sanitizeHtml.IOptions = { allowedSchemes: ['http', 'https', 'mailto', 'tel'], allowProtocolRelative: false };
/** Rounds of decoding and sanitising before a text must be settled. */
export const MAX_ROUNDS = 8;

/** Applies `round` until the text stops changing; 400 naming `field` if it still changes after MAX_ROUNDS. */
function settle(field: string, text: string, round: (text: string) => string): string {
  for (let i = 0; i < MAX_ROUNDS; i++) {
    const next = round(text);
    if (next === text) return text;
    text = next;
  }
  throw validationFailed(field, `is HTML-escaped over and over: it still changes after ${MAX_ROUNDS} rounds of decoding and sanitising`);
}

/** The HTML body: sanitize-html's default tags (no script or style), no event handlers, http(s)/mailto/tel links only. */
export function sanitizeBody(html: string): string {
  return settle('body', sanitizeHtml(decodeHTML(html), BODY), (text) => sanitizeHtml(decodeHTML(text), BODY));
}

const TEXT_ONLY: sanitizeHtml.IOptions = { allowedTags: [], allowedAttributes: {} };

/**
 * The subject as plain text for a mail header: tags removed (script and style with their
 * content), entities decoded, line breaks and other control characters turned into spaces.
 * Text that still reads as a tag after decoding (`&amp;lt;script&amp;gt;`) is stripped again.
 */
export function sanitizeSubject(subject: string): string {
  const text = settle('subject', subject, (text) => decodeHTML(sanitizeHtml(text, TEXT_ONLY)));
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').replace(/ {2,}/g, ' ').trim();
}
