/**
 * Delivery as the admin sees it: a form's jobs by state, one job with its attempts, manual
 * retries of dead jobs (a fresh series each), and the tenant's delivery settings — its From
 * and own SMTP server (checked by the egress policy), its WhatsApp account — with every
 * token and SMTP URL stored sealed.
 */
import { JOB_STATES, parseMailbox, type JobState } from '../../delivery/index.ts';
import { conflict, notFound, validationFailed } from '../errors.ts';
import type { DeliverySettings } from '../model.ts';
import { now, type Actor, type AdminContext } from './context.ts';
import { deliverySettingsView } from './views.ts';

/** Dead jobs one "retry all" takes (a form with more is retried in several calls). */
const RETRY_ALL_LIMIT = 1000;

interface DeliverySettingsBody {
  email?: { from?: string; smtpUrl?: string } | null;
  whatsapp?: { phoneNumberId: string; token: string; template?: { name: string; language: string } } | null;
}

export class DeliveryAdmin {
  constructor(private readonly c: AdminContext) {}

  /** A form's delivery jobs, dead first (`state` narrows to one state). */
  async listJobs(actor: Actor, siteId: string, formId: string, query: { state?: string; limit?: number }) {
    const form = this.c.form(actor, siteId, formId);
    const limit = query.limit ?? 100;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw validationFailed('limit', 'must be a whole number from 1 to 1000');
    if (query.state !== undefined && !(JOB_STATES as readonly string[]).includes(query.state)) throw validationFailed('state', `must be one of ${JOB_STATES.join(', ')}`);
    return { jobs: await this.c.delivery.history.jobs(form.tenantId, form.id, { limit, ...(query.state ? { state: query.state as JobState } : {}) }) };
  }

  /** One job of the tenant with every attempt of every series. */
  async getJob(actor: Actor, jobId: string) {
    const found = await this.c.delivery.history.job(actor.tenantId, jobId);
    if (!found) throw notFound('Job');
    const { job, state } = found;
    return {
      jobId: job.id, submissionId: job.submissionId, formId: job.formId, kind: job.kind, channel: job.channel, destination: job.destination,
      createdAt: job.createdAt, state, series: job.series, attempts: await this.c.delivery.history.attempts(actor.tenantId, jobId),
    };
  }

  /** Retries a dead job: a fresh series of attempts. */
  async retryJob(actor: Actor, jobId: string) {
    this.c.require(actor, 'admin');
    const found = await this.c.delivery.history.job(actor.tenantId, jobId);
    if (!found) throw notFound('Job');
    if (found.state !== 'dead') throw conflict(`Only a dead job can be retried; this one is ${found.state}`);
    const series = found.job.series + 1;
    await this.c.delivery.requeue({ ...found.job, series });
    return { jobId, series, state: 'queued' };
  }

  /** Retries every dead job of a form (up to RETRY_ALL_LIMIT a call). */
  async retryDeadJobs(actor: Actor, siteId: string, formId: string) {
    this.c.require(actor, 'admin');
    const form = this.c.form(actor, siteId, formId);
    const dead = await this.c.delivery.history.jobs(form.tenantId, form.id, { state: 'dead', limit: RETRY_ALL_LIMIT });
    let retried = 0;
    for (const { job, state } of await this.c.delivery.history.created(form.tenantId, dead.map((view) => view.jobId))) {
      if (state !== 'dead') continue; // retried meanwhile
      await this.c.delivery.requeue({ ...job, series: job.series + 1 });
      retried++;
    }
    return { retried, more: dead.length === RETRY_ALL_LIMIT };
  }

  getSettings(actor: Actor) {
    return deliverySettingsView(this.c.store.deliverySettings.get(actor.tenantId), actor.tenantId);
  }

  /** Sets the tenant's email and WhatsApp settings; a part given as null is removed (the server's defaults apply). */
  async putSettings(actor: Actor, body: unknown) {
    this.c.require(actor, 'admin');
    const input = this.c.validateBody<DeliverySettingsBody>('PutDeliverySettings', body);
    const current = this.c.store.deliverySettings.get(actor.tenantId) ?? { id: actor.tenantId, tenantId: actor.tenantId, updatedAt: now() };
    const next: DeliverySettings = { ...current, updatedAt: now() };
    if (input.email === null) delete next.email;
    else if (input.email) {
      const { from, smtpUrl } = input.email;
      if (from !== undefined && !parseMailbox(from)) throw validationFailed('email.from', 'must be one address, `relay@example.com` or `Name <relay@example.com>`');
      if (smtpUrl !== undefined) await this.c.requireSmtpUrl(smtpUrl);
      next.email = { ...current.email, ...(from !== undefined ? { from } : {}), ...(smtpUrl !== undefined ? { smtpUrlSealed: this.c.secrets.seal(smtpUrl) } : {}) };
      // Through the server's own transport a From is the operator's name on the line: only its verified domains.
      if (next.email.from !== undefined && next.email.smtpUrlSealed === undefined && !this.c.checks.serverFrom(next.email.from)) {
        throw validationFailed('email.from', 'must be in a domain the operator verified for its SMTP server (SLUICE_SMTP_FROM_DOMAINS), unless email.smtpUrl names your own server');
      }
    }
    if (input.whatsapp === null) delete next.whatsapp;
    else if (input.whatsapp) {
      const { phoneNumberId, token, template } = input.whatsapp;
      next.whatsapp = { phoneNumberId, tokenSealed: this.c.secrets.seal(token), ...(template ? { template } : {}) };
    }
    await this.c.store.deliverySettings.put(next);
    return deliverySettingsView(next, actor.tenantId);
  }
}
