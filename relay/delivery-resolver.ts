/**
 * What a relay job sends, found at the time of each attempt (delivery/worker.ts asks): the
 * form's template rendered with the submission's data (values HTML-escaped), or a
 * notification's own sanitised subject and body; the tenant's SMTP and WhatsApp settings (or the
 * server's); the webhook's current URL and secrets, with the JSON body it is sent. A job that
 * cannot be sent as things are configured, or whose message would be over its size limit
 * (relay/render.ts), resolves to `none` with the reason, and goes dead.
 *
 * A tenant's own SMTP server is a destination the tenant aims: the sender checks it with the
 * egress policy, and it never gets the operator's TLS exceptions or DKIM key. The server's own
 * transport sends a tenant's From only in a domain the operator verified (SLUICE_SMTP_FROM_DOMAINS),
 * else the server's From: the settings may predate the rule, or the domains may have changed.
 *
 * With the development inbox (`inbox`), nothing is sent: an email or WhatsApp message resolves
 * without a server or a phone number configured, rendered all the same, so the inbox keeps it.
 */
import { SluiceError } from '../core/errors.ts';
import type { SecretBox } from '../core/secret-box.ts';
import { isFromInDomains, isPlainEmailAddress, type DeliveryJob, type JobResolver, type RenderedMessage, type Resolved, type SmtpSettings, type WhatsAppSettings } from '../delivery/index.ts';
import type { Form } from './model.ts';
import { overLimit } from './render.ts';
import type { MessageRenderer } from './renderer.ts';
import type { RelayStore } from './store.ts';
import { DEFAULT_TEMPLATE } from './templates.ts';

export interface DeliveryDefaults {
  /** The server's SMTP transport and From (SLUICE_SMTP_*); url empty when none is configured. */
  smtp: SmtpSettings;
  /** Domains a tenant's From may use on the server's transport (SLUICE_SMTP_FROM_DOMAINS). */
  serverFromDomains: readonly string[];
  whatsapp: { graphUrl: string; timeoutMs: number };
  /** The development inbox keeps every message (SLUICE_DELIVERY_INBOX): no transport need be configured. */
  inbox?: boolean;
}

/**
 * A job younger than this whose form or webhook this process does not know is retried, not dead:
 * in a cluster the configuration reaches each worker through a watch, a moment after it was made.
 */
const CONFIG_PROPAGATION_MS = 60_000;

/** Data fields whose value, when it is one plain address, becomes the email's Reply-To. */
const REPLY_TO_FIELDS = ['replyTo', 'reply_to', 'email', 'Email', 'e-mail', 'mail'];

export class RelayJobResolver implements JobResolver {
  constructor(
    private readonly store: RelayStore,
    private readonly secrets: SecretBox,
    private readonly defaults: DeliveryDefaults,
    private readonly renderer: MessageRenderer,
  ) {}

  async resolve(job: DeliveryJob): Promise<Resolved> {
    const form = job.formId ? this.store.forms.get(job.formId) : undefined;
    if (job.formId && (!form || form.tenantId !== job.tenantId)) return this.missing(job, 'the form of this job no longer exists');
    switch (job.channel) {
      case 'webhook':
        return this.webhook(job, form);
      case 'email':
      case 'whatsapp': {
        const message = await this.render(job, form);
        if ('error' in message) return { channel: 'none', error: message.error, ...(message.retry ? { retry: true } : {}) };
        return job.channel === 'email' ? this.email(job, message) : this.whatsapp(job, message);
      }
    }
  }

  private webhook(job: DeliveryJob, form: Form | undefined): Resolved {
    const hook = form?.webhooks.find((candidate) => candidate.id === job.destination);
    if (!form || !hook) return this.missing(job, 'the webhook no longer exists on the form');
    if (!hook.active) return { channel: 'none', error: 'the webhook is inactive' };
    const secrets = [this.secrets.open(hook.secretSealed)];
    if (hook.previousSecretSealed && hook.previousSecretUntil && Date.parse(hook.previousSecretUntil) > Date.now()) {
      secrets.push(this.secrets.open(hook.previousSecretSealed));
    }
    const event = {
      type: job.kind === 'notification' ? 'notification.created' : 'submission.created',
      timestamp: job.createdAt,
      data: {
        submissionId: job.submissionId,
        siteId: job.siteId,
        formId: job.formId,
        formKey: form.formKey,
        receivedAt: job.createdAt,
        fields: job.content.data,
        ...(job.kind === 'notification' ? { subject: job.content.subject, body: job.content.body } : {}),
      },
    };
    return { channel: 'webhook', target: { url: hook.url, secrets }, body: JSON.stringify(event) };
  }

