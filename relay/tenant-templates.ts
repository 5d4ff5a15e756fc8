/**
 * A tenant's templates as the admin API stores and lists them: what one template may hold
 * (placeholders, `{{ @fields }}` uses), how many templates and bytes a tenant keeps (every
 * gateway holds them all in memory), and the listing a page at a time, without the bodies.
 *
 * The tenant caps are checked against this gateway's copy of the store: two creates racing on two
 * gateways may each pass and together go past a cap by one template each.
 */
import { conflict, validationFailed } from './errors.ts';
import type { Template } from './model.ts';
import { pageLimit, type PageQuery } from './submissions.ts';
import { ALL_FIELDS, hasStrayBraces, parseTemplate } from './templates.ts';

/** What one template may hold, and what a tenant's templates may hold together. */
export const TEMPLATE_LIMITS = {
  /** Placeholders in a subject or an HTML body. */
  placeholders: 200,
  /** `{{ @fields }}` in a subject or an HTML body. */
  fieldsUses: 2,
  /** Templates a tenant keeps. */
  perTenant: 100,
  /** Bytes a tenant's templates hold together (UTF-8 of their names, subjects and HTML). */
  tenantBytes: 2 * 1024 * 1024,
} as const;

const count = (n: number) => n.toLocaleString('en-US');

/** Throws 400 `Validation failed` on `field` for a `{{` that is not a placeholder, or too many placeholders. */
export function checkTemplate(field: string, text: string): void {
  if (hasStrayBraces(text)) {
    throw validationFailed(field, 'has a {{ }} that is not a placeholder: use {{ name }}, {{ meta.page }} or {{ @fields }}');
  }
  const paths = parseTemplate(text).flatMap((part) => (typeof part === 'string' ? [] : [part.path]));
  const fieldsUses = paths.filter((path) => path === ALL_FIELDS).length;
  if (fieldsUses > TEMPLATE_LIMITS.fieldsUses) throw validationFailed(field, `has ${count(fieldsUses)} {{ @fields }}, at most ${TEMPLATE_LIMITS.fieldsUses}`);
  if (paths.length > TEMPLATE_LIMITS.placeholders) throw validationFailed(field, `has ${count(paths.length)} placeholders, at most ${TEMPLATE_LIMITS.placeholders}`);
}

/** Bytes one template holds: the UTF-8 of its name, subject and html. */
export function templateBytes(template: Pick<Template, 'name' | 'subject' | 'html'>): number {
  return Buffer.byteLength(template.name) + Buffer.byteLength(template.subject) + Buffer.byteLength(template.html);
}

/**
 * Throws 409 naming the cap if the tenant, whose templates are `stored`, cannot keep `candidate`:
 * a new template past either cap, or a stored one changed (it replaces the stored one of its id)
 * that grows past the bytes cap. A tenant over a cap from before it existed can still shrink or
 * rename its templates.
 */
export function checkTenantCaps(stored: Template[], candidate: Template): void {
  const replaced = stored.find((template) => template.id === candidate.id);
  const others = stored.filter((template) => template !== replaced);
  if (!replaced && others.length >= TEMPLATE_LIMITS.perTenant) {
    throw conflict(`A tenant keeps at most ${TEMPLATE_LIMITS.perTenant} templates: delete one first`);
  }
  const bytes = others.reduce((sum, template) => sum + templateBytes(template), templateBytes(candidate));
  const grows = !replaced || templateBytes(candidate) > templateBytes(replaced);
  if (bytes > TEMPLATE_LIMITS.tenantBytes && grows) {
    throw conflict(`A tenant's templates hold at most ${count(TEMPLATE_LIMITS.tenantBytes)} bytes together (names, subjects and HTML in UTF-8): with this one they would hold ${count(bytes)}`);
  }
}

/** A template in a listing: no body (GET /admin/templates/{id} has it), its size instead. */
export function templateSummary(template: Template) {
  const { html: _html, ...summary } = template;
  return { ...summary, bytes: templateBytes(template) };
}

const CURSOR = /^(\d{1,15})_([A-Za-z0-9_-]{1,100})$/;

/** The tenant's templates, newest first, a page at a time (`before`: the previous page's `nextBefore`). */
export function templatePage(templates: Template[], query: PageQuery): { templates: ReturnType<typeof templateSummary>[]; nextBefore?: string } {
  const limit = pageLimit(query);
  const cursor = query.before === undefined ? undefined : CURSOR.exec(query.before);
  if (cursor === null) throw validationFailed('before', 'must be a cursor from nextBefore');
  // Newest first; templates made in the same millisecond by id, so the cursor is (time, id).
  const key = (template: Template): [number, string] => [Date.parse(template.createdAt), template.id];
  const newestFirst = (a: [number, string], b: [number, string]) => b[0] - a[0] || (a[1] < b[1] ? 1 : a[1] > b[1] ? -1 : 0);
  const from = cursor ? ([Number(cursor[1]), cursor[2]!] as [number, string]) : undefined;
  const listed = templates.filter((template) => !from || newestFirst(from, key(template)) < 0).sort((a, b) => newestFirst(key(a), key(b)));
  const page = listed.slice(0, limit);
  const last = page[page.length - 1];
  const summaries = page.map(templateSummary);
  return listed.length > limit && last ? { templates: summaries, nextBefore: key(last).join('_') } : { templates: summaries };
}
