/**
 * A tenant's message templates: checked when stored (tenant-templates.ts: what a template may
 * hold, the tenant's caps), listed a page at a time, deleted only when no form uses them, and
 * previewed with sample data as a delivery would render them.
 */
import { newId as id } from '../../accounts/index.ts';
import { checkData } from '../data.ts';
import { conflict, RelayError } from '../errors.ts';
import type { Template } from '../model.ts';
import { overLimit } from '../render.ts';
import type { PageQuery } from '../submissions.ts';
import { checkTemplate, checkTenantCaps, templatePage } from '../tenant-templates.ts';
import { DEFAULT_TEMPLATE } from '../templates.ts';
import { now, type Actor, type AdminContext } from './context.ts';

interface TemplateBody { name?: string; subject?: string; html?: string }
interface PreviewBody { templateId?: string; subject?: string; html?: string; data?: Record<string, unknown> }

export class TemplateAdmin {
  constructor(private readonly c: AdminContext) {}

  /** Creates a template; 409 past the tenant's caps (tenant-templates.ts). */
  async create(actor: Actor, body: unknown) {
    this.c.require(actor, 'admin');
    const input = this.c.validateBody<Required<TemplateBody>>('CreateTemplate', body);
    checkTemplate('subject', input.subject);
    checkTemplate('html', input.html);
    const template: Template = { id: id('tpl'), tenantId: actor.tenantId, ...pick(input, ['name', 'subject', 'html']), createdAt: now(), updatedAt: now() };
    checkTenantCaps(this.tenantTemplates(actor), template);
    return this.c.store.templates.put(template);
  }

  /** The tenant's templates, newest first, a page at a time, without their bodies. */
  list(actor: Actor, query: PageQuery = {}) {
    return templatePage(this.tenantTemplates(actor), query);
  }

  get(actor: Actor, templateId: string) {
    return this.c.template(actor, templateId);
  }

  async update(actor: Actor, templateId: string, body: unknown) {
    this.c.require(actor, 'admin');
    const template = this.c.template(actor, templateId);
    const input = this.c.validateBody<TemplateBody>('UpdateTemplate', body);
    if (input.subject !== undefined) checkTemplate('subject', input.subject);
    if (input.html !== undefined) checkTemplate('html', input.html);
    return this.c.change(this.c.store.templates, template.id, 'Template', (current) => {
      const changed = { ...current, ...pick(input, ['name', 'subject', 'html']) };
      checkTenantCaps(this.tenantTemplates(actor), changed);
      return changed;
    });
  }

  /** Deletes a template no form uses (a form's template would otherwise vanish under it). */
  async delete(actor: Actor, templateId: string) {
    this.c.require(actor, 'admin');
    const template = this.c.template(actor, templateId);
    const users = this.c.store.forms.filter((form) => form.templateId === template.id);
    if (users.length > 0) throw conflict(`The template is used by ${users.length} form(s): set their templateId to another template or null first`);
    await this.c.store.templates.delete(template.id);
  }

  /**
   * Renders a stored template, or the given subject and html, with sample data (as a submission's
   * `data`), as a delivery would: 422 when the message would be over its size limit. Admins only:
   * it costs the server a render.
   */
  async preview(actor: Actor, body: unknown) {
    this.c.require(actor, 'admin');
    const input = this.c.validateBody<PreviewBody>('PreviewTemplate', body);
    const base = input.templateId ? this.c.template(actor, input.templateId) : DEFAULT_TEMPLATE;
    const subject = input.subject ?? base.subject;
    const html = input.html ?? base.html;
    checkTemplate('subject', subject);
    checkTemplate('html', html);
    const data = input.data ?? {};
    checkData(data);
    const rendered = await this.c.renderer.render({ template: { subject, html }, data });
    if (!rendered.ok) throw new RelayError(422, `The rendered message ${overLimit(rendered.chars)}`);
    return rendered.message;
  }

  private tenantTemplates(actor: Actor): Template[] {
    return this.c.store.templates.filter((template) => template.tenantId === actor.tenantId);
  }
}

function pick<T extends object, K extends keyof T>(value: T, keys: K[]): Pick<T, K> {
  return Object.fromEntries(keys.filter((k) => value[k] !== undefined).map((k) => [k, value[k]])) as Pick<T, K>;
}
