/**
 * The relay's admin operations, for the HTTP admin API and the CLI alike. Every operation
 * runs for an Actor — a signed-in user of one tenant, or the operator at the command line —
 * and sees only that tenant: anything of another tenant is "not found", never "forbidden",
 * so its existence does not leak.
 *
 * Rights: member reads; admin also writes sites, forms, recipients, webhooks, templates and
 * API keys, and manages members and admins; owner also manages owners, the tenant and its
 * handover. The operator (CLI) may do anything within the tenant it names.
 */
import { randomBytes } from 'node:crypto';
import { CHOOSE_TENANT_MESSAGE, checkPassword, hashPassword, newId as id, oneTimePassword, refusalMessage, signIn, type Role, type Tenant, type User } from '../accounts/index.ts';
import type { AdminSessions } from './auth.ts';
import { conflict, forbidden, notFound, RelayError, unauthorized, validationFailed } from './errors.ts';
import type { CaptchaProvider, Channel, DeliverySettings, Form, RelayApiKey, Site, Template, Webhook } from './model.ts';
import type { BodyValidator } from './schemas.ts';
import type { RelayStore } from './store.ts';
import { E164_RULE, isE164 } from '../core/e164.ts';
import { isEmailAddress } from '../core/email-address.ts';
import { sha256Hex } from '../core/hash.ts';
import type { Collection } from '../state/collection.ts';
import type { PageQuery, SubmissionReader } from './submissions.ts';
import { checkData } from './data.ts';
import { overLimit } from './render.ts';
import type { MessageRenderer } from './renderer.ts';
import type { SignInLockout } from '../gateway/sign-in-lockout.ts';
import { checkTemplate, checkTenantCaps, templatePage } from './tenant-templates.ts';
import { DEFAULT_TEMPLATE } from './templates.ts';
import { Handovers } from './handover.ts';
import { RelayInbox, type InboxReader } from './inbox.ts';
import type { SecretBox } from '../core/secret-box.ts';
import { JOB_STATES, parseMailbox, type DeliveryHistory, type DeliveryJob, type JobState } from '../delivery/index.ts';

export interface Actor {
  tenantId: string;
  role: Role | 'operator';
  userId?: string;
}

/** Unique names, reserved with an atomic create so two gateways cannot both take one. */
const FORM_KEYS = 'relay_form_keys';
const API_KEY_PREFIX = 'rk_';

const now = () => new Date().toISOString();

// Public views: never a password hash, a sealed secret or a key hash.
export function userView({ passwordHash: _p, sessionVersion: _s, ...user }: User) {
  return user;
}
export function siteView({ captcha, ...site }: Site) {
  if (!captcha) return { ...site, captcha: null };
  const { secretSealed, ...visible } = captcha;
  return { ...site, captcha: { ...visible, secretConfigured: secretSealed !== undefined } };
}
/** A webhook without its sealed secrets: the current one and, after a rotation, the previous one. */
function webhookView({ secretSealed: _secret, previousSecretSealed: _previous, ...hook }: Form['webhooks'][number]) {
  return { ...hook, secretConfigured: true };
}
export function formView(form: Form) {
  return { ...form, webhooks: form.webhooks.map(webhookView) };
}
export function apiKeyView({ hash: _hash, ...key }: RelayApiKey) {
  return key;
}

interface OnboardBody { name: string; owner: { email: string; name?: string; password?: string } }
interface SiteBody { name?: string; allowedOrigins?: string[]; active?: boolean }
interface CaptchaBody { provider: CaptchaProvider; siteKey: string; secret?: string; scoreThreshold?: number }
interface FormBody { formKey?: string; name?: string; active?: boolean; templateId?: string | null }
interface RecipientBody { channel: Channel; address: string; active?: boolean }
interface WebhookBody { url?: string; secret?: string; active?: boolean; rotateSecret?: boolean }
interface DeliverySettingsBody {
  email?: { from?: string; smtpUrl?: string } | null;
  whatsapp?: { phoneNumberId: string; token: string; template?: { name: string; language: string } } | null;
}

/** The delivery history and manual retries, for the admin (bin/ wires them to storage and the delivery queue). */
export interface DeliveryAccess {
  history: DeliveryHistory;
  /** Puts the job's new series on the delivery queue, then records it queued (a refusal records nothing). */
  requeue(job: DeliveryJob): Promise<void>;
  /** The development inbox, when it is on (SLUICE_DELIVERY_INBOX). */
  inbox?: InboxReader;
}

