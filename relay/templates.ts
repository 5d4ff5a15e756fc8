/**
 * Notification templates: `{{ path }}` placeholders filled from the submission's data
 * (`{{ name }}`, `{{ meta.page }}`), and `{{ @fields }}` for every field as a table. In the
 * HTML body every value is HTML-escaped, so a visitor's input cannot become markup; in the
 * subject (a mail header) line breaks are removed, so it cannot become another header.
 * Nothing else is interpreted: no logic, no raw output.
 */
import { validationFailed } from './errors.ts';

const PLACEHOLDER = /\{\{\s*(@fields|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)?)\s*\}\}/g;

/** Throws `Validation failed` on `field` when the text has a `{{` that is not a placeholder. */
export function checkTemplate(field: string, text: string): void {
  const rest = text.replace(PLACEHOLDER, '');
  if (rest.includes('{{') || rest.includes('}}')) {
    throw validationFailed(field, 'has a {{ }} that is not a placeholder: use {{ name }}, {{ meta.page }} or {{ @fields }}');
  }
}

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function text(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

function lookup(data: Record<string, unknown>, path: string): unknown {
  let value: unknown = data;
  for (const part of path.split('.')) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

function fieldsTable(data: Record<string, unknown>): string {
  const rows = Object.entries(data).map(([key, value]) => `<tr><th align="left">${escapeHtml(key)}</th><td>${escapeHtml(text(value))}</td></tr>`);
  return `<table>${rows.join('')}</table>`;
}

export function renderHtml(template: string, data: Record<string, unknown>): string {
  return template.replace(PLACEHOLDER, (_, path: string) => (path === '@fields' ? fieldsTable(data) : escapeHtml(text(lookup(data, path)))));
}

export function renderSubject(template: string, data: Record<string, unknown>): string {
  const filled = template.replace(PLACEHOLDER, (_, path: string) =>
    path === '@fields' ? Object.keys(data).join(', ') : text(lookup(data, path)),
  );
  return filled.replace(/[\r\n]+/g, ' ').trim();
}

/** What a form without a template of its own sends. */
export const DEFAULT_TEMPLATE = { subject: 'New submission: {{ @fields }}', html: '<p>A new submission:</p>{{ @fields }}' };
