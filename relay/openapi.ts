/**
 * The relay's OpenAPI 3.1 document (GET /api/v1/openapi.json on the relay port), built from
 * the route table and the very schemas that validate the admin bodies.
 */
import { ADMIN_SCHEMAS, PUBLIC_SCHEMAS, type AdminSchemaName } from './schemas.ts';
import { relayRouteList } from './http.ts';

/** Which schema each write takes (method + pattern → schema). */
const BODIES: Record<string, AdminSchemaName> = {
  'POST /api/v1/admin/tenants': 'OnboardTenant',
  'POST /api/v1/admin/login': 'Login',
  'POST /api/v1/admin/claim': 'ClaimTenant',
  'POST /api/v1/admin/me/password': 'ChangePassword',
  'PATCH /api/v1/admin/tenant': 'UpdateTenant',
  'POST /api/v1/admin/sites': 'CreateSite',
  'PATCH /api/v1/admin/sites/:siteId': 'UpdateSite',
  'PUT /api/v1/admin/sites/:siteId/captcha': 'SetCaptcha',
  'POST /api/v1/admin/sites/:siteId/forms': 'CreateForm',
  'PATCH /api/v1/admin/sites/:siteId/forms/:formId': 'UpdateForm',
  'POST /api/v1/admin/sites/:siteId/forms/:formId/recipients': 'CreateRecipient',
  'PATCH /api/v1/admin/sites/:siteId/forms/:formId/recipients/:recipientId': 'UpdateRecipient',
  'POST /api/v1/admin/sites/:siteId/forms/:formId/webhooks': 'CreateWebhook',
  'PATCH /api/v1/admin/sites/:siteId/forms/:formId/webhooks/:webhookId': 'UpdateWebhook',
  'POST /api/v1/admin/templates': 'CreateTemplate',
  'PATCH /api/v1/admin/templates/:templateId': 'UpdateTemplate',
  'POST /api/v1/admin/templates/preview': 'PreviewTemplate',
  'POST /api/v1/admin/users': 'CreateUser',
  'PATCH /api/v1/admin/users/:userId': 'UpdateUser',
  'POST /api/v1/admin/api-keys': 'CreateApiKey',
  'PUT /api/v1/admin/delivery-settings': 'PutDeliverySettings',
};

const error = { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
const json = (schema: string) => ({ content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } } });
/** A response of the spec's error table: its status and exact message. */
const refusal = (...messages: string[]) => ({ description: messages.map((m) => `\`${m}\``).join(' or '), ...error });