/** How long a replaced webhook secret still signs calls: receivers switch within it. */
const SECRET_ROTATION_MS = 24 * 60 * 60 * 1000;
/** Dead jobs one "retry all" takes (a form with more is retried in several calls). */
const RETRY_ALL_LIMIT = 1000;
interface TemplateBody { name?: string; subject?: string; html?: string }
interface PreviewBody { templateId?: string; subject?: string; html?: string; data?: Record<string, unknown> }
interface UserBody { email?: string; name?: string; role?: Role; password?: string; active?: boolean }
interface ClaimBody { token: string; email: string; name?: string; password: string }

/** Whether a URL may be stored: the deployment's egress policy (delivery/egress.ts). It may look the host up, hence async. */
export type UrlCheck = (url: string) => Promise<{ ok: true } | { ok: false; reason: string }>;

/** What the deployment lets a tenant configure, given by the composition root. */
export interface DeploymentChecks {
  /** A webhook's URL, by the egress policy. */
  webhookUrl: UrlCheck;
  /** The tenant's own SMTP server, by the same policy. */
  smtpUrl: UrlCheck;
  /** Whether the server's SMTP transport may send as this From (a domain of SLUICE_SMTP_FROM_DOMAINS). */
  serverFrom: (from: string) => boolean;
}

export class RelayAdmin {
  private readonly handovers: Handovers;
  /** What the development inbox kept, for the tenant's users and the operator. */
  readonly inbox: RelayInbox;

  constructor(
    private readonly store: RelayStore,
    private readonly secrets: SecretBox,
    private readonly sessions: AdminSessions,
    private readonly validateBody: BodyValidator,
    private readonly submissions: SubmissionReader,
    private readonly checks: DeploymentChecks,
    private readonly delivery: DeliveryAccess,
    private readonly renderer: MessageRenderer,
    private readonly signInLockout: () => Promise<SignInLockout>,
  ) {
    this.inbox = new RelayInbox(delivery.inbox);
    this.handovers = new Handovers(store.state, {
      activeOwners: (tenantId) => this.activeOwners(tenantId),
      tenantExists: (tenantId) => this.store.accounts.tenants.get(tenantId) !== undefined,
      emailTaken: (tenantId, email) => this.store.accounts.userInTenant(tenantId, email) !== undefined,
      createOwner: (tenantId, { email, name, password }) => this.putNewUser(tenantId, { email, name, role: 'owner' }, password, false),
      demoteToAdmin: async (userId) => {
        await this.change(this.store.accounts.users, userId, 'User', (current) => ({ ...current, role: current.role === 'owner' ? 'admin' : current.role }));
      },
    });
  }

  // ---- tenants and sign-in ---------------------------------------------------------------

  /** Creates a tenant and its first owner (operator only). Without a password, one is made up and returned once. */
  async onboard(body: unknown) {
    const { name, owner } = this.validateBody<OnboardBody>('OnboardTenant', body);
    const email = owner.email.toLowerCase();
    const tenant: Tenant = { id: id('ten'), name, createdAt: now(), updatedAt: now() };
    const password = owner.password ?? oneTimePassword();
    // The owner first, then the tenant: a tenant is never seen without its owner.
    const user = await this.putNewUser(tenant.id, { email, name: owner.name ?? '', role: 'owner' }, password, owner.password === undefined);
    await this.store.accounts.tenants.put(tenant);
    return { tenant, owner: userView(user), ...(owner.password === undefined ? { oneTimePassword: password } : {}) };
  }

  listTenants() {
    return this.store.accounts.tenants.values();
  }

  getTenant(actor: Actor) {
    return this.tenant(actor);
  }

  async updateTenant(actor: Actor, body: unknown) {
    this.require(actor, 'owner');
    const { name } = this.validateBody<{ name: string }>('UpdateTenant', body);
    return this.change(this.store.accounts.tenants, this.tenant(actor).id, 'Tenant', (tenant) => ({ ...tenant, name }));
  }

  async login(body: unknown) {
    const input = this.validateBody<{ email: string; password: string; tenantId?: string }>('Login', body);
    // Per account, whoever guesses: counted before the password is checked, cleared by the right one.
    const lockout = await this.signInLockout();
    const attempt = await lockout.attempt(input.email);
    if (!attempt.allowed) throw new RelayError(429, 'ThrottlerException: Too Many Requests', { retryAfterSeconds: attempt.retryAfterSeconds });
    const outcome = await signIn(this.store.accounts, input);
    // One answer for an unknown email, a wrong password and a deactivated user.
    if (outcome.kind === 'refused') throw unauthorized('Invalid email or password');
    await lockout.succeeded(input.email);
    if (outcome.kind === 'choose-tenant') throw new RelayError(409, CHOOSE_TENANT_MESSAGE, { tenants: outcome.tenants.map(({ id, name }) => ({ id, name })) });
    return { ...(await this.sessions.issue(outcome.user)), user: userView(outcome.user) };
  }

