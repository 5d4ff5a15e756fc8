/**
 * What the admin API shows of stored records: never a password hash, a sealed secret, an SMTP
 * URL (it holds a password) or a key hash. relay/openapi-schemas.ts describes these shapes.
 */
import type { User } from '../../accounts/index.ts';
import type { DeliverySettings, Form, RelayApiKey, Site } from '../model.ts';

export function userView({ passwordHash: _p, sessionVersion: _s, ...user }: User) {
  return user;
}

export function siteView({ captcha, ...site }: Site) {
  if (!captcha) return { ...site, captcha: null };
  const { secretSealed, ...visible } = captcha;
  return { ...site, captcha: { ...visible, secretConfigured: secretSealed !== undefined } };
}

/** A webhook without its sealed secrets: the current one and, after a rotation, the previous one. */
export function webhookView({ secretSealed: _secret, previousSecretSealed: _previous, ...hook }: Form['webhooks'][number]) {
  return { ...hook, secretConfigured: true };
}

export function formView(form: Form) {
  return { ...form, webhooks: form.webhooks.map(webhookView) };
}

export function apiKeyView({ hash: _hash, ...key }: RelayApiKey) {
  return key;
}

/** What the admin shows of delivery settings: never a token or an SMTP URL (it holds a password). */
export function deliverySettingsView(settings: DeliverySettings | undefined, tenantId: string) {
  return {
    tenantId,
    email: settings?.email ? { from: settings.email.from ?? null, smtpServerConfigured: settings.email.smtpUrlSealed !== undefined } : null,
    whatsapp: settings?.whatsapp ? { phoneNumberId: settings.whatsapp.phoneNumberId, tokenConfigured: true, template: settings.whatsapp.template ?? null } : null,
    updatedAt: settings?.updatedAt ?? null,
  };
}
