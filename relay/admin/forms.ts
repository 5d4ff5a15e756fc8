/**
 * A site's forms (a formKey unique on its site, reserved across gateways), each form's
 * recipients (email or WhatsApp) and webhooks (URLs checked by the egress policy, secrets stored
 * sealed and rotated with a day's overlap), and the listing of a form's stored submissions.
 */
import { randomBytes } from 'node:crypto';
import { newId as id } from '../../accounts/index.ts';
import { E164_RULE, isE164 } from '../../core/e164.ts';
import { isEmailAddress } from '../../core/email-address.ts';
import { sha256Hex } from '../../core/hash.ts';
import { conflict, notFound, validationFailed } from '../errors.ts';
import type { Channel, Form, Webhook } from '../model.ts';
import type { SubmissionQuery } from '../submissions.ts';
import { now, type Actor, type AdminContext } from './context.ts';
import { formView, webhookView } from './views.ts';

/** Unique names, reserved with an atomic create so two gateways cannot both take one. */
const FORM_KEYS = 'relay_form_keys';
/** How long a replaced webhook secret still signs calls: receivers switch within it. */
const SECRET_ROTATION_MS = 24 * 60 * 60 * 1000;

interface FormBody { formKey?: string; name?: string; active?: boolean; templateId?: string | null }
interface RecipientBody { channel: Channel; address: string; active?: boolean }
interface WebhookBody { url?: string; secret?: string; active?: boolean; rotateSecret?: boolean }

export class FormAdmin {
  constructor(private readonly c: AdminContext) {}

  async create(actor: Actor, siteId: string, body: unknown) {
    this.c.require(actor, 'admin');
    const site = this.c.site(actor, siteId);
    const input = this.c.validateBody<FormBody>('CreateForm', body);
    const formKey = input.formKey ?? `fk_${randomBytes(8).toString('base64url')}`;
    if (input.templateId) this.c.template(actor, input.templateId);
    const formId = id('form');
    const taken = this.c.store.forms.find((form) => form.siteId === site.id && form.formKey === formKey);
    if (taken || !(await this.c.store.state.create(FORM_KEYS, sha256Hex(`${site.id}/${formKey}`), { formId }))) {
      throw conflict(`A form with formKey ${formKey} already exists on this site`);
    }
    const form: Form = {
      id: formId,
      tenantId: actor.tenantId,
      siteId: site.id,
      formKey,
      name: input.name!,
      active: input.active ?? true,
      ...(input.templateId ? { templateId: input.templateId } : {}),
      recipients: [],
      webhooks: [],
      createdAt: now(),
      updatedAt: now(),
    };
    return formView(await this.c.store.forms.put(form));
  }

  list(actor: Actor, siteId: string) {
    const site = this.c.site(actor, siteId);
    return this.c.store.forms.filter((form) => form.siteId === site.id).map(formView);
  }

  get(actor: Actor, siteId: string, formId: string) {
    return formView(this.c.form(actor, siteId, formId));
  }

