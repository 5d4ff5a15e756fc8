/**
 * The relay's configuration records, as stored in the state store (one bucket per kind, keyed
 * by id). Every record but a tenant carries its tenantId: every read is scoped by it.
 * Tenants and users are the account module's (accounts/model.ts).
 */
import type { Stamped } from '../accounts/model.ts';

export type CaptchaProvider = 'recaptcha_v2' | 'recaptcha_v3' | 'hcaptcha' | 'turnstile';
export const CAPTCHA_PROVIDERS: readonly CaptchaProvider[] = ['recaptcha_v2', 'recaptcha_v3', 'hcaptcha', 'turnstile'];

export type Channel = 'email' | 'whatsapp';
export const CHANNELS: readonly Channel[] = ['email', 'whatsapp'];

export interface CaptchaConfig {
  provider: CaptchaProvider;
  /** The provider's public site key. */
  siteKey: string;
  /**
   * The provider's secret, sealed with the relay's secrets key (relay/secrets.ts). Never
   * returned. Absent when removed: submissions are then refused (503), never let through.
   */
  secretSealed?: string;
  /** reCAPTCHA v3 only: the lowest score accepted (0..1). */
  scoreThreshold?: number;
}

export interface Site extends Stamped {
  tenantId: string;
  name: string;
  /** Public, generated, unique across tenants. */
  siteKey: string;
  active: boolean;
  allowedOrigins: string[];
  captcha?: CaptchaConfig;
}

export interface Recipient {
  id: string;
  channel: Channel;
  address: string;
  active: boolean;
}

export interface Webhook {
  id: string;
  url: string;
  /** The signing secret, sealed. Shown once at creation. */
  secretSealed: string;
  /**
   * The secret it replaced, sealed, and until when (ISO) calls are signed with it too: a
   * receiver can switch to the new secret without missing a call (Standard Webhooks rotation).
   */
  previousSecretSealed?: string;
  previousSecretUntil?: string;
  active: boolean;
}

/**
 * How a tenant's messages go out (keyed by tenant id). Without it, or without a part of it,
 * the server's defaults apply (SLUICE_SMTP_URL, SLUICE_SMTP_FROM); WhatsApp has no server
 * default: a tenant sends through its own Cloud API number.
 */
export interface DeliverySettings {
  id: string;
  tenantId: string;
  updatedAt: string;
  email?: {
    /** From of the tenant's messages; the server's SLUICE_SMTP_FROM when absent. */
    from?: string;
    /** The tenant's own SMTP server URL with its credentials, sealed; the server's when absent. */
    smtpUrlSealed?: string;
  };
  whatsapp?: {
    phoneNumberId: string;
    /** The Cloud API access token, sealed. */
    tokenSealed: string;
    /** Send this approved template (body parameter: the message) instead of a text message. */
    template?: { name: string; language: string };
  };
}

export interface Form extends Stamped {
  tenantId: string;
  siteId: string;
  /** Unique within its site. */
  formKey: string;
  name: string;
  active: boolean;
  /** Template of the notification sent for a submission (default: a plain listing of the data). */
  templateId?: string;
  recipients: Recipient[];
  webhooks: Webhook[];
}

export interface Template extends Stamped {
  tenantId: string;
  name: string;
  subject: string;
  html: string;
}

export interface RelayApiKey extends Stamped {
  tenantId: string;
  siteId: string;
  name: string;
  /** Hex SHA-256 of the key. */
  hash: string;
  /** The first characters of the key, to recognise it in lists. */
  prefix: string;
  revokedAt?: string;
}

export interface HandoverClaim {
  id: string;
  tenantId: string;
  createdBy: string;
  createdAt: string;
  expiresAt: string;
}
