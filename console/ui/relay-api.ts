/**
 * The relay's admin API as the console reaches it (`/api/relay/…`, console/ROUTES.md): the shapes
 * the pages use of docs/reference/relay.md's answers, and one function per call they make.
 */
import type { AttemptView, JobView } from '../../delivery/index.ts';
import { call } from './api.ts';

export interface RelaySite {
  id: string;
  name: string;
  siteKey: string;
  active: boolean;
  allowedOrigins: string[];
  captcha: { provider: string; siteKey: string; secretConfigured: boolean; scoreThreshold?: number } | null;
  createdAt: string;
}
export interface RelayRecipient { id: string; channel: 'email' | 'whatsapp'; address: string; active: boolean }
export interface RelayWebhook { id: string; url: string; active: boolean; previousSecretUntil?: string }
export interface RelayForm {
  id: string;
  siteId: string;
  formKey: string;
  name: string;
  active: boolean;
  templateId?: string;
  recipients: RelayRecipient[];
  webhooks: RelayWebhook[];
  createdAt: string;
}
export interface RelaySubmission {
  submissionId: string;
  receivedAt: string;
  data: unknown;
  subject: string;
  meta: { ip: string; origin: string; userAgent: string };
  jobs: number;
}
export type CaptchaProvider = 'recaptcha_v2' | 'recaptcha_v3' | 'hcaptcha' | 'turnstile';
export interface RelayApiKey { id: string; siteId: string; name: string; prefix: string; createdAt: string; revokedAt?: string }
export interface RelayTemplateSummary { id: string; name: string; subject: string; bytes: number; createdAt: string }
export interface RelayTemplate { id: string; name: string; subject: string; html: string }
export interface RenderedPreview { subject: string; html: string; text: string }
/** What the relay shows of a tenant's delivery settings: never an SMTP URL or a token. */
export interface RelayDeliverySettings {
  email: { from: string | null; smtpServerConfigured: boolean } | null;
  whatsapp: { phoneNumberId: string; tokenConfigured: boolean } | null;
  updatedAt: string | null;
}
export interface DeliverySettingsChange {
  email?: { from?: string; smtpUrl?: string } | null;
  whatsapp?: { phoneNumberId: string; token: string } | null;
}

/** A job as the history lists it, and an attempt's record (delivery/history.ts). */
export type RelayJob = JobView;
export type RelayAttempt = AttemptView;

const enc = encodeURIComponent;
const formPath = (siteId: string, formId: string) => `/api/relay/sites/${enc(siteId)}/forms/${enc(formId)}`;

