/**
 * The relay's OpenAPI 3.1 document (GET /api/v1/openapi.json on the relay port), built from
 * the route table and the very schemas that validate the admin bodies.
 */
import { ADMIN_SCHEMAS, type AdminSchemaName } from './schemas.ts';
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
};

const error = { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };

export function relayOpenApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const { method, pattern, access, status } of relayRouteList()) {
    const path = pattern.replace(/:(\w+)/g, '{$1}');
    const schema = BODIES[`${method} ${pattern}`];
    const parameters = [...pattern.matchAll(/:(\w+)/g)].map(([, name]) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
    const security = access === 'session' || access === 'session-any' ? [{ session: [] }] : access === 'operator' ? [{ operator: [] }] : [];
    (paths[path] ??= {})[method.toLowerCase()] = {
      tags: [path.startsWith('/api/v1/admin') ? 'Admin' : 'Operations'],
      security,
      ...(parameters.length ? { parameters } : {}),
      ...(schema ? { requestBody: { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } } } } : {}),
      responses: {
        [status]: { description: status === 204 ? 'Done (no body)' : status === 201 ? 'Created' : 'OK' },
        400: { description: 'Validation failed (the body names the field)', ...error },
        401: { description: 'No or invalid session', ...error },
        403: { description: 'The role does not allow it', ...error },
        404: { description: 'Not found (also for anything of another tenant)', ...error },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Sluice notification relay', version: '1.0.0', description: 'Admin API: tenants, sites, forms, recipients, webhooks, templates, users and API keys.' },
    paths,
    components: {
      securitySchemes: {
        session: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'From POST /api/v1/admin/login.' },
        operator: { type: 'apiKey', in: 'header', name: 'x-operator-token', description: 'SLUICE_RELAY_OPERATOR_TOKEN.' },
      },
      schemas: {
        ...ADMIN_SCHEMAS,
        Error: {
          type: 'object',
          required: ['message', 'statusCode'],
          properties: { message: { type: 'string' }, statusCode: { type: 'integer' }, field: { type: 'string', description: 'Validation errors: the first bad field.' } },
        },
      },
    },
  };
}
