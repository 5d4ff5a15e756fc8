/**
 * Renders a relay message — subject, HTML body and plain-text part — from a template and a
 * submission's data, or from a notification's own subject and body, at a bounded cost:
 *
 * - Each value is worked out once per message, `{{ @fields }}` included, however often the
 *   template uses it.
 * - The size of the message is counted first, from the sizes of the values times their uses,
 *   building nothing; a message over MAX_MESSAGE_CHARS is refused saying by how much, having
 *   allocated nothing of its size.
 * - The text part comes from the template, not from the filled HTML: the template's HTML is
 *   converted to text once per revision (cached here, per thread) with its placeholders kept,
 *   then filled with the raw values, `{{ @fields }}` as `name: value` lines. A notification's
 *   own body (sanitised HTML, no placeholders) is converted as it is.
 *
 * Pure and synchronous: renderer.ts runs it on the event loop when the input is small and on a
 * worker thread (render-worker.ts) when it is not.
 */
import type { RenderedMessage } from '../delivery/index.ts';
import { Build, inlineText, isPlainObject, lookup, Measure, writeFieldsHtml, writeFieldsText, type Output } from './field-text.ts';
import { htmlText } from './html-text.ts';
import { ALL_FIELDS, parseTemplate, type TemplatePart } from './templates.ts';

/**
 * The most characters a message may have, its HTML and text parts together. The default
 * template with the largest submission the public endpoints take (a 1 MiB body, every character
 * escaped to five in HTML) comes to about 6.6 million.
 */
export const MAX_MESSAGE_CHARS = 8_000_000;
/** A longer subject is cut, ending in "…": a subject is a summary (the default lists every field's name). */
export const MAX_SUBJECT_CHARS = 500;

/** What a message is rendered from. */
export interface RenderRequest {
  /** The form's template, or the default. */
  template: { subject: string; html: string };
  data: Record<string, unknown>;
  /** A notification's own subject (sanitised plain text): replaces the template's. */
  subject?: string;
  /** A notification's own body (sanitised HTML): replaces the template's. */
  body?: string;
}

/** The message, or a refusal by its size. */
export type RenderResult =
  /** `chars`: the HTML and text parts' characters, as counted before they were built. */
  | { ok: true; message: Omit<RenderedMessage, 'replyTo'>; chars: number }
  /** Over MAX_MESSAGE_CHARS: `chars` is what it would have been (overLimit() says it for a person). */
  | { ok: false; chars: number };

/** The message of `request`, or its size when that is over MAX_MESSAGE_CHARS (nothing of that size built). */
export function renderMessage(request: RenderRequest): RenderResult {
  const { data } = request;
  const values = new InlineValues(data);
  const html = new Fill(values, true);
  const text = new Fill(values, false);
  const body = request.body ? { html: [request.body], text: [htmlText(request.body)] } : compileBody(request.template.html);
  const chars = html.measure(body.html) + text.measure(body.text);
  if (chars > MAX_MESSAGE_CHARS) return { ok: false, chars };
  const subject = request.subject ? request.subject : renderSubject(parseTemplate(request.template.subject), values);
  return { ok: true, message: { subject: oneLine(subject), html: html.build(body.html), text: text.build(body.text) }, chars };
}

/** What a message of `chars` characters is over the limit by, for a person: `would be …, … over the limit of 8,000,000`. */
export function overLimit(chars: number): string {
  const count = (n: number) => n.toLocaleString('en-US');
  return `would be ${count(chars)} characters (HTML and text parts), ${count(chars - MAX_MESSAGE_CHARS)} over the limit of ${count(MAX_MESSAGE_CHARS)}`;
}

/** Characters a render reads (templates or a notification's own text, and the data): what decides where it runs. */
export function inputChars(request: RenderRequest): number {
  const { template, subject, body } = request;
  return (subject || template.subject).length + (body || template.html).length + dataChars(request.data);
}

/** About the characters of a value: strings and names counted, anything else as a few. */
function dataChars(value: unknown): number {
  if (typeof value === 'string') return value.length;
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + dataChars(item) + 1, 0);
  if (isPlainObject(value)) return Object.entries(value).reduce((sum, [key, item]) => sum + key.length + dataChars(item) + 1, 0);
  return 8;
}

