/**
 * Notification templates: `{{ path }}` placeholders filled from the submission's data
 * (`{{ name }}`, `{{ meta.page }}`), and `{{ @fields }}` for every field (a table in HTML,
 * `name: value` lines in text). In the HTML body every value is HTML-escaped, so a visitor's
 * input cannot become markup; in the subject (a mail header) line breaks are removed, so it
 * cannot become another header. Nothing else is interpreted: no logic, no raw output.
 * This module only parses and escapes (render.ts fills; tenant-templates.ts checks what is stored).
 */

const PLACEHOLDER = /\{\{\s*(@fields|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)?)\s*\}\}/g;

/** The placeholder of every field. */
export const ALL_FIELDS = '@fields';

/** A template as parsed: literal text and placeholders in order. */
export type TemplatePart = string | { path: string };

/** What a form without a template of its own sends. */
export const DEFAULT_TEMPLATE = { subject: 'New submission: {{ @fields }}', html: '<p>A new submission:</p>{{ @fields }}' };

/** The literal text and placeholders of `template`, in order (empty literals left out). */
export function parseTemplate(template: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let at = 0;
  for (const match of template.matchAll(PLACEHOLDER)) {
    if (match.index > at) parts.push(template.slice(at, match.index));
    parts.push({ path: match[1]! });
    at = match.index + match[0].length;
  }
  if (at < template.length) parts.push(template.slice(at));
  return parts;
}

/** Whether `template` has a `{{` or `}}` that is not part of a placeholder. */
export function hasStrayBraces(template: string): boolean {
  const rest = template.replace(PLACEHOLDER, '');
  return rest.includes('{{') || rest.includes('}}');
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** `value` with `& < > " '` as HTML entities: text that cannot become markup, in content or an attribute. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** The length escapeHtml(value) would have, counted without building it. */
export function escapedLength(value: string): number {
  let length = value.length;
  for (let i = 0; i < value.length; i++) {
    switch (value.charCodeAt(i)) {
      case 0x26: // &amp;
      case 0x27: // &#39;
        length += 4;
        break;
      case 0x3c: // &lt;
      case 0x3e: // &gt;
        length += 3;
        break;
      case 0x22: // &quot;
        length += 5;
        break;
    }
  }
  return length;
}