  async changePassword(user: User, body: unknown) {
    const { currentPassword, newPassword } = this.validateBody<{ currentPassword: string; newPassword: string }>('ChangePassword', body);
    if (!(await checkPassword(user, currentPassword))) throw unauthorized('Current password is wrong');
    const passwordHash = await hashPassword(newPassword);
    const updated = await this.change(this.store.accounts.users, user.id, 'User', (current) => ({
      ...current,
      passwordHash,
      mustChangePassword: false,
      sessionVersion: current.sessionVersion + 1,
    }));
    // Every other session ends; this one gets a fresh token.
    return { ...(await this.sessions.issue(updated)), user: userView(updated) };
  }

  // ---- sites -----------------------------------------------------------------------------

  async createSite(actor: Actor, body: unknown) {
    this.require(actor, 'admin');
    const input = this.validateBody<SiteBody>('CreateSite', body);
    const site: Site = {
      id: id('site'),
      tenantId: actor.tenantId,
      name: input.name!,
      siteKey: `sk_${randomBytes(16).toString('base64url')}`,
      active: input.active ?? true,
      allowedOrigins: unique(input.allowedOrigins ?? []),
      createdAt: now(),
      updatedAt: now(),
    };
    return siteView(await this.store.sites.put(site));
  }

  listSites(actor: Actor) {
    return this.store.sites.filter((site) => site.tenantId === actor.tenantId).map(siteView);
  }

  getSite(actor: Actor, siteId: string) {
    return siteView(this.site(actor, siteId));
  }

  async updateSite(actor: Actor, siteId: string, body: unknown) {
    this.require(actor, 'admin');
    const site = this.site(actor, siteId);
    const input = this.validateBody<SiteBody>('UpdateSite', body);
    return siteView(await this.change(this.store.sites, site.id, 'Site', (current) => ({
      ...current,
      ...(input.name !== undefined ? { name: input.name } : {}),
      ...(input.active !== undefined ? { active: input.active } : {}),
      ...(input.allowedOrigins !== undefined ? { allowedOrigins: unique(input.allowedOrigins) } : {}),
    })));
  }

  /**
   * Sets the site's CAPTCHA provider. Without `secret`, the stored secret is kept when the
   * provider stays the same (to change the site key or threshold); with another provider the
   * site has none until one is given, and submissions are refused meanwhile.
   */
  async setCaptcha(actor: Actor, siteId: string, body: unknown) {
    this.require(actor, 'admin');
    const site = this.site(actor, siteId);
    const input = this.validateBody<CaptchaBody>('SetCaptcha', body);
    if (input.scoreThreshold !== undefined && input.provider !== 'recaptcha_v3') {
      throw validationFailed('scoreThreshold', 'applies to recaptcha_v3 only');
    }
    const sealed = input.secret === undefined ? undefined : this.secrets.seal(input.secret);
    return siteView(await this.change(this.store.sites, site.id, 'Site', (current) => {
      const secretSealed = sealed ?? (current.captcha?.provider === input.provider ? current.captcha.secretSealed : undefined);
      const captcha = {
        provider: input.provider,
        siteKey: input.siteKey,
        ...(secretSealed !== undefined ? { secretSealed } : {}),
        ...(input.provider === 'recaptcha_v3' ? { scoreThreshold: input.scoreThreshold ?? 0.5 } : {}),
      };
      return { ...current, captcha };
    }));
  }

  /** Removes the provider's secret but keeps the provider: submissions are refused (503) until a secret is set. */
  async removeCaptchaSecret(actor: Actor, siteId: string) {
    this.require(actor, 'admin');
    const site = this.site(actor, siteId);
    return siteView(await this.change(this.store.sites, site.id, 'Site', (current) => {
      if (!current.captcha) throw notFound('CAPTCHA configuration');
      const { secretSealed: _removed, ...captcha } = current.captcha;
      return { ...current, captcha };
    }));
  }

  async removeCaptcha(actor: Actor, siteId: string) {
    this.require(actor, 'admin');
    const site = this.site(actor, siteId);
    return siteView(await this.change(this.store.sites, site.id, 'Site', ({ captcha: _removed, ...current }) => current));
  }

