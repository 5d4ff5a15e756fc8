/**
 * What the relay answers, as JSON Schemas for its OpenAPI document (relay/openapi.ts): the
 * views of relay/admin/views.ts (never a password hash, a sealed secret or a key hash), the
 * listings of relay/submissions.ts and delivery/history.ts, and the error body of relay/errors.ts.
 */
import { DELIVERY_CHANNELS, JOB_STATES } from '../delivery/index.ts';
import { ROLES } from '../accounts/model.ts';
import { CAPTCHA_PROVIDERS, CHANNELS } from './model.ts';

type Json = Record<string, unknown>;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const string = { type: 'string' };
const time = { type: 'string', format: 'date-time' };
const timeOrNull = { type: ['string', 'null'], format: 'date-time' };
const flag = { type: 'boolean' };
const integer = { type: 'integer' };

/** An object whose every property is present, but those named in `optional`. */
function object(properties: Json, optional: string[] = []): Json {
  return { type: 'object', required: Object.keys(properties).filter((name) => !optional.includes(name)), properties };
}

const stamped = { createdAt: time, updatedAt: time };
const oneTimePassword = { type: 'string', description: 'Only when no password was given: shown this once; the user must change it at first sign-in.' };
const session = { token: { type: 'string', description: 'The session, for Authorization: Bearer.' }, expiresAt: time, user: ref('User') };
const apiKey = { id: string, tenantId: string, siteId: string, name: string, prefix: { type: 'string', description: 'The first characters of the key, to recognise it.' }, revokedAt: time, ...stamped };
const webhook = { id: string, url: string, active: flag };
const previousSecretUntil = { ...time, description: 'After a rotation: until when calls are signed with the old secret too.' };