/** The data's values by placeholder path, each made once. */
class InlineValues {
  private readonly made = new Map<string, string>();
  constructor(readonly data: Record<string, unknown>) {}

  get(path: string): string {
    let value = this.made.get(path);
    if (value === undefined) {
      value = inlineText(lookup(this.data, path));
      this.made.set(path, value);
    }
    return value;
  }
}

/** Fills template parts for one output (HTML, values escaped; or text, raw), each value made once. */
class Fill {
  private readonly sizes = new Map<string, number>();
  private readonly filled = new Map<string, string>();
  constructor(private readonly values: InlineValues, private readonly escaped: boolean) {}

  /** Characters of the parts filled, counted without building them. */
  measure(parts: TemplatePart[]): number {
    return parts.reduce((sum: number, part) => sum + (typeof part === 'string' ? part.length : this.size(part.path)), 0);
  }

  build(parts: TemplatePart[]): string {
    return parts.map((part) => (typeof part === 'string' ? part : this.fill(part.path))).join('');
  }

  private size(path: string): number {
    let size = this.sizes.get(path);
    if (size === undefined) {
      const measure = new Measure(this.escaped);
      this.write(path, measure);
      size = measure.chars;
      this.sizes.set(path, size);
    }
    return size;
  }

  private fill(path: string): string {
    let filled = this.filled.get(path);
    if (filled === undefined) {
      const build = new Build(this.escaped);
      this.write(path, build);
      filled = build.text();
      this.filled.set(path, filled);
    }
    return filled;
  }

  private write(path: string, out: Output): void {
    if (path !== ALL_FIELDS) out.value(this.values.get(path));
    else if (this.escaped) writeFieldsHtml(this.values.data, out);
    else writeFieldsText(this.values.data, out);
  }
}

/** The subject filled with raw values (`{{ @fields }}`: the fields' names), made no longer than needed. */
function renderSubject(parts: TemplatePart[], values: InlineValues): string {
  let subject = '';
  for (const part of parts) {
    if (subject.length > MAX_SUBJECT_CHARS) break;
    subject += typeof part === 'string' ? part : part.path === ALL_FIELDS ? Object.keys(values.data).join(', ') : values.get(part.path);
  }
  return subject;
}

/** The subject on one line, at most MAX_SUBJECT_CHARS (never cutting a character in two). */
function oneLine(subject: string): string {
  const line = subject.replace(/[\r\n]+/g, ' ').trim();
  if (line.length <= MAX_SUBJECT_CHARS) return line;
  let end = MAX_SUBJECT_CHARS - 1;
  if (/[\uD800-\uDBFF]/.test(line[end - 1]!)) end--;
  return `${line.slice(0, end)}…`;
}

/** A template body: its parts for HTML, and for text (from its HTML converted with placeholders kept). */
interface CompiledBody {
  html: TemplatePart[];
  text: TemplatePart[];
}

/** Placeholders stand in the HTML as a private-use character, their index, another: one word html-to-text keeps. */
const MARKERS = /[\uE000\uE001]/g;
const MARKER = /\uE000(\d+)\uE001/;
/** Template bodies compiled, by their HTML (least recently used first), up to this many characters of HTML. */
const CACHE_CHARS = 4_000_000;
const compiled = new Map<string, CompiledBody>();
let cachedChars = 0;

function compileBody(html: string): CompiledBody {
  const cached = compiled.get(html);
  if (cached) {
    compiled.delete(html);
    compiled.set(html, cached);
    return cached;
  }
  const parts = parseTemplate(html);
  const paths: string[] = [];
  const marked = parts.map((part) => (typeof part === 'string' ? part.replace(MARKERS, '') : `\uE000${paths.push(part.path) - 1}\uE001`)).join('');
  // split() with a group alternates the text between markers and the markers' indexes.
  const text = htmlText(marked).split(MARKER).map((piece, i): TemplatePart => (i % 2 === 1 ? { path: paths[Number(piece)]! } : piece));
  const body = { html: parts, text: text.filter((part) => part !== '') };
  compiled.set(html, body);
  cachedChars += html.length;
  for (const key of compiled.keys()) {
    if (cachedChars <= CACHE_CHARS) break;
    compiled.delete(key);
    cachedChars -= key.length;
  }
  return body;
}