  // ---- forms, recipients, webhooks --------------------------------------------------------

  async createForm(actor: Actor, siteId: string, body: unknown) {
    this.require(actor, 'admin');
    const site = this.site(actor, siteId);
    const input = this.validateBody<FormBody>('CreateForm', body);
    const formKey = input.formKey ?? `fk_${randomBytes(8).toString('base64url')}`;
    if (input.templateId) this.template(actor, input.templateId);
    const formId = id('form');
    const taken = this.store.forms.find((form) => form.siteId === site.id && form.formKey === formKey);
    if (taken || !(await this.store.state.create(FORM_KEYS, sha256Hex(`${site.id}/${formKey}`), { formId }))) {
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
    return formView(await this.store.forms.put(form));
  }

  listForms(actor: Actor, siteId: string) {
    const site = this.site(actor, siteId);
    return this.store.forms.filter((form) => form.siteId === site.id).map(formView);
  }

  getForm(actor: Actor, siteId: string, formId: string) {
    return formView(this.form(actor, siteId, formId));
  }

  async updateForm(actor: Actor, siteId: string, formId: string, body: unknown) {
    this.require(actor, 'admin');
    const form = this.form(actor, siteId, formId);
    const input = this.validateBody<FormBody>('UpdateForm', body);
    if (input.templateId) this.template(actor, input.templateId);
    return formView(await this.change(this.store.forms, form.id, 'Form', ({ templateId: old, ...current }) => {
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
    this.require(actor, 'admin');
    const form = this.form(actor, siteId, formId);
    const input = this.validateBody<RecipientBody>('CreateRecipient', body);
    const address = normaliseAddress(input.channel, input.address);
    const recipient = { id: id('rcp'), channel: input.channel, address, active: input.active ?? true };
    await this.change(this.store.forms, form.id, 'Form', (current) => {
      if (current.recipients.some((r) => r.channel === input.channel && r.address === address)) {
        throw conflict('This recipient is already configured on the form');
      }
      return { ...current, recipients: [...current.recipients, recipient] };
    });
    return recipient;
  }

  async updateRecipient(actor: Actor, siteId: string, formId: string, recipientId: string, body: unknown) {
    this.require(actor, 'admin');
    const form = this.form(actor, siteId, formId);
    const { active } = this.validateBody<{ active: boolean }>('UpdateRecipient', body);
    const changed = await this.change(this.store.forms, form.id, 'Form', (current) => {
      if (!current.recipients.some((r) => r.id === recipientId)) throw notFound('Recipient');
      return { ...current, recipients: current.recipients.map((r) => (r.id === recipientId ? { ...r, active } : r)) };
    });
    return changed.recipients.find((r) => r.id === recipientId)!;
  }

  async removeRecipient(actor: Actor, siteId: string, formId: string, recipientId: string) {
    this.require(actor, 'admin');
    const form = this.form(actor, siteId, formId);
    await this.change(this.store.forms, form.id, 'Form', (current) => {
      if (!current.recipients.some((r) => r.id === recipientId)) throw notFound('Recipient');
      return { ...current, recipients: current.recipients.filter((r) => r.id !== recipientId) };
    });
  }

  /** Adds a webhook; its signing secret is returned this once. */
  async addWebhook(actor: Actor, siteId: string, formId: string, body: unknown) {
    this.require(actor, 'admin');
    const form = this.form(actor, siteId, formId);
    const input = this.validateBody<WebhookBody>('CreateWebhook', body);
    await this.requireWebhookUrl(input.url!);
    const secret = input.secret ?? newWebhookSecret();
    const webhook = { id: id('whk'), url: input.url!, secretSealed: this.secrets.seal(secret), active: input.active ?? true };
    await this.change(this.store.forms, form.id, 'Form', (current) => ({ ...current, webhooks: [...current.webhooks, webhook] }));
    const { secretConfigured: _configured, ...visible } = webhookView(webhook);
    return { ...visible, secret };
  }

  async updateWebhook(actor: Actor, siteId: string, formId: string, webhookId: string, body: unknown) {
    this.require(actor, 'admin');
    const form = this.form(actor, siteId, formId);
    const input = this.validateBody<WebhookBody>('UpdateWebhook', body);
    if (input.url !== undefined) await this.requireWebhookUrl(input.url);
    const secret = input.rotateSecret ? newWebhookSecret() : undefined;
    const changed = await this.change(this.store.forms, form.id, 'Form', (current) => {
      if (!current.webhooks.some((w) => w.id === webhookId)) throw notFound('Webhook');
      const update = { ...(input.url !== undefined ? { url: input.url } : {}), ...(input.active !== undefined ? { active: input.active } : {}) };
      return { ...current, webhooks: current.webhooks.map((w) => (w.id === webhookId ? { ...w, ...update, ...(secret ? this.rotated(w, secret) : {}) } : w)) };
    });
    return { ...webhookView(changed.webhooks.find((w) => w.id === webhookId)!), ...(secret ? { secret } : {}) };
  }

  async removeWebhook(actor: Actor, siteId: string, formId: string, webhookId: string) {
    this.require(actor, 'admin');
    const form = this.form(actor, siteId, formId);
    await this.change(this.store.forms, form.id, 'Form', (current) => {
      if (!current.webhooks.some((w) => w.id === webhookId)) throw notFound('Webhook');
      return { ...current, webhooks: current.webhooks.filter((w) => w.id !== webhookId) };
    });
  }

  /** A form's stored submissions, newest first, a page at a time (`nextBefore` continues). */
  listSubmissions(actor: Actor, siteId: string, formId: string, query: PageQuery = {}) {
    const form = this.form(actor, siteId, formId);
    return this.submissions.list(form.tenantId, form.siteId, form.id, query);
  }

  // ---- delivery ----------------------------------------------------------------------------

  /** A form's delivery jobs, dead first (`state` narrows to one state). */
  async listJobs(actor: Actor, siteId: string, formId: string, query: { state?: string; limit?: number }) {
    const form = this.form(actor, siteId, formId);
    const limit = query.limit ?? 100;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw validationFailed('limit', 'must be a whole number from 1 to 1000');
    if (query.state !== undefined && !(JOB_STATES as readonly string[]).includes(query.state)) throw validationFailed('state', `must be one of ${JOB_STATES.join(', ')}`);
    return { jobs: await this.delivery.history.jobs(form.tenantId, form.id, { limit, ...(query.state ? { state: query.state as JobState } : {}) }) };
  }

  /** One job of the tenant with every attempt of every series. */
  async getJob(actor: Actor, jobId: string) {
    const found = await this.delivery.history.job(actor.tenantId, jobId);
    if (!found) throw notFound('Job');
    const { job, state } = found;
    return {
      jobId: job.id, submissionId: job.submissionId, formId: job.formId, kind: job.kind, channel: job.channel, destination: job.destination,
      createdAt: job.createdAt, state, series: job.series, attempts: await this.delivery.history.attempts(actor.tenantId, jobId),
    };
  }

  /** Retries a dead job: a fresh series of attempts. */
  async retryJob(actor: Actor, jobId: string) {
    this.require(actor, 'admin');
    const found = await this.delivery.history.job(actor.tenantId, jobId);
    if (!found) throw notFound('Job');
    if (found.state !== 'dead') throw conflict(`Only a dead job can be retried; this one is ${found.state}`);
    const series = found.job.series + 1;
    await this.delivery.requeue({ ...found.job, series });
    return { jobId, series, state: 'queued' };
  }

  /** Retries every dead job of a form (up to RETRY_ALL_LIMIT a call). */
  async retryDeadJobs(actor: Actor, siteId: string, formId: string) {
    this.require(actor, 'admin');
    const form = this.form(actor, siteId, formId);
    const dead = await this.delivery.history.jobs(form.tenantId, form.id, { state: 'dead', limit: RETRY_ALL_LIMIT });
    let retried = 0;
    for (const { job, state } of await this.delivery.history.created(form.tenantId, dead.map((view) => view.jobId))) {
      if (state !== 'dead') continue; // retried meanwhile
      await this.delivery.requeue({ ...job, series: job.series + 1 });
      retried++;
    }
    return { retried, more: dead.length === RETRY_ALL_LIMIT };
  }

  getDeliverySettings(actor: Actor) {
    return deliverySettingsView(this.store.deliverySettings.get(actor.tenantId), actor.tenantId);
  }

  /** Sets the tenant's email and WhatsApp settings; a part given as null is removed (the server's defaults apply). */
  async putDeliverySettings(actor: Actor, body: unknown) {
    this.require(actor, 'admin');
    const input = this.validateBody<DeliverySettingsBody>('PutDeliverySettings', body);
    const current = this.store.deliverySettings.get(actor.tenantId) ?? { id: actor.tenantId, tenantId: actor.tenantId, updatedAt: now() };
    const next: DeliverySettings = { ...current, updatedAt: now() };
    if (input.email === null) delete next.email;
    else if (input.email) {
      const { from, smtpUrl } = input.email;
      if (from !== undefined && !parseMailbox(from)) throw validationFailed('email.from', 'must be one address, `relay@example.com` or `Name <relay@example.com>`');
      if (smtpUrl !== undefined) await this.requireSmtpUrl(smtpUrl);
      next.email = { ...current.email, ...(from !== undefined ? { from } : {}), ...(smtpUrl !== undefined ? { smtpUrlSealed: this.secrets.seal(smtpUrl) } : {}) };
      // Through the server's own transport a From is the operator's name on the line: only its verified domains.
      if (next.email.from !== undefined && next.email.smtpUrlSealed === undefined && !this.checks.serverFrom(next.email.from)) {
        throw validationFailed('email.from', 'must be in a domain the operator verified for its SMTP server (SLUICE_SMTP_FROM_DOMAINS), unless email.smtpUrl names your own server');
      }
    }
    if (input.whatsapp === null) delete next.whatsapp;
    else if (input.whatsapp) {
      const { phoneNumberId, token, template } = input.whatsapp;
      next.whatsapp = { phoneNumberId, tokenSealed: this.secrets.seal(token), ...(template ? { template } : {}) };
    }
    await this.store.deliverySettings.put(next);
    return deliverySettingsView(next, actor.tenantId);
  }

  /** The webhook with `secret` as its signing secret, the one it replaces still signing for a day. */
  private rotated(webhook: Webhook, secret: string): Partial<Webhook> {
    return { secretSealed: this.secrets.seal(secret), previousSecretSealed: webhook.secretSealed, previousSecretUntil: new Date(Date.now() + SECRET_ROTATION_MS).toISOString() };
  }

  // ---- templates -------------------------------------------------------------------------

  /** Creates a template; 409 past the tenant's caps (tenant-templates.ts). */
  async createTemplate(actor: Actor, body: unknown) {
    this.require(actor, 'admin');
    const input = this.validateBody<Required<TemplateBody>>('CreateTemplate', body);
    checkTemplate('subject', input.subject);
    checkTemplate('html', input.html);
    const template: Template = { id: id('tpl'), tenantId: actor.tenantId, ...pick(input, ['name', 'subject', 'html']), createdAt: now(), updatedAt: now() };
    checkTenantCaps(this.tenantTemplates(actor), template);
    return this.store.templates.put(template);
  }

  /** The tenant's templates, newest first, a page at a time, without their bodies. */
  listTemplates(actor: Actor, query: PageQuery = {}) {
    return templatePage(this.tenantTemplates(actor), query);
  }

  getTemplate(actor: Actor, templateId: string) {
    return this.template(actor, templateId);
  }

  async updateTemplate(actor: Actor, templateId: string, body: unknown) {
    this.require(actor, 'admin');
    const template = this.template(actor, templateId);
    const input = this.validateBody<TemplateBody>('UpdateTemplate', body);
    if (input.subject !== undefined) checkTemplate('subject', input.subject);
    if (input.html !== undefined) checkTemplate('html', input.html);
    return this.change(this.store.templates, template.id, 'Template', (current) => {
      const changed = { ...current, ...pick(input, ['name', 'subject', 'html']) };
      checkTenantCaps(this.tenantTemplates(actor), changed);
      return changed;
    });
  }

  /** Deletes a template no form uses (a form's template would otherwise vanish under it). */
  async deleteTemplate(actor: Actor, templateId: string) {
    this.require(actor, 'admin');
    const template = this.template(actor, templateId);
    const users = this.store.forms.filter((form) => form.templateId === template.id);
    if (users.length > 0) throw conflict(`The template is used by ${users.length} form(s): set their templateId to another template or null first`);
    await this.store.templates.delete(template.id);
  }

  /**
   * Renders a stored template, or the given subject and html, with sample data (as a submission's
   * `data`), as a delivery would: 422 when the message would be over its size limit. Admins only:
   * it costs the server a render.
   */
  async previewTemplate(actor: Actor, body: unknown) {
    this.require(actor, 'admin');
    const input = this.validateBody<PreviewBody>('PreviewTemplate', body);
    const base = input.templateId ? this.template(actor, input.templateId) : DEFAULT_TEMPLATE;
    const subject = input.subject ?? base.subject;
    const html = input.html ?? base.html;
    checkTemplate('subject', subject);
    checkTemplate('html', html);
    const data = input.data ?? {};
    checkData(data);
    const rendered = await this.renderer.render({ template: { subject, html }, data });
    if (!rendered.ok) throw new RelayError(422, `The rendered message ${overLimit(rendered.chars)}`);
    return rendered.message;
  }

  private tenantTemplates(actor: Actor): Template[] {
    return this.store.templates.filter((template) => template.tenantId === actor.tenantId);
  }

  // ---- users -----------------------------------------------------------------------------

  /** Creates (invites) a user; without a password, a one-time password is returned once. */
  async createUser(actor: Actor, body: unknown) {
    const input = this.validateBody<UserBody>('CreateUser', body);
    this.requireUserRights(actor, input.role!);
    const email = input.email!.toLowerCase();
    const password = input.password ?? oneTimePassword();
    const user = await this.putNewUser(actor.tenantId, { email, name: input.name ?? '', role: input.role! }, password, input.password === undefined);
    return { user: userView(user), ...(input.password === undefined ? { oneTimePassword: password } : {}) };
  }

  listUsers(actor: Actor) {
    return this.store.accounts.users.filter((user) => user.tenantId === actor.tenantId).map(userView);
  }

  getUser(actor: Actor, userId: string) {
    return userView(this.user(actor, userId));
  }

  async updateUser(actor: Actor, userId: string, body: unknown) {
    const user = this.user(actor, userId);
    const input = this.validateBody<UserBody>('UpdateUser', body);
    this.requireUserRights(actor, user.role);
    if (input.role) this.requireUserRights(actor, input.role);
    const demotesOrRemovesOwner = user.role === 'owner' && ((input.role && input.role !== 'owner') || input.active === false);
    if (demotesOrRemovesOwner && this.activeOwners(actor.tenantId).length === 1) {
      throw conflict('A tenant keeps at least one active owner');
    }
    return userView(await this.change(this.store.accounts.users, user.id, 'User', (current) => ({
      ...current,
      ...(input.name !== undefined ? { name: input.name } : {}),
      ...(input.role !== undefined ? { role: input.role } : {}),
      ...(input.active !== undefined ? { active: input.active } : {}),
      // A deactivation ends the user's sessions.
      sessionVersion: input.active === false && current.active ? current.sessionVersion + 1 : current.sessionVersion,
    })));
  }

  // ---- API keys --------------------------------------------------------------------------

  /** Issues a key bound to one site; the key is returned this once and stored hashed. */
  async createApiKey(actor: Actor, body: unknown) {
    this.require(actor, 'admin');
    const input = this.validateBody<{ siteId: string; name: string }>('CreateApiKey', body);
    const site = this.site(actor, input.siteId);
    const apiKey = API_KEY_PREFIX + randomBytes(32).toString('base64url');
    const record: RelayApiKey = {
      id: id('key'),
      tenantId: actor.tenantId,
      siteId: site.id,
      name: input.name,
      hash: sha256Hex(apiKey),
      prefix: apiKey.slice(0, API_KEY_PREFIX.length + 6),
      createdAt: now(),
      updatedAt: now(),
    };
    await this.store.apiKeys.put(record);
    return { ...apiKeyView(record), apiKey };
  }

  listApiKeys(actor: Actor) {
    return this.store.apiKeys.filter((key) => key.tenantId === actor.tenantId).map(apiKeyView);
  }

  async revokeApiKey(actor: Actor, keyId: string) {
    this.require(actor, 'admin');
    const key = this.store.apiKeys.get(keyId);
    if (!key || key.tenantId !== actor.tenantId) throw notFound('API key');
    if (key.revokedAt) return apiKeyView(key);
    return apiKeyView(await this.change(this.store.apiKeys, key.id, 'API key', (current) => ({ ...current, revokedAt: current.revokedAt ?? now() })));
  }

  // ---- handover (relay/handover.ts) ------------------------------------------------------

  /** A single-use claim token with which the tenant's client becomes its owner (POST /api/v1/admin/claim); shown once. */
  createHandover(actor: Actor) {
    this.require(actor, 'owner');
    return this.handovers.create(actor.tenantId, actor.userId ?? 'operator');
  }

  /** The tenant's claim tokens that could still be redeemed (never the tokens themselves). */
  listHandovers(actor: Actor) {
    this.require(actor, 'owner');
    return this.handovers.list(actor.tenantId);
  }

  revokeHandover(actor: Actor, claimId: string) {
    this.require(actor, 'owner');
    return this.handovers.revoke(actor.tenantId, claimId);
  }

  /** Redeems a claim: the claimant becomes an owner, the owners who handed over become admins. */
  async claim(body: unknown) {
    const input = this.validateBody<ClaimBody>('ClaimTenant', body);
    const user = await this.handovers.redeem(input.token, { email: input.email.toLowerCase(), name: input.name ?? '', password: input.password });
    return { tenant: this.store.accounts.tenants.get(user.tenantId), ...(await this.sessions.issue(user)), user: userView(user) };
  }

  // ---- helpers ---------------------------------------------------------------------------

  /** Creates a user; 409 if the email is taken in the tenant (reserved atomically, across gateways). */
  private async putNewUser(tenantId: string, fields: { email: string; name: string; role: Role }, password: string, oneTime: boolean): Promise<User> {
    const user = await this.store.accounts.createUser(tenantId, { ...fields, password, oneTime });
    if (!user) throw conflict('A user with this email already exists');
    return user;
  }

  /**
   * Changes one stored record with compare-and-set (StateMirror.modify): `change` runs on the
   * stored record — again if another writer got in first — so concurrent changes all land.
   */
  private change<T extends { id: string; updatedAt: string }>(collection: Collection<T>, recordId: string, what: string, change: (current: T) => T): Promise<T> {
    return collection.modify(recordId, (current) => {
      if (!current) throw notFound(what);
      return { ...change(current), updatedAt: now() };
    });
  }

  private activeOwners(tenantId: string): User[] {
    return this.store.accounts.users.filter((user) => user.tenantId === tenantId && user.role === 'owner' && user.active);
  }

  /** Throws 403 unless the actor has at least `needed` rights. */
  private require(actor: Actor, needed: 'admin' | 'owner'): void {
    if (actor.role === 'operator' || actor.role === 'owner') return;
    if (needed === 'admin' && actor.role === 'admin') return;
    throw forbidden(refusalMessage(needed));
  }

  /** Throws 400 on `url` unless the egress policy would let a webhook reach it. */
  private async requireWebhookUrl(url: string): Promise<void> {
    const verdict = await this.checks.webhookUrl(url);
    if (!verdict.ok) throw validationFailed('url', `must be an http(s) URL of a public host, without credentials (${verdict.reason})`);
  }

  /** Throws 400 on `url` unless the egress policy would let the tenant's SMTP transport reach it. */
  private async requireSmtpUrl(url: string): Promise<void> {
    const verdict = await this.checks.smtpUrl(url);
    if (!verdict.ok) throw validationFailed('email.smtpUrl', `must be an smtp(s) URL of a public host (${verdict.reason})`);
  }

  /** Owners manage everyone; admins manage members and admins; members manage no one. */
  private requireUserRights(actor: Actor, targetRole: Role): void {
    this.require(actor, targetRole === 'owner' ? 'owner' : 'admin');
  }

  private tenant(actor: Actor): Tenant {
    const tenant = this.store.accounts.tenants.get(actor.tenantId);
    if (!tenant) throw notFound('Tenant');
    return tenant;
  }

  private site(actor: Actor, siteId: string): Site {
    const site = this.store.sites.get(siteId);
    if (!site || site.tenantId !== actor.tenantId) throw notFound('Site');
    return site;
  }

  private form(actor: Actor, siteId: string, formId: string): Form {
    const site = this.site(actor, siteId);
    const form = this.store.forms.get(formId);
    if (!form || form.siteId !== site.id || form.tenantId !== actor.tenantId) throw notFound('Form');
    return form;
  }

  private template(actor: Actor, templateId: string): Template {
    const template = this.store.templates.get(templateId);
    if (!template || template.tenantId !== actor.tenantId) throw notFound('Template');
    return template;
  }

  private user(actor: Actor, userId: string): User {
    const user = this.store.accounts.users.get(userId);
    if (!user || user.tenantId !== actor.tenantId) throw notFound('User');
    return user;
  }
}

/** Standard Webhooks secret: `whsec_` and the base64 of 24 random bytes. */
function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** What the admin shows of delivery settings: never a token or an SMTP URL (it holds a password). */
function deliverySettingsView(settings: DeliverySettings | undefined, tenantId: string) {
  return {
    tenantId,
    email: settings?.email ? { from: settings.email.from ?? null, smtpServerConfigured: settings.email.smtpUrlSealed !== undefined } : null,
    whatsapp: settings?.whatsapp ? { phoneNumberId: settings.whatsapp.phoneNumberId, tokenConfigured: true, template: settings.whatsapp.template ?? null } : null,
    updatedAt: settings?.updatedAt ?? null,
  };
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}

function pick<T extends object, K extends keyof T>(value: T, keys: K[]): Pick<T, K> {
  return Object.fromEntries(keys.filter((k) => value[k] !== undefined).map((k) => [k, value[k]])) as Pick<T, K>;
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

