/**
 * Sanitising of what a backend sends in a notification (relay spec 4.2, rule 7), with
 * sanitize-html (maintained; htmlparser2 underneath). Entities are decoded before anything is
 * removed, not after: `&#106;avascript:` is seen as `javascript:` and dropped, and escaped markup
 * (`&lt;script&gt;`) is decoded and removed like the real thing, until decoding changes nothing
 * more (double escaping): the result is a fixed point, which sanitising again leaves as it is.
 * Each round unwinds one level of escaping, so text escaped more than MAX_ROUNDS times over is
 * refused (400) rather than unwound at a cost that grows with its length. The sanitiser always
 * has the last word, so what is stored is its output.
 *
 * sanitize-html's cost grows with the square of how deeply elements nest (33,000 nested `<b>`
 * in a 100 KB body held the event loop 1.3 s), so a body nested deeper than MAX_NESTING is
 * refused (400) before it is parsed, after a scan that costs only its length.
 */
import { decodeHTML } from 'entities';
import sanitizeHtml from 'sanitize-html';
import { validationFailed } from './errors.ts';

const BODY: sanitizeHtml.IOptions = { allowedSchemes: ['http', 'https', 'mailto', 'tel'], allowProtocolRelative: false };
/** Rounds of decoding and sanitising before a text must be settled. */
export const MAX_ROUNDS = 8;

const UNSETTLED = `is HTML-escaped over and over: it still changes after ${MAX_ROUNDS} rounds of decoding and sanitising`;

/** Applies `round` until the text stops changing; undefined if it still changes after MAX_ROUNDS. */
function settle(text: string, round: (text: string) => string): string | undefined {
  for (let i = 0; i < MAX_ROUNDS; i++) {
    const next = round(text);
    if (next === text) return text;
    text = next;
  }
  return undefined;
}

/** Elements open at once in a body; email layouts of nested tables reach 20-30. */
export const MAX_NESTING = 256;
/** Elements that never hold others. */
const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'param', 'source', 'track', 'wbr']);
/** Elements a parser closes when the next one of their kind (or their parent's end) comes: they do not nest. */
const SELF_ENDING = new Set(['p', 'li', 'dt', 'dd', 'option', 'tr', 'td', 'th']);
const TAG = /<(\/?)([a-zA-Z][a-zA-Z0-9-]*)[^>]*?(\/?)>/g;

/** How deeply the elements of `html` nest at most, read as a parser would close them, roughly: open tags not yet closed. */
export function nestingDepth(html: string): number {
  let depth = 0;
  let most = 0;
  for (const [, closing, name, selfClosing] of html.matchAll(TAG)) {
    const tag = name!.toLowerCase();
    if (VOID.has(tag) || SELF_ENDING.has(tag) || selfClosing) continue;
    depth = closing ? Math.max(0, depth - 1) : depth + 1;
    most = Math.max(most, depth);
  }
  return most;
}

/**
 * A body sanitised, or what is wrong with it (`Validation failed: body <problem>`): a value, not
 * a throw, so that it can cross from the render pool's threads.
 */
export type SanitizedBody = { ok: true; body: string } | { ok: false; problem: string };

/** The HTML body: sanitize-html's default tags (no script or style), no event handlers, http(s)/mailto/tel links only. */
export function sanitizedBody(html: string): SanitizedBody {
  // Escaped markup nests once decoded: the depth that counts is the decoded text's.
  if (nestingDepth(html) > MAX_NESTING || nestingDepth(decodeHTML(html)) > MAX_NESTING) return { ok: false, problem: `nests elements more than ${MAX_NESTING} deep` };
  const body = settle(sanitizeHtml(decodeHTML(html), BODY), (text) => sanitizeHtml(decodeHTML(text), BODY));
  return body === undefined ? { ok: false, problem: UNSETTLED } : { ok: true, body };
}

/** sanitizedBody, throwing its refusal as 400 naming `body`. */
export function sanitizeBody(html: string): string {
  const result = sanitizedBody(html);
  if (!result.ok) throw validationFailed('body', result.problem);
  return result.body;
}

const TEXT_ONLY: sanitizeHtml.IOptions = { allowedTags: [], allowedAttributes: {} };

/**
 * The subject as plain text for a mail header: tags removed (script and style with their
 * content), entities decoded, line breaks and other control characters turned into spaces.
 * Text that still reads as a tag after decoding (`&amp;lt;script&amp;gt;`) is stripped again.
 */
export function sanitizeSubject(subject: string): string {
  const text = settle(subject, (text) => decodeHTML(sanitizeHtml(text, TEXT_ONLY)));
  if (text === undefined) throw validationFailed('subject', UNSETTLED);
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').replace(/ {2,}/g, ' ').trim();
}