export const RESPONSE_SCHEMAS: Record<string, Json> = {
  Error: object(
    {
      message: string,
      statusCode: integer,
      field: { type: 'string', description: 'Validation errors: the first bad field.' },
      errors: { type: 'array', items: object({ field: string, message: string }), description: 'Validation errors: the bad field and its problem.' },
    },
    ['field', 'errors'],
  ),
  Health: object({ status: { const: 'ok' }, service: { const: 'sluice-relay' } }),
  Created: object({ success: { const: true }, submissionId: { type: 'string', format: 'uuid' } }),
  DiscoveryAccepted: object({ success: { const: true }, message: string }),
  Tenant: object({ id: string, name: string, ...stamped }),
  User: object({
    id: string,
    tenantId: string,
    email: { type: 'string', description: 'Lower case; the login.' },
    name: string,
    role: { enum: [...ROLES] },
    active: flag,
    mustChangePassword: { type: 'boolean', description: 'Signed in with a one-time password: only POST /api/v1/admin/me/password is allowed.' },
    ...stamped,
  }),
  Session: object(session),
  OnboardedTenant: object({ tenant: ref('Tenant'), owner: ref('User'), oneTimePassword }, ['oneTimePassword']),
  ClaimedTenant: object({ tenant: ref('Tenant'), ...session }),
  Me: object({ user: ref('User'), tenant: ref('Tenant') }),
  Handover: object({ claimToken: { type: 'string', description: 'For POST /api/v1/admin/claim; shown this once.' }, id: string, expiresAt: time }),
  Claim: object({ id: string, createdBy: { type: 'string', description: 'The owner\'s user id, or `operator`.' }, createdAt: time, expiresAt: time }),
  Site: object({
    id: string,
    tenantId: string,
    name: string,
    siteKey: { type: 'string', description: 'Public: the siteKey of submissions.' },
    active: flag,
    allowedOrigins: { type: 'array', items: string },
    captcha: {
      oneOf: [
        { type: 'null' },
        object(
          { provider: { enum: [...CAPTCHA_PROVIDERS] }, siteKey: string, scoreThreshold: { type: 'number' }, secretConfigured: { type: 'boolean', description: 'false: submissions are refused (503) until a secret is set.' } },
          ['scoreThreshold'],
        ),
      ],
    },
    ...stamped,
  }),
  Recipient: object({ id: string, channel: { enum: [...CHANNELS] }, address: string, active: flag }),
  FormWebhook: object({ ...webhook, previousSecretUntil, secretConfigured: { const: true } }, ['previousSecretUntil']),
  Form: object(
    {
      id: string,
      tenantId: string,
      siteId: string,
      formKey: string,
      name: string,
      active: flag,
      templateId: string,
      recipients: { type: 'array', items: ref('Recipient') },
      webhooks: { type: 'array', items: ref('FormWebhook') },
      ...stamped,
    },
    ['templateId'],
  ),
  NewWebhook: object({ ...webhook, secret: { type: 'string', description: 'The signing secret (whsec_...), shown this once.' } }),
  UpdatedWebhook: object(
    { ...webhook, previousSecretUntil, secretConfigured: { const: true }, secret: { type: 'string', description: 'After rotateSecret: the new signing secret, shown this once.' } },
    ['previousSecretUntil', 'secret'],
  ),
  StoredSubmission: object({
    submissionId: { type: 'string', format: 'uuid' },
    kind: { enum: ['submission', 'notification'] },
    receivedAt: time,
    data: { type: 'object' },
    subject: string,
    body: string,
    meta: object({ ip: string, origin: string, userAgent: string }),
    jobs: { type: 'integer', description: 'Delivery jobs queued with it.' },
  }),
  SubmissionPage: object({ submissions: { type: 'array', items: ref('StoredSubmission') }, nextBefore: { type: 'string', description: 'The before of the next page; absent on the last.' } }, ['nextBefore']),
  JobSummary: object({
    jobId: string,
    submissionId: string,
    kind: string,
    channel: { enum: [...DELIVERY_CHANNELS] },
    destination: { type: 'string', description: 'An email address, an E.164 number or a webhook\'s id.' },
    createdAt: time,
    state: { enum: [...JOB_STATES] },
    series: { type: 'integer', description: '1, then one more per manual retry.' },
    attempts: { type: 'integer', description: 'Attempts made in that series.' },
    lastError: string,
    providerStatus: string,
    updatedAt: timeOrNull,
    nextAttemptAt: { ...timeOrNull, description: 'When a failed job is tried next.' },
  }),
  JobList: object({ jobs: { type: 'array', items: ref('JobSummary') } }),
  Attempt: object({ series: integer, attempt: integer, state: string, at: time, durationMs: integer, error: string, providerStatus: string, nextAttemptAt: timeOrNull }),
  JobDetail: object({
    jobId: string,
    submissionId: string,
    formId: string,
    kind: string,
    channel: { enum: [...DELIVERY_CHANNELS] },
    destination: string,
    createdAt: time,
    state: { enum: [...JOB_STATES] },
    series: integer,
    attempts: { type: 'array', items: ref('Attempt') },
  }),
  InboxMessage: object(
    {
      seq: { type: 'integer', description: 'Per tenant, counting up: the newest has the highest.' },
      tenantId: string,
      channel: { enum: [...DELIVERY_CHANNELS] },
      destination: { type: 'string', description: 'The email address, the E.164 number or the webhook\'s URL.' },
      caughtAt: time,
      jobId: string,
      series: integer,
      kind: { enum: ['submission', 'notification', 'tenant_discovery'] },
      submissionId: string,
      siteId: string,
      formId: string,
      subject: { type: 'string', description: 'The email\'s Subject; a WhatsApp message\'s rendered subject; a webhook\'s event type.' },
      text: { type: 'string', description: 'The email\'s text part; the text of the WhatsApp message; the webhook\'s JSON body.' },
      html: { type: 'string', description: 'The email\'s HTML part, as sent (show it as text, or in a sandboxed frame).' },
      email: object({
        from: { oneOf: [{ type: 'null' }, object({ name: string, address: string })], description: 'null when no From is configured.' },
        to: string,
        replyTo: { type: ['string', 'null'] },
        messageId: string,
        headers: { type: 'object', additionalProperties: string },
      }),
      whatsapp: object({ url: { type: ['string', 'null'], description: 'null when the tenant has no WhatsApp settings.' }, request: { type: 'object', description: 'The Cloud API request body.' } }),
      webhook: object({ url: string, headers: { type: 'object', additionalProperties: string, description: 'The signed headers (Standard Webhooks).' } }),
    },
    ['html', 'email', 'whatsapp', 'webhook'],
  ),
  InboxPage: object({ messages: { type: 'array', items: ref('InboxMessage') } }),
  RetriedJob: object({ jobId: string, series: integer, state: { const: 'queued' } }),
  RetriedDeadJobs: object({ retried: integer, more: { type: 'boolean', description: 'true: more dead jobs are left; call again.' } }),
  DeliverySettings: object({
    tenantId: string,
    email: { oneOf: [{ type: 'null' }, object({ from: { type: ['string', 'null'] }, smtpServerConfigured: flag })] },
    whatsapp: {
      oneOf: [{ type: 'null' }, object({ phoneNumberId: string, tokenConfigured: { const: true }, template: { oneOf: [{ type: 'null' }, object({ name: string, language: string })] } })],
    },
    updatedAt: timeOrNull,
  }),
  Template: object({ id: string, tenantId: string, name: string, subject: string, html: string, ...stamped }),
  TemplateSummary: object({ id: string, tenantId: string, name: string, subject: string, bytes: { type: 'integer', description: 'UTF-8 bytes of its name, subject and html (what the tenant\'s cap counts).' }, ...stamped }),
  TemplatePage: object({ templates: { type: 'array', items: ref('TemplateSummary') }, nextBefore: { type: 'string', description: 'The before of the next page; absent on the last.' } }, ['nextBefore']),
  TemplatePreview: object({ subject: string, html: string, text: { type: 'string', description: 'The plain-text part.' } }),
  NewUser: object({ user: ref('User'), oneTimePassword }, ['oneTimePassword']),
  ApiKey: object(apiKey, ['revokedAt']),
  NewApiKey: object({ ...apiKey, apiKey: { type: 'string', description: 'The key (rk_...), shown this once.' } }, ['revokedAt']),
};
