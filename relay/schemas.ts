/**
 * The admin API's request bodies as JSON Schemas. The same objects validate requests (ajv) and
 * make the relay's OpenAPI document (relay/openapi.ts). A refusal is 400 `Validation failed`
 * naming the first bad field.
 */
import { Ajv } from 'ajv';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../accounts/passwords.ts';
import { E164_PATTERN, E164_RULE } from '../core/e164.ts';
import { isEmailAddress } from '../core/email-address.ts';
import { firstProblem, lazyValidators } from '../core/validation.ts';
import { validationFailed } from './errors.ts';
import { ROLES } from '../accounts/model.ts';
import { CAPTCHA_PROVIDERS, CHANNELS } from './model.ts';

const name = { type: 'string', minLength: 1, maxLength: 200 } as const;
const email = { type: 'string', format: 'email-address', maxLength: 254, description: 'One plain address, at most 254 characters.' } as const;
const password = { type: 'string', minLength: PASSWORD_MIN_LENGTH, maxLength: PASSWORD_MAX_LENGTH, description: `At least ${PASSWORD_MIN_LENGTH} characters.` } as const;
const origin = { type: 'string', format: 'origin', maxLength: 300, description: 'scheme://host[:port], no path, no trailing slash.' } as const;
// Checked by the deployment's egress policy (RelayAdmin, after the body), not by a format: the check looks the host up.
const webhookUrl = { type: 'string', minLength: 1, maxLength: 2048, description: 'http(s) URL of a public host (no credentials; loopback and private addresses refused).' } as const;
/** Standard Webhooks: `whsec_` and the base64 of a key of at least 16 bytes. */
const webhookSecret = { type: 'string', pattern: '^whsec_[A-Za-z0-9+/]{22,}={0,2}$', maxLength: 256, description: 'Signing secret: whsec_ and the base64 of 16 to 180 random bytes (default: generated and shown once).' } as const;
const key = (what: string) => ({ type: 'string', pattern: '^[A-Za-z0-9_-]{1,100}$', description: `${what}: letters, digits, _ and -, at most 100.` }) as const;

function object(properties: Record<string, unknown>, required: string[] = [], extra: Record<string, unknown> = {}) {
  return { type: 'object', additionalProperties: false, properties, required, ...extra } as const;
}

export const ADMIN_SCHEMAS = {
  OnboardTenant: object({ name, owner: object({ email, name, password }, ['email']) }, ['name', 'owner']),
  UpdateTenant: object({ name }, ['name']),
  Login: object({
    email: { type: 'string', maxLength: 254 },
    password: { type: 'string', maxLength: 256 },
    tenantId: { type: 'string', maxLength: 64, description: 'Only when the email and password open accounts in several tenants (409 lists them).' },
  }, ['email', 'password']),
  ChangePassword: object({ currentPassword: { type: 'string', maxLength: 256 }, newPassword: password }, ['currentPassword', 'newPassword']),
  CreateSite: object({ name, allowedOrigins: { type: 'array', maxItems: 50, items: origin }, active: { type: 'boolean' } }, ['name']),
  UpdateSite: object({ name, allowedOrigins: { type: 'array', maxItems: 50, items: origin }, active: { type: 'boolean' } }, [], { minProperties: 1 }),
  SetCaptcha: object(
    {
      provider: { enum: [...CAPTCHA_PROVIDERS] },
      siteKey: { type: 'string', minLength: 1, maxLength: 200, description: "The provider's public site key." },
      secret: { type: 'string', minLength: 1, maxLength: 500, description: "The provider's secret key: stored encrypted, never returned. Left out: the stored one is kept if the provider is unchanged." },
      scoreThreshold: { type: 'number', minimum: 0, maximum: 1, description: 'recaptcha_v3 only (default 0.5).' },
    },
    ['provider', 'siteKey'],
  ),
  CreateForm: object({ formKey: key('formKey (default: generated)'), name, active: { type: 'boolean' }, templateId: { type: 'string', maxLength: 100 } }, ['name']),
  UpdateForm: object({ name, active: { type: 'boolean' }, templateId: { type: ['string', 'null'], maxLength: 100 } }, [], { minProperties: 1 }),
  CreateRecipient: object(
    { channel: { enum: [...CHANNELS] }, address: { type: 'string', minLength: 1, maxLength: 254, description: `email: one address; whatsapp: E.164 (${E164_RULE}).` }, active: { type: 'boolean' } },
    ['channel', 'address'],
  ),
  UpdateRecipient: object({ active: { type: 'boolean' } }, ['active']),
  CreateWebhook: object({ url: webhookUrl, secret: webhookSecret, active: { type: 'boolean' } }, ['url']),
  UpdateWebhook: object({
    url: webhookUrl,
    active: { type: 'boolean' },
    rotateSecret: { type: 'boolean', description: 'true: a new signing secret (shown once); calls are signed with the old one too for 24 hours.' },
  }, [], { minProperties: 1 }),
  PutDeliverySettings: object({
    email: {
      anyOf: [{ type: 'null' }, object({
        from: { type: 'string', minLength: 3, maxLength: 320, description: '`relay@example.com` or `Name <relay@example.com>`; default: the server\'s SLUICE_SMTP_FROM. Without the tenant\'s own smtpUrl, only in a domain the operator verified (SLUICE_SMTP_FROM_DOMAINS).' },
        // Checked by the deployment's egress policy (RelayAdmin, after the body), as webhook URLs are.
        smtpUrl: { type: 'string', pattern: '^smtps?://[^\\s]+$', maxLength: 2048, description: 'The tenant\'s SMTP server with credentials (smtp://user:pass@host:587) on a public host (loopback and private addresses refused); stored sealed, never shown. Default: the server\'s.' },
      })],
    },
    whatsapp: {
      anyOf: [{ type: 'null' }, object({
        phoneNumberId: { type: 'string', pattern: '^[0-9]{1,30}$', description: 'The Cloud API phone number id (not the number).' },
        token: { type: 'string', minLength: 10, maxLength: 1024, description: 'A Cloud API access token; stored sealed, never shown.' },
        template: object({ name: { type: 'string', pattern: '^[a-z0-9_]{1,512}$' }, language: { type: 'string', pattern: '^[a-z]{2,3}(_[A-Z]{2})?$' } }, ['name', 'language']),
      }, ['phoneNumberId', 'token'])],
    },
  }, [], { minProperties: 1 }),
  CreateTemplate: object({ name, subject: { type: 'string', minLength: 1, maxLength: 500 }, html: { type: 'string', minLength: 1, maxLength: 100_000 } }, ['name', 'subject', 'html']),
  UpdateTemplate: object({ name, subject: { type: 'string', minLength: 1, maxLength: 500 }, html: { type: 'string', minLength: 1, maxLength: 100_000 } }, [], { minProperties: 1 }),
  PreviewTemplate: object(
    {
      templateId: { type: 'string', maxLength: 100, description: 'A stored template; or give subject and html.' },
      subject: { type: 'string', maxLength: 500 },
      html: { type: 'string', maxLength: 100_000 },
      data: { type: 'object', description: 'Sample submission data, held to the limits of a submission\'s data.' },
    },
  ),
  CreateUser: object({ email, name, role: { enum: [...ROLES] }, password }, ['email', 'role']),
  UpdateUser: object({ name, role: { enum: [...ROLES] }, active: { type: 'boolean' } }, [], { minProperties: 1 }),
  CreateApiKey: object({ siteId: { type: 'string', maxLength: 100 }, name }, ['siteId', 'name']),
  ClaimTenant: object({ token: { type: 'string', maxLength: 200 }, email, name, password }, ['token', 'email', 'password']),
} as const;

