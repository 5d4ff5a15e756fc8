/**
 * What the relay's admin resources share: the parts they are given (the store, sealed secrets,
 * sessions, the body validator, the deployment's checks, delivery), who calls (`Actor`), and the
 * checks every operation starts with — the actor's rights, and the tenant's own records looked
 * up so that anything of another tenant is "not found", never "forbidden" (its existence does
 * not leak) — and the one way a stored record is changed (compare-and-set).
 */
import { refusalMessage, type Role, type Tenant, type User } from '../../accounts/index.ts';
import type { SecretBox } from '../../core/secret-box.ts';
import type { DeliveryHistory, DeliveryJob } from '../../delivery/index.ts';
import type { SignInLockout } from '../../gateway/sign-in-lockout.ts';
import type { Collection } from '../../state/collection.ts';
import type { AdminSessions } from '../auth.ts';
import { conflict, forbidden, notFound, validationFailed } from '../errors.ts';
import type { InboxReader } from '../inbox.ts';
import type { Form, Site, Template } from '../model.ts';
import type { MessageRenderer } from '../renderer.ts';
import type { BodyValidator } from '../schemas.ts';
import type { RelayStore } from '../store.ts';
import type { SubmissionReader } from '../submissions.ts';

/** Who calls: a signed-in user of one tenant, or the operator at the command line (any right within the tenant it names). */
export interface Actor {
  tenantId: string;
  role: Role | 'operator';
  userId?: string;
}

/** The delivery history and manual retries, for the admin (bin/ wires them to storage and the delivery queue). */
export interface DeliveryAccess {
  history: DeliveryHistory;
  /** Puts the job's new series on the delivery queue, then records it queued (a refusal records nothing). */
  requeue(job: DeliveryJob): Promise<void>;
  /** The development inbox, when it is on (SLUICE_DELIVERY_INBOX). */
  inbox?: InboxReader;
}

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

export const now = () => new Date().toISOString();

export class AdminContext {
  constructor(
    readonly store: RelayStore,
    readonly secrets: SecretBox,
    readonly sessions: AdminSessions,
    readonly validateBody: BodyValidator,
    readonly submissions: SubmissionReader,
    readonly checks: DeploymentChecks,
    readonly delivery: DeliveryAccess,
    readonly renderer: MessageRenderer,
    readonly signInLockout: () => Promise<SignInLockout>,
  ) {}

  /** Throws 403 unless the actor has at least `needed` rights. */
  require(actor: Actor, needed: 'admin' | 'owner'): void {
    if (actor.role === 'operator' || actor.role === 'owner') return;
    if (needed === 'admin' && actor.role === 'admin') return;
    throw forbidden(refusalMessage(needed));
  }


  /** Throws 400 on `url` unless the egress policy would let a webhook reach it. */
  async requireWebhookUrl(url: string): Promise<void> {
    const verdict = await this.checks.webhookUrl(url);
    if (!verdict.ok) throw validationFailed('url', `must be an http(s) URL of a public host, without credentials (${verdict.reason})`);
  }

  /** Throws 400 on `url` unless the egress policy would let the tenant's SMTP transport reach it. */
  async requireSmtpUrl(url: string): Promise<void> {
    const verdict = await this.checks.smtpUrl(url);
    if (!verdict.ok) throw validationFailed('email.smtpUrl', `must be an smtp(s) URL of a public host (${verdict.reason})`);
  }

  tenant(actor: Actor): Tenant {
    const tenant = this.store.accounts.tenants.get(actor.tenantId);
    if (!tenant) throw notFound('Tenant');
    return tenant;
  }

  site(actor: Actor, siteId: string): Site {
    const site = this.store.sites.get(siteId);
    if (!site || site.tenantId !== actor.tenantId) throw notFound('Site');
    return site;
  }

  form(actor: Actor, siteId: string, formId: string): Form {
    const site = this.site(actor, siteId);
    const form = this.store.forms.get(formId);
    if (!form || form.siteId !== site.id || form.tenantId !== actor.tenantId) throw notFound('Form');
    return form;
  }

  template(actor: Actor, templateId: string): Template {
    const template = this.store.templates.get(templateId);
    if (!template || template.tenantId !== actor.tenantId) throw notFound('Template');
    return template;
  }

  user(actor: Actor, userId: string): User {
    const user = this.store.accounts.users.get(userId);
    if (!user || user.tenantId !== actor.tenantId) throw notFound('User');
    return user;
  }

  activeOwners(tenantId: string): User[] {
    return this.store.accounts.activeOwners(tenantId);
  }

  /** Creates a user; 409 if the email is taken in the tenant (reserved atomically, across gateways). */
  async putNewUser(tenantId: string, fields: { email: string; name: string; role: Role }, password: string, oneTime: boolean): Promise<User> {
    const user = await this.store.accounts.createUser(tenantId, { ...fields, password, oneTime });
    if (!user) throw conflict('A user with this email already exists');
    return user;
  }

  /**
   * Changes one stored record with compare-and-set (StateMirror.modify): `change` runs on the
   * stored record — again if another writer got in first — so concurrent changes all land.
   */
  change<T extends { id: string; updatedAt: string }>(collection: Collection<T>, recordId: string, what: string, change: (current: T) => T): Promise<T> {
    return collection.modify(recordId, (current) => {
      if (!current) throw notFound(what);
      return { ...change(current), updatedAt: now() };
    });
  }
}