export const relayApi = {
  sites: () => call<RelaySite[]>('GET', '/api/relay/sites'),
  createSite: (name: string, allowedOrigins: string[]) => call<RelaySite>('POST', '/api/relay/sites', { name, allowedOrigins }),
  site: (siteId: string) => call<RelaySite>('GET', `/api/relay/sites/${enc(siteId)}`),
  updateSite: (siteId: string, change: Partial<Pick<RelaySite, 'name' | 'allowedOrigins' | 'active'>>) => call<RelaySite>('PATCH', `/api/relay/sites/${enc(siteId)}`, change),
  forms: (siteId: string) => call<RelayForm[]>('GET', `/api/relay/sites/${enc(siteId)}/forms`),
  createForm: (siteId: string, name: string, formKey: string) => call<RelayForm>('POST', `/api/relay/sites/${enc(siteId)}/forms`, { name, ...(formKey ? { formKey } : {}) }),
  form: (siteId: string, formId: string) => call<RelayForm>('GET', formPath(siteId, formId)),
  updateForm: (siteId: string, formId: string, change: { active?: boolean; name?: string }) => call<RelayForm>('PATCH', formPath(siteId, formId), change),
  addRecipient: (siteId: string, formId: string, channel: RelayRecipient['channel'], address: string) => call<RelayRecipient>('POST', `${formPath(siteId, formId)}/recipients`, { channel, address }),
  removeRecipient: (siteId: string, formId: string, id: string) => call<void>('DELETE', `${formPath(siteId, formId)}/recipients/${enc(id)}`),
  addWebhook: (siteId: string, formId: string, url: string) => call<RelayWebhook & { secret: string }>('POST', `${formPath(siteId, formId)}/webhooks`, { url }),
  rotateWebhook: (siteId: string, formId: string, id: string) => call<RelayWebhook & { secret: string }>('PATCH', `${formPath(siteId, formId)}/webhooks/${enc(id)}`, { rotateSecret: true }),
  removeWebhook: (siteId: string, formId: string, id: string) => call<void>('DELETE', `${formPath(siteId, formId)}/webhooks/${enc(id)}`),
  submissions: (siteId: string, formId: string, query: { q?: string; before?: string }) => {
    const params = new URLSearchParams({ limit: '50', ...(query.q ? { q: query.q } : {}), ...(query.before ? { before: query.before } : {}) });
    return call<{ submissions: RelaySubmission[]; nextBefore?: string }>('GET', `${formPath(siteId, formId)}/submissions?${params}`);
  },
  jobs: (siteId: string, formId: string) => call<{ jobs: RelayJob[] }>('GET', `${formPath(siteId, formId)}/jobs?limit=100`),
  job: (jobId: string) => call<Omit<RelayJob, 'attempts'> & { attempts: RelayAttempt[] }>('GET', `/api/relay/jobs/${enc(jobId)}`),
  retryJob: (jobId: string) => call<{ state: string }>('POST', `/api/relay/jobs/${enc(jobId)}/retry`),
  setCaptcha: (siteId: string, captcha: { provider: CaptchaProvider; siteKey: string; secret?: string; scoreThreshold?: number }) =>
    call<RelaySite>('PUT', `/api/relay/sites/${enc(siteId)}/captcha`, captcha),
  removeCaptcha: (siteId: string) => call<RelaySite>('DELETE', `/api/relay/sites/${enc(siteId)}/captcha`),
  setFormTemplate: (siteId: string, formId: string, templateId: string | null) => call<RelayForm>('PATCH', formPath(siteId, formId), { templateId }),

  apiKeys: () => call<RelayApiKey[]>('GET', '/api/relay/api-keys'),
  createApiKey: (siteId: string, name: string) => call<RelayApiKey & { apiKey: string }>('POST', '/api/relay/api-keys', { siteId, name }),
  revokeApiKey: (keyId: string) => call<RelayApiKey>('DELETE', `/api/relay/api-keys/${enc(keyId)}`),

  deliverySettings: () => call<RelayDeliverySettings>('GET', '/api/relay/delivery-settings'),
  putDeliverySettings: (change: DeliverySettingsChange) => call<RelayDeliverySettings>('PUT', '/api/relay/delivery-settings', change),

  templates: () => call<{ templates: RelayTemplateSummary[] }>('GET', '/api/relay/templates?limit=200'),
  template: (id: string) => call<RelayTemplate>('GET', `/api/relay/templates/${enc(id)}`),
  createTemplate: (fields: Omit<RelayTemplate, 'id'>) => call<RelayTemplate>('POST', '/api/relay/templates', fields),
  saveTemplate: (id: string, fields: Omit<RelayTemplate, 'id'>) => call<RelayTemplate>('PATCH', `/api/relay/templates/${enc(id)}`, fields),
  deleteTemplate: (id: string) => call<void>('DELETE', `/api/relay/templates/${enc(id)}`),
  preview: (fields: { subject: string; html: string; data: Record<string, unknown> }) => call<RenderedPreview>('POST', '/api/relay/templates/preview', fields),

  retryDead: (siteId: string, formId: string) => call<{ retried: number; more: boolean }>('POST', `${formPath(siteId, formId)}/jobs/retry-dead`),
};