/** The public endpoints' bodies (relay spec 4.1 to 4.3, limits of section 8). */
const publicKey = (what: string) => ({ type: 'string', minLength: 1, maxLength: 100, description: `${what} (at most 100 characters).` }) as const;
const data = {
  type: 'object',
  description: 'Free-form: at most 100 fields per object, 2 levels (data, data.meta), names up to 128 characters, strings up to 10,000, arrays up to 100 items; _subject, _body and _footer are reserved.',
} as const;
const addresses = (items: Record<string, unknown>) => ({ type: 'array', minItems: 1, maxItems: 50, items, description: 'At most 50.' }) as const;

export const PUBLIC_SCHEMAS = {
  Submission: object(
    {
      siteKey: publicKey('The site key'),
      formKey: publicKey('The form key on that site'),
      captchaToken: { type: 'string', maxLength: 4096, description: 'Required when the site has a CAPTCHA provider; single use. Without one, leave it out or send "no-captcha".' },
      data,
    },
    ['siteKey', 'formKey', 'data'],
  ),
  Notification: object(
    {
      siteKey: publicKey('The site the API key is bound to'),
      formKey: publicKey('A form of that site; its recipients and webhooks are used when no recipients are named'),
      channels: { type: 'array', uniqueItems: true, items: { enum: [...CHANNELS] }, description: 'email and/or whatsapp (default: the keys of recipients).' },
      recipients: object(
        {
          email: addresses({ type: 'string', maxLength: 254, format: 'email-address', description: 'One plain address, at most 254 characters.' }),
          whatsapp: addresses({ type: 'string', pattern: E164_PATTERN, description: `E.164: ${E164_RULE}.` }),
        },
        [],
        { description: 'Addresses per channel; each must be an active recipient of the form (or, without formKey, of an active form of the site).' },
      ),
      data,
      template: { type: 'string', maxLength: 100, description: 'Accepted and ignored.' },
      subject: { type: 'string', maxLength: 500, description: 'Replaces the template subject; sanitised to plain text.' },
      body: { type: 'string', maxLength: 100_000, description: 'Replaces the template HTML body; sanitised (no scripts, event handlers or javascript: links); elements nested at most 256 deep.' },
    },
    ['siteKey'],
  ),
  TenantDiscovery: object({ email: { type: 'string', maxLength: 254, format: 'email-address' } }, ['email']),
} as const;

export type AdminSchemaName = keyof typeof ADMIN_SCHEMAS | keyof typeof PUBLIC_SCHEMAS;

/** scheme://host[:port] exactly as a browser sends it in Origin. */
export function isOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === value;
  } catch {
    return false;
  }
}

/** Validates a body against one of ADMIN_SCHEMAS; throws 400 `Validation failed` naming the first bad field. */
export type BodyValidator = <T>(schema: AdminSchemaName, body: unknown) => T;

export function createBodyValidator(): BodyValidator {
  const validator = lazyValidators({ ...ADMIN_SCHEMAS, ...PUBLIC_SCHEMAS } as Record<AdminSchemaName, object>, () =>
    new Ajv({ allErrors: false, strict: true, strictTypes: false })
      .addFormat('email-address', { type: 'string', validate: isEmailAddress })
      .addFormat('origin', { type: 'string', validate: isOrigin }));
  return <T>(schema: AdminSchemaName, body: unknown): T => {
    const validate = validator(schema);
    if (!validate(body)) {
      const problem = firstProblem(validate.errors!);
      throw validationFailed(problem.field, formatMessage(validate.errors![0]!.params.format, problem.message));
    }
    return body as T;
  };
}

function formatMessage(format: string | undefined, fallback: string): string {
  switch (format) {
    case 'email-address': return 'must be one email address';
    case 'origin': return 'must be an origin: scheme://host[:port], no path, no trailing slash';
    default: return fallback;
  }
}
