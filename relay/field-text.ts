/**
 * How submitted values read in a message. A placeholder's value is one line: a string as it is,
 * a list's items joined with ", ", an object's `key: value` pairs joined with "; ". `{{ @fields }}`
 * is every field: a table in HTML (an object's fields in a table of its own), and in text a
 * `name: value` line per field (an object's fields indented below its name), so names and values
 * never run together. The writers go through an `Output`, so the same walk measures a message
 * (lengths only, nothing built) and then builds it.
 */
import { escapedLength, escapeHtml } from './templates.ts';

/** Where a writer puts text: `markup` as it is, `value` as the output shows values (HTML-escaped or raw). */
export interface Output {
  markup(text: string): void;
  value(text: string): void;
}

/** Counts what the writers would put, building nothing. */
export class Measure implements Output {
  chars = 0;
  constructor(private readonly escaped: boolean) {}
  markup(text: string): void {
    this.chars += text.length;
  }
  value(text: string): void {
    this.chars += this.escaped ? escapedLength(text) : text.length;
  }
}

/** Collects what the writers put; `text()` joins it. */
export class Build implements Output {
  private readonly parts: string[] = [];
  constructor(private readonly escaped: boolean) {}
  markup(text: string): void {
    this.parts.push(text);
  }
  value(text: string): void {
    this.parts.push(this.escaped ? escapeHtml(text) : text);
  }
  text(): string {
    return this.parts.join('');
  }
}

/** An object that is not an array (nor null). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The value at `path` (`name`, `meta.page`) of the data; undefined when there is none. */
export function lookup(data: Record<string, unknown>, path: string): unknown {
  let value: unknown = data;
  for (const part of path.split('.')) {
    if (!isPlainObject(value) || !Object.hasOwn(value, part)) return undefined;
    value = value[part];
  }
  return value;
}

/** A value as one line of text (nothing for null and a missing value). */
export function inlineText(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) return value.map(inlineText).join(', ');
  if (isPlainObject(value)) return Object.entries(value).map(([key, item]) => `${key}: ${inlineText(item)}`).join('; ');
  return String(value);
}

/** The fields as an HTML table; an object's fields in a table inside its cell. */
export function writeFieldsHtml(fields: Record<string, unknown>, out: Output): void {
  out.markup('<table>');
  for (const [key, value] of Object.entries(fields)) {
    out.markup('<tr><th align="left">');
    out.value(key);
    out.markup('</th><td>');
    if (isPlainObject(value)) writeFieldsHtml(value, out);
    else out.value(inlineText(value));
    out.markup('</td></tr>');
  }
  out.markup('</table>');
}

/**
 * The fields as `name: value` lines; an object's fields on lines of their own, indented below its
 * name. A value's further lines are indented too, so none of them reads as a field of its own.
 */
export function writeFieldsText(fields: Record<string, unknown>, out: Output, indent = ''): void {
  let first = true;
  for (const [key, value] of Object.entries(fields)) {
    if (!first) out.markup('\n');
    first = false;
    out.markup(indent);
    out.value(key.replace(LINE_BREAKS, ' '));
    out.markup(':');
    if (isPlainObject(value)) {
      if (Object.keys(value).length === 0) continue;
      out.markup('\n');
      writeFieldsText(value, out, `${indent}  `);
    } else {
      const text = inlineText(value);
      if (text) out.markup(' ');
      out.value(text.replace(LINE_BREAKS, `\n${indent}  `));
    }
  }
}

const LINE_BREAKS = /\r\n?|\n/g;