const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  schema: { type: 'string', minLength: 8, maxLength: 255 },
  description: 'Optional. The same key with the same body within 24 hours replays the first answer (header Idempotent-Replayed: true) without doing the work again; 409 while the first request runs; 422 with another body.',
};
const VALIDATION = refusal('Validation failed: <field> <problem>', 'Idempotency-Key must be between 8 and 255 characters');
const THROTTLED = { ...refusal('ThrottlerException: Too Many Requests'), headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds until the window lets a request in.' } } };
const IN_PROGRESS = refusal('A request with this Idempotency-Key is already in progress. Retry shortly.');
const OTHER_BODY = refusal('Idempotency-Key has already been used with a different request body');

/** The public endpoints (relay spec 4.1 to 4.3), described by hand: their answers are the spec's. */
function publicPaths(): Record<string, Record<string, unknown>> {
  const body = (schema: string) => ({ required: true, ...json(schema) });
  return {
    '/api/v1/submissions': {
      post: {
        tags: ['Public'],
        summary: 'Submit a form from a browser',
        description: 'No key: the site\'s Allowed origins (exact Origin match; no Origin only when the list is empty) and its CAPTCHA guard it. CORS: Access-Control-Allow-Origin is sent for an allowed origin. 10 per minute per client IP.',
        security: [],
        parameters: [IDEMPOTENCY_KEY],
        requestBody: body('Submission'),
        responses: {
          201: { description: 'Stored, and its delivery jobs queued (nothing delivered yet).', ...json('Created') },
          400: refusal('Validation failed: <field> <problem>', 'CAPTCHA token is required for this site', 'CAPTCHA verification failed', 'Idempotency-Key must be between 8 and 255 characters'),
          404: refusal('Submission target not found or not permitted'),
          409: IN_PROGRESS,
          413: refusal('request body exceeds 1 MiB'),
          422: OTHER_BODY,
          429: THROTTLED,
          503: refusal('CAPTCHA is misconfigured for this site', 'CAPTCHA verification temporarily unavailable. Please try again.', 'Service temporarily unavailable. Please try again.'),
        },
      },
    },
    '/api/v1/notifications': {
      post: {
        tags: ['Public'],
        summary: 'Send a notification from a backend',
        description: 'With a site API key in x-api-key (not Authorization). 300 per minute per client IP.',
        security: [{ apiKey: [] }],
        parameters: [IDEMPOTENCY_KEY],
        requestBody: body('Notification'),
        responses: {
          201: { description: 'Stored, and its delivery jobs queued.', ...json('Created') },
          400: VALIDATION,
          401: refusal('Missing API key', 'Invalid API key'),
          403: refusal('API key does not belong to this site', 'Recipient not configured for this site', 'This site is inactive: activate it in the admin to send notifications'),
          404: refusal('Form not found: <formKey>. It may not exist on this site, or it may have been deactivated.'),
          409: IN_PROGRESS,
          413: refusal('request body exceeds 1 MiB'),
          422: OTHER_BODY,
          429: THROTTLED,
          503: refusal('Service temporarily unavailable. Please try again.'),
        },
      },
    },
    '/api/v1/tenant-discovery': {
      post: {
        tags: ['Public'],
        summary: 'Email a user the tenants they belong to',
        description: 'The same 200 whatever the address: if users have it, an email listing their tenants and where to sign in is queued (at most one per address every 15 minutes). 10 per minute per client IP.',
        security: [],
        parameters: [IDEMPOTENCY_KEY],
        requestBody: body('TenantDiscovery'),
        responses: { 200: { description: 'Always this answer.', ...json('DiscoveryAccepted') }, 400: VALIDATION, 409: IN_PROGRESS, 422: OTHER_BODY, 429: THROTTLED },
      },
    },
  };
}

const JOB_PARAMETERS = [
  { name: 'state', in: 'query', required: false, schema: { enum: ['queued', 'sending', 'delivered', 'failed', 'dead'] }, description: 'Only jobs in this state.' },
  { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
];

/** Answers a route has besides the common ones. */
const MORE_RESPONSES: Record<string, Record<number, unknown>> = {
  'POST /api/v1/admin/jobs/:jobId/retry': { 409: { description: '`Only a dead job can be retried; this one is <state>`', ...error } },
};

const PAGE_PARAMETERS = [
  { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
  { name: 'before', in: 'query', required: false, schema: { type: 'string' }, description: 'nextBefore of the previous page.' },
];

export function relayOpenApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = publicPaths();
  for (const { method, pattern, access, status } of relayRouteList()) {
    const path = pattern.replace(/:(\w+)/g, '{$1}');
    const schema = BODIES[`${method} ${pattern}`];
    const parameters = [...pattern.matchAll(/:(\w+)/g)].map(([, name]) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
    const security = access === 'session' || access === 'session-any' ? [{ session: [] }] : access === 'operator' ? [{ operator: [] }] : [];
    (paths[path] ??= {})[method.toLowerCase()] = {
      tags: [path.startsWith('/api/v1/admin') ? 'Admin' : 'Operations'],
      security,
      ...(parameters.length ? { parameters: path.endsWith('/submissions') ? [...parameters, ...PAGE_PARAMETERS] : path.endsWith('/jobs') ? [...parameters, ...JOB_PARAMETERS] : parameters } : {}),
      ...(schema ? { requestBody: { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } } } } : {}),
      responses: {
        [status]: { description: status === 204 ? 'Done (no body)' : status === 201 ? 'Created' : status === 202 ? 'Accepted: queued for delivery' : 'OK' },
        400: { description: 'Validation failed (the body names the field)', ...error },
        401: { description: 'No or invalid session', ...error },
        403: { description: 'The role does not allow it', ...error },
        404: { description: 'Not found (also for anything of another tenant)', ...error },
        ...MORE_RESPONSES[`${method} ${pattern}`],
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Sluice notification relay',
      version: '1.0.0',
      description: 'Public endpoints: form submissions from browsers, notifications from backends, tenant discovery. Admin API: tenants, sites, forms, recipients, webhooks, templates, users, API keys, stored submissions, delivery jobs (attempts, manual retries) and delivery settings. Every error is `{ message, statusCode }`.',
    },
    paths,
    components: {
      securitySchemes: {
        session: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'From POST /api/v1/admin/login.' },
        operator: { type: 'apiKey', in: 'header', name: 'x-operator-token', description: 'SLUICE_RELAY_OPERATOR_TOKEN.' },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'A site API key (rk_...) from POST /api/v1/admin/api-keys.' },
      },
      schemas: {
        ...ADMIN_SCHEMAS,
        ...PUBLIC_SCHEMAS,
        Created: {
          type: 'object',
          required: ['success', 'submissionId'],
          properties: { success: { const: true }, submissionId: { type: 'string', format: 'uuid' } },
        },
        DiscoveryAccepted: {
          type: 'object',
          required: ['success', 'message'],
          properties: { success: { const: true }, message: { type: 'string' } },
        },
        Error: {
          type: 'object',
          required: ['message', 'statusCode'],
          properties: { message: { type: 'string' }, statusCode: { type: 'integer' }, field: { type: 'string', description: 'Validation errors: the first bad field.' } },
        },
      },
    },
  };
}