  private email(job: DeliveryJob, message: RenderedMessage): Resolved {
    const own = this.store.deliverySettings.get(job.tenantId)?.email;
    const server = this.defaults.smtp;
    // The operator's exceptions (a self-signed relay, DKIM for its domain) and its exemption from the egress policy stay with its server.
    const { dkim: _dkim, tlsInsecure: _tlsInsecure, operatorServer: _operatorServer, ...limits } = server;
    let settings: SmtpSettings;
    if (own?.smtpUrlSealed) {
      settings = { ...limits, url: this.secrets.open(own.smtpUrlSealed), from: own.from || server.from };
    } else if (own?.from && own.from !== server.from && isFromInDomains(own.from, this.defaults.serverFromDomains)) {
      // DKIM signs for the server's From only.
      const { dkim: _signsServerFrom, ...transport } = server;
      settings = { ...transport, from: own.from };
    } else {
      settings = server;
    }
    if (this.defaults.inbox) return { channel: 'email', settings, message };
    if (!settings.url) return { channel: 'none', error: 'no SMTP server is configured (set SLUICE_SMTP_URL, or the tenant\'s email settings)' };
    if (!settings.from) return { channel: 'none', error: 'no From address is configured (set SLUICE_SMTP_FROM, or the tenant\'s email settings)' };
    return { channel: 'email', settings, message };
  }

  private whatsapp(job: DeliveryJob, message: RenderedMessage): Resolved {
    const own = this.store.deliverySettings.get(job.tenantId)?.whatsapp;
    if (!own && this.defaults.inbox) {
      return { channel: 'whatsapp', settings: { graphUrl: this.defaults.whatsapp.graphUrl, phoneNumberId: '', token: '', timeoutMs: this.defaults.whatsapp.timeoutMs }, message };
    }
    if (!own) return { channel: 'none', error: 'WhatsApp is not configured for this tenant (its Cloud API phone number id and token)' };
    const settings: WhatsAppSettings = {
      graphUrl: this.defaults.whatsapp.graphUrl,
      phoneNumberId: own.phoneNumberId,
      token: this.secrets.open(own.tokenSealed),
      timeoutMs: this.defaults.whatsapp.timeoutMs,
      ...(own.template ? { template: own.template } : {}),
    };
    return { channel: 'whatsapp', settings, message };
  }

  /** A form or webhook this process does not know: gone, unless the job is so young its configuration may still be on the way. */
  private missing(job: DeliveryJob, error: string): Resolved {
    const young = Date.now() - Date.parse(job.createdAt) < CONFIG_PROPAGATION_MS;
    return young ? { channel: 'none', error: `${error} (not known here yet: retried for a minute)`, retry: true } : { channel: 'none', error };
  }

  /**
   * The form's template (or the default) filled with the data; a notification's own subject and
   * body win. A message over the size limit cannot be sent: the error says why, and the job is dead.
   */
  private async render(job: DeliveryJob, form: Form | undefined): Promise<RenderedMessage | { error: string; retry?: true }> {
    const { data, subject, body } = job.content;
    const { subject: templateSubject, html } = (form?.templateId && this.store.templates.get(form.templateId)) || DEFAULT_TEMPLATE;
    const rendered = await this.renderer.render({ template: { subject: templateSubject, html }, data, ...(subject ? { subject } : {}), ...(body ? { body } : {}) }).catch((err: unknown) => {
      // The render pool's queue full: not this job's fault, tried again later.
      if (err instanceof SluiceError && err.code === 'unavailable') return { busy: err.message } as const;
      throw err;
    });
    if ('busy' in rendered) return { error: `not rendered: ${rendered.busy}`, retry: true };
    if (!rendered.ok) return { error: `the message ${overLimit(rendered.chars)}` };
    const replyTo = REPLY_TO_FIELDS.map((field) => data[field]).find((value): value is string => typeof value === 'string' && isPlainEmailAddress(value));
    return { ...rendered.message, ...(replyTo ? { replyTo } : {}) };
  }
}