  async update(actor: Actor, siteId: string, formId: string, body: unknown) {
    this.c.require(actor, 'admin');
    const form = this.c.form(actor, siteId, formId);
    const input = this.c.validateBody<FormBody>('UpdateForm', body);
    if (input.templateId) this.c.template(actor, input.templateId);
    return formView(await this.c.change(this.c.store.forms, form.id, 'Form', ({ templateId: old, ...current }) => {
      const templateId = input.templateId === undefined ? old : (input.templateId ?? undefined);
      return {
        ...current,
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.active !== undefined ? { active: input.active } : {}),
        ...(templateId ? { templateId } : {}),
      };
    }));
  }

  async addRecipient(actor: Actor, siteId: string, formId: string, body: unknown) {
    this.c.require(actor, 'admin');
    const form = this.c.form(actor, siteId, formId);
    const input = this.c.validateBody<RecipientBody>('CreateRecipient', body);
    const address = normaliseAddress(input.channel, input.address);
    const recipient = { id: id('rcp'), channel: input.channel, address, active: input.active ?? true };
    await this.c.change(this.c.store.forms, form.id, 'Form', (current) => {
      if (current.recipients.some((r) => r.channel === input.channel && r.address === address)) {
        throw conflict('This recipient is already configured on the form');
      }
      return { ...current, recipients: [...current.recipients, recipient] };
    });
    return recipient;
  }

  async updateRecipient(actor: Actor, siteId: string, formId: string, recipientId: string, body: unknown) {
    this.c.require(actor, 'admin');
    const form = this.c.form(actor, siteId, formId);
    const { active } = this.c.validateBody<{ active: boolean }>('UpdateRecipient', body);
    const changed = await this.c.change(this.c.store.forms, form.id, 'Form', (current) => {
      if (!current.recipients.some((r) => r.id === recipientId)) throw notFound('Recipient');
      return { ...current, recipients: current.recipients.map((r) => (r.id === recipientId ? { ...r, active } : r)) };
    });
    return changed.recipients.find((r) => r.id === recipientId)!;
  }

  async removeRecipient(actor: Actor, siteId: string, formId: string, recipientId: string) {
    this.c.require(actor, 'admin');
    const form = this.c.form(actor, siteId, formId);
    await this.c.change(this.c.store.forms, form.id, 'Form', (current) => {
      if (!current.recipients.some((r) => r.id === recipientId)) throw notFound('Recipient');
      return { ...current, recipients: current.recipients.filter((r) => r.id !== recipientId) };
    });
  }

  /** Adds a webhook; its signing secret is returned this once. */
  async addWebhook(actor: Actor, siteId: string, formId: string, body: unknown) {
    this.c.require(actor, 'admin');
    const form = this.c.form(actor, siteId, formId);
    const input = this.c.validateBody<WebhookBody>('CreateWebhook', body);
    await this.c.requireWebhookUrl(input.url!);
    const secret = input.secret ?? newWebhookSecret();
    const webhook = { id: id('whk'), url: input.url!, secretSealed: this.c.secrets.seal(secret), active: input.active ?? true };
    await this.c.change(this.c.store.forms, form.id, 'Form', (current) => ({ ...current, webhooks: [...current.webhooks, webhook] }));
    const { secretConfigured: _configured, ...visible } = webhookView(webhook);
    return { ...visible, secret };
  }

  async updateWebhook(actor: Actor, siteId: string, formId: string, webhookId: string, body: unknown) {
    this.c.require(actor, 'admin');
    const form = this.c.form(actor, siteId, formId);
    const input = this.c.validateBody<WebhookBody>('UpdateWebhook', body);
    if (input.url !== undefined) await this.c.requireWebhookUrl(input.url);
    const secret = input.rotateSecret ? newWebhookSecret() : undefined;
    const changed = await this.c.change(this.c.store.forms, form.id, 'Form', (current) => {
      if (!current.webhooks.some((w) => w.id === webhookId)) throw notFound('Webhook');
      const update = { ...(input.url !== undefined ? { url: input.url } : {}), ...(input.active !== undefined ? { active: input.active } : {}) };
      return { ...current, webhooks: current.webhooks.map((w) => (w.id === webhookId ? { ...w, ...update, ...(secret ? this.rotated(w, secret) : {}) } : w)) };
    });
    return { ...webhookView(changed.webhooks.find((w) => w.id === webhookId)!), ...(secret ? { secret } : {}) };
  }

  async removeWebhook(actor: Actor, siteId: string, formId: string, webhookId: string) {
    this.c.require(actor, 'admin');
    const form = this.c.form(actor, siteId, formId);
    await this.c.change(this.c.store.forms, form.id, 'Form', (current) => {
      if (!current.webhooks.some((w) => w.id === webhookId)) throw notFound('Webhook');
      return { ...current, webhooks: current.webhooks.filter((w) => w.id !== webhookId) };
    });
  }

  /** A form's stored submissions, newest first, a page at a time (`nextBefore` continues). */
  listSubmissions(actor: Actor, siteId: string, formId: string, query: SubmissionQuery = {}) {
    const form = this.c.form(actor, siteId, formId);
    return this.c.submissions.list(form.tenantId, form.siteId, form.id, query);
  }

  /** The webhook with `secret` as its signing secret, the one it replaces still signing for a day. */
  private rotated(webhook: Webhook, secret: string): Partial<Webhook> {
    return { secretSealed: this.c.secrets.seal(secret), previousSecretSealed: webhook.secretSealed, previousSecretUntil: new Date(Date.now() + SECRET_ROTATION_MS).toISOString() };
  }
}

/** Standard Webhooks secret: `whsec_` and the base64 of 24 random bytes. */
function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** An email address lower-cased; a WhatsApp number as E.164. Refuses anything else. */
function normaliseAddress(channel: Channel, address: string): string {
  if (channel === 'email') {
    if (!isEmailAddress(address)) throw validationFailed('address', 'must be one email address');
    return address.toLowerCase();
  }
  if (!isE164(address)) throw validationFailed('address', `must be an E.164 number: ${E164_RULE}`);
  return address;
}
