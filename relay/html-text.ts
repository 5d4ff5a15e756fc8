/**
 * The plain text of HTML for a message's text part, by html-to-text (tables as blocks: its
 * column layout takes colspans as given, and a huge one would spin). html-to-text recurses per
 * element and gives up on deep nesting (about 2,000 levels on the main thread's stack); such HTML
 * gets a simpler text in one linear pass instead: tags removed (scripts and styles with their
 * content), a line break for each block, entities decoded.
 */
import { decodeHTML } from 'entities';
import { compile } from 'html-to-text';

// Headings keep the case they were written in (html-to-text's default writes them in capitals).
const headings = ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((selector) => ({ selector, options: { uppercase: false } }));
const convert = compile({ wordwrap: 100, selectors: headings });

/** The text of `html` as a mail client would show it in plain text. */
export function htmlText(html: string): string {
  try {
    return convert(html);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    return textWithoutTags(html);
  }
}

const BLOCKS = new Set(['p', 'div', 'br', 'tr', 'li', 'table', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'pre', 'hr']);
const TAG_NAME = /^<\/?([A-Za-z][A-Za-z0-9]*)/;

/** The text between the tags; script and style elements dropped whole. Linear in the length of `html`. */
export function textWithoutTags(html: string): string {
  const kept: string[] = [];
  for (let at = 0; at < html.length; ) {
    const open = html.indexOf('<', at);
    if (open === -1) {
      kept.push(html.slice(at));
      break;
    }
    kept.push(html.slice(at, open));
    const close = html.indexOf('>', open + 1);
    if (close === -1) break;
    const name = TAG_NAME.exec(html.slice(open, Math.min(close, open + 12)))?.[1]?.toLowerCase();
    at = close + 1;
    if (name && BLOCKS.has(name)) kept.push('\n');
    if ((name === 'script' || name === 'style') && html[open + 1] !== '/') {
      // Its content up to the end tag is not text; the search goes on from there, so the pass stays linear.
      const end = new RegExp(`</${name}`, 'gi');
      end.lastIndex = at;
      const found = end.exec(html);
      if (!found) break;
      at = found.index;
    }
  }
  return decodeHTML(kept.join(''))
    .replace(/[ \t\f\v\r]+/g, ' ')
    .replace(/ ?\n ?/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
