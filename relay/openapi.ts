/**
 * The relay's OpenAPI 3.1 document (GET /api/v1/openapi.json on the relay port), built from
 * the route table and the very schemas that validate the bodies. Each operation lists the
 * refusals its code can answer, with their messages: those of its access (relay/http.ts admit),
 * of its body (jsonBody), of its path (an id that is not the tenant's), and its own.
 */
import { DOCS_ASSET_PARAMETER, DOCS_OPERATIONS, OPENAPI_INFO, type OpenApiDocument } from '../core/api-docs.ts';
import { ADMIN_SCHEMAS, PUBLIC_SCHEMAS, type AdminSchemaName } from './schemas.ts';
import { relayRouteList } from './http.ts';
import { refusalMessage, RIGHTS, type Right } from '../accounts/rights.ts';
import { CHOOSE_TENANT_MESSAGE } from '../accounts/sign-in.ts';
import { RESPONSE_SCHEMAS } from './openapi-schemas.ts';
import { INBOX_LIMITS, JOB_STATES, MAX_INBOX_PAGE } from '../delivery/index.ts';
import { DEFAULT_INBOX_PAGE, INBOX_OFF_MESSAGE } from './inbox.ts';
import { MAX_MESSAGE_CHARS } from './render.ts';
import { MAX_PAGE, MAX_SEARCH_CHARS } from './submissions.ts';
import { TEMPLATE_LIMITS } from './tenant-templates.ts';
import { CLAIM_TTL_HOURS, MAX_OPEN_CLAIMS } from './handover.ts';

type Json = Record<string, unknown>;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json) => ({ content: { 'application/json': { schema } } });
const list = (name: string) => ({ type: 'array', items: ref(name) });
/** A refusal: its exact messages (`<...>` stands for a value), in the spec's error body. */
const refusal = (messages: string[], extra: Json = {}) => ({ description: messages.map((m) => `\`${m}\``).join(' or '), ...extra, ...json(ref('Error')) });
const RETRY_AFTER = { headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds until a request is let in again.' } } };

/** Messages shared by several operations (the spec's, and relay/http.ts's). */
const M = {
  validation: 'Validation failed: <field> <problem>',
  idempotencyLength: 'Idempotency-Key must be between 8 and 255 characters',
  inProgress: 'A request with this Idempotency-Key is already in progress. Retry shortly.',
  otherBody: 'Idempotency-Key has already been used with a different request body',
  throttled: 'ThrottlerException: Too Many Requests',
  tooLarge: 'request body exceeds 1 MiB',
  overBudget: 'the request needs <n> bytes in memory, more than the in-flight limit of <n> bytes',
  timeout: 'the request body did not arrive in time (<n> bytes in <s> s)',
  unavailable: 'Service temporarily unavailable. Please try again.',
  noSession: 'Missing session: send Authorization: Bearer <token> from POST /api/v1/admin/login',
  badSession: 'Invalid or expired session',
  passwordChange: 'Password change required: POST /api/v1/admin/me/password with the one-time password as currentPassword',
  /** Taken in this tenant: accounts of other tenants are not looked at. */
  emailTaken: 'A user with this email already exists',
};

const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  schema: { type: 'string', minLength: 8, maxLength: 255 },
  description: 'Optional. The same key with the same body within 24 hours replays the first answer (header Idempotent-Replayed: true) without doing the work again; 409 while the first request runs; 422 with another body.',
};

/** The public endpoints (relay spec 4.1 to 4.3), described by hand: their answers are the spec's. */
function publicPaths(): Record<string, Record<string, unknown>> {
  const body = (schema: string) => ({ required: true, ...json(ref(schema)) });
  const created = { description: 'Stored, and its delivery jobs queued (nothing delivered yet).', ...json(ref('Created')) };
  const door = {
    408: refusal([M.timeout]),
    409: refusal([M.inProgress]),
    413: refusal([M.tooLarge, M.overBudget]),
    422: refusal([M.otherBody]),
    429: refusal([M.throttled], RETRY_AFTER),
  };
  return {
    '/api/v1/submissions': {
      post: {
        operationId: 'submitForm',
        tags: ['Public'],
        summary: 'Submit a form from a browser',
        description: 'No key: the site\'s Allowed origins (exact Origin match; no Origin only when the list is empty) and its CAPTCHA guard it. CORS: Access-Control-Allow-Origin is sent for an allowed origin. 10 per minute per client IP.',
        security: [],
        parameters: [IDEMPOTENCY_KEY],
        requestBody: body('Submission'),
        responses: {
          201: created,
          400: refusal([M.validation, 'CAPTCHA token is required for this site', 'CAPTCHA verification failed', M.idempotencyLength]),
          404: refusal(['Submission target not found or not permitted']),
          ...door,
          503: refusal(['CAPTCHA is misconfigured for this site', 'CAPTCHA verification temporarily unavailable. Please try again.', M.unavailable, 'The request took too long to start. Please try again.'], RETRY_AFTER),
        },
      },
    },
    '/api/v1/notifications': {
      post: {
        operationId: 'sendNotification',
        tags: ['Public'],
        summary: 'Send a notification from a backend',
        description: 'With a site API key in x-api-key (not Authorization). 300 per minute per client IP.',
        security: [{ apiKey: [] }],
        parameters: [IDEMPOTENCY_KEY],
        requestBody: body('Notification'),
        responses: {
          201: created,
          400: refusal([M.validation, M.idempotencyLength]),
          401: refusal(['Missing API key', 'Invalid API key']),
          403: refusal(['API key does not belong to this site', 'Recipient not configured for this site', 'This site is inactive: activate it in the admin to send notifications']),
          404: refusal(['Form not found: <formKey>. It may not exist on this site, or it may have been deactivated.']),
          ...door,
          503: refusal([M.unavailable, 'The request took too long to start. Please try again.'], RETRY_AFTER),
        },
      },
    },
    '/api/v1/tenant-discovery': {
      post: {
        operationId: 'discoverTenants',
        tags: ['Public'],
        summary: 'Email a user the tenants they belong to',
        description: 'The same 200 whatever the address: if users have it, an email listing their tenants and where to sign in is queued (at most one per address every 15 minutes). 10 per minute per client IP.',
        security: [],
        parameters: [IDEMPOTENCY_KEY],
        requestBody: body('TenantDiscovery'),
        responses: {
          200: { description: 'Always this answer.', ...json(ref('DiscoveryAccepted')) },
          400: refusal([M.validation, M.idempotencyLength]),
          ...door,
          503: refusal([M.unavailable], RETRY_AFTER),
        },
      },
    },
  };
}

/** An operation of the route table as documented. */
interface Operation {
  id: string;
  summary: string;
  description?: string;
  /** The success body's JSON Schema (none for 204). */
  ok?: Json;
  /** A success body that is not JSON: its content by media type. */
  content?: Json;
  /** Its own refusals, by status. */
  refusals?: Record<number, string[]>;
  parameters?: Json[];
}

/** `limit` and `before` of a listing newest first (relay/submissions.ts#pageLimit). */
const PAGE_PARAMETERS = [
  { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE, default: 50 } },
  { name: 'before', in: 'query', required: false, schema: { type: 'string' }, description: 'nextBefore of the previous page.' },
];
const TEMPLATE_COUNT_CAP = `A tenant keeps at most ${TEMPLATE_LIMITS.perTenant} templates: delete one first`;
const TEMPLATE_BYTES_CAP = `A tenant's templates hold at most ${TEMPLATE_LIMITS.tenantBytes.toLocaleString('en-US')} bytes together (names, subjects and HTML in UTF-8): with this one they would hold <n>`;

/** A route that reads storage: under the statement limits, in turns of the read gate (core/read-gate.ts). */
const STORAGE = (what: string) => ({
  422: ['The <search or listing> ran longer than <s> s, the limit, and was stopped. <what to narrow> (likewise for rows or bytes read, the answer\'s size, memory)'],
  429: ['Too many reads at once for this tenant: wait for the ones under way'],
  503: [`${what} read from storage, which this process does not open: set CLICKHOUSE_URL on it`, M.unavailable, 'Storage is busy with other reads: try again in a moment'],
});

const OPERATIONS: Record<string, Operation> = {
  'GET /api/v1/health': { id: 'getHealth', summary: 'Liveness probe', ok: ref('Health') },
  'GET /api/v1/openapi.json': DOCS_OPERATIONS['/api/v1/openapi.json']!,
  'GET /api/v1/docs': DOCS_OPERATIONS['/api/v1/docs']!,
  'GET /api/v1/docs/assets/:file': DOCS_OPERATIONS['/api/v1/docs/assets/{file}']!,
  'POST /api/v1/admin/tenants': {
    id: 'onboardTenant',
    summary: 'Onboard a tenant and its first owner',
    description: 'For the operator (x-operator-token). Without owner.password, a one-time password is made up and returned this once.',
    ok: ref('OnboardedTenant'),
  },
  'POST /api/v1/admin/login': {
    id: 'login',
    summary: 'Sign in',
    description: 'A session of 12 hours. An email is unique within a tenant only: when the password opens accounts in several tenants, the 409 lists them and the client signs in again with one tenantId.',
    ok: ref('Session'),
    refusals: { 401: ['Invalid email or password'], 409: [CHOOSE_TENANT_MESSAGE] },
  },
  'POST /api/v1/admin/claim': {
    id: 'claimTenant',
    summary: 'Become the owner of a tenant handed over',
    description: 'With the claim token of POST /api/v1/admin/tenant/handover: the claimant becomes an owner, the owners who handed over become admins.',
    ok: ref('ClaimedTenant'),
    refusals: { 404: ['Claim token not found or expired'], 409: [M.emailTaken] },
  },
  'GET /api/v1/admin/me': { id: 'getMe', summary: 'The signed-in user and their tenant', ok: ref('Me') },
  'POST /api/v1/admin/me/password': {
    id: 'changePassword',
    summary: 'Change your password',
    description: 'Every other session of the user ends; the answer is a fresh one. A wrong current password counts toward the account\'s sign-in lockout; while it holds, the change is refused with 429, the right password too.',
    ok: ref('Session'),
    refusals: { 401: ['Current password is wrong'], 429: [M.throttled] },
  },
  'DELETE /api/v1/admin/session': { id: 'logout', summary: 'Sign out', description: 'Ends this session: its token is refused from now on, on every gateway. Other sessions of the user go on.' },
  'GET /api/v1/admin/tenant': { id: 'getTenant', summary: 'Your tenant', ok: ref('Tenant') },
  'PATCH /api/v1/admin/tenant': { id: 'updateTenant', summary: 'Rename your tenant', ok: ref('Tenant') },
  'POST /api/v1/admin/tenant/handover': {
    id: 'createHandover',
    summary: 'Create a claim token to hand the tenant over',
    description: `Single use, valid ${CLAIM_TTL_HOURS} hours, shown this once. It stops working when any claim of the tenant is redeemed, or when its maker is no longer an active owner.`,
    ok: ref('Handover'),
    refusals: { 409: [`A tenant has at most ${MAX_OPEN_CLAIMS} open claim tokens: revoke one first (DELETE /api/v1/admin/tenant/handover/<id>)`] },
  },
  'GET /api/v1/admin/tenant/handover': { id: 'listHandovers', summary: 'The tenant\'s claim tokens that could still be redeemed (not the tokens)', ok: list('Claim') },
  'DELETE /api/v1/admin/tenant/handover/:claimId': { id: 'revokeHandover', summary: 'Revoke a claim token' },
  'GET /api/v1/admin/sites': { id: 'listSites', summary: 'List sites', ok: list('Site') },
  'POST /api/v1/admin/sites': { id: 'createSite', summary: 'Create a site', description: 'Its siteKey is generated.', ok: ref('Site') },
  'GET /api/v1/admin/sites/:siteId': { id: 'getSite', summary: 'Get a site', ok: ref('Site') },
  'PATCH /api/v1/admin/sites/:siteId': { id: 'updateSite', summary: 'Update a site', ok: ref('Site') },
  'PUT /api/v1/admin/sites/:siteId/captcha': {
    id: 'setCaptcha',
    summary: 'Set the site\'s CAPTCHA provider',
    description: 'Without secret, the stored one is kept when the provider stays the same; with another provider, submissions are refused (503) until a secret is set.',
   
    ok: ref('Site'),
  },
  'DELETE /api/v1/admin/sites/:siteId/captcha': { id: 'removeCaptcha', summary: 'Remove the site\'s CAPTCHA', ok: ref('Site') },
  'DELETE /api/v1/admin/sites/:siteId/captcha/secret': {
    id: 'removeCaptchaSecret',
    summary: 'Remove the CAPTCHA secret, keeping the provider',
    description: 'Submissions are refused (503) until a secret is set.',
   
    ok: ref('Site'),
    refusals: { 404: ['CAPTCHA configuration not found'] },
  },
  'GET /api/v1/admin/sites/:siteId/forms': { id: 'listForms', summary: 'List a site\'s forms', ok: list('Form') },
  'POST /api/v1/admin/sites/:siteId/forms': {
    id: 'createForm',
    summary: 'Create a form',
   
    ok: ref('Form'),
    refusals: { 404: ['Template not found'], 409: ['A form with formKey <formKey> already exists on this site'] },
  },
  'GET /api/v1/admin/sites/:siteId/forms/:formId': { id: 'getForm', summary: 'Get a form', ok: ref('Form') },
  'PATCH /api/v1/admin/sites/:siteId/forms/:formId': { id: 'updateForm', summary: 'Update a form', ok: ref('Form'), refusals: { 404: ['Template not found'] } },
  'POST /api/v1/admin/sites/:siteId/forms/:formId/recipients': {
    id: 'addRecipient',
    summary: 'Add a recipient to a form',
   
    ok: ref('Recipient'),
    refusals: { 409: ['This recipient is already configured on the form'] },
  },
  'PATCH /api/v1/admin/sites/:siteId/forms/:formId/recipients/:recipientId': { id: 'updateRecipient', summary: 'Activate or deactivate a recipient', ok: ref('Recipient') },
  'DELETE /api/v1/admin/sites/:siteId/forms/:formId/recipients/:recipientId': { id: 'removeRecipient', summary: 'Remove a recipient' },
  'POST /api/v1/admin/sites/:siteId/forms/:formId/webhooks': {
    id: 'addWebhook',
    summary: 'Add a webhook to a form',
    description: 'Its signing secret is in the answer this once.',
   
    ok: ref('NewWebhook'),
  },
  'PATCH /api/v1/admin/sites/:siteId/forms/:formId/webhooks/:webhookId': {
    id: 'updateWebhook',
    summary: 'Update a webhook or rotate its secret',
   
    ok: ref('UpdatedWebhook'),
  },
  'DELETE /api/v1/admin/sites/:siteId/forms/:formId/webhooks/:webhookId': { id: 'removeWebhook', summary: 'Remove a webhook' },
  'GET /api/v1/admin/sites/:siteId/forms/:formId/submissions': {
    id: 'listSubmissions',
    summary: 'A form\'s stored submissions, newest first',
    ok: ref('SubmissionPage'),
    parameters: [...PAGE_PARAMETERS, { name: 'q', in: 'query', required: false, schema: { type: 'string', minLength: 1, maxLength: MAX_SEARCH_CHARS }, description: 'Only submissions whose data, subject or body holds this text (any case).' }],
    refusals: { 400: [M.validation], ...STORAGE('Submissions are') },
  },
  'GET /api/v1/admin/sites/:siteId/forms/:formId/jobs': {
    id: 'listJobs',
    summary: 'A form\'s delivery jobs, dead first',
    ok: ref('JobList'),
    parameters: [
      { name: 'state', in: 'query', required: false, schema: { enum: [...JOB_STATES] }, description: 'Only jobs in this state.' },
      { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
    ],
    refusals: { 400: [M.validation], ...STORAGE('The delivery history is') },
  },
  'POST /api/v1/admin/sites/:siteId/forms/:formId/jobs/retry-dead': {
    id: 'retryDeadJobs',
    summary: 'Retry every dead job of a form',
    description: 'Up to 1000 a call; `more` says whether to call again.',
   
    ok: ref('RetriedDeadJobs'),
    refusals: STORAGE('The delivery history is'),
  },
  'GET /api/v1/admin/jobs/:jobId': { id: 'getJob', summary: 'A delivery job with every attempt', ok: ref('JobDetail'), refusals: STORAGE('The delivery history is') },
  'POST /api/v1/admin/jobs/:jobId/retry': {
    id: 'retryJob',
    summary: 'Retry a dead job',
    description: 'A fresh series of attempts, recorded once it is queued: a retry the delivery queue refuses (503) leaves the job dead.',
   
    ok: ref('RetriedJob'),
    refusals: { 409: ['Only a dead job can be retried; this one is <state>'], ...STORAGE('The delivery history is') },
  },
  'GET /api/v1/admin/inbox': {
    id: 'listInbox',
    summary: 'What the development inbox kept instead of sending, newest first',
    description: `Only with SLUICE_DELIVERY_INBOX=true (embedded default, for development): every email, WhatsApp message and webhook of the tenant as it would have been sent (the newest ${INBOX_LIMITS.messages.toLocaleString('en-US')}, for ${INBOX_LIMITS.days} days). The html part is HTML a visitor filled in: show it as text or in a sandboxed frame.`,
    ok: ref('InboxPage'),
    parameters: [{ name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: MAX_INBOX_PAGE, default: DEFAULT_INBOX_PAGE } }],
    refusals: { 400: [M.validation], 404: [INBOX_OFF_MESSAGE] },
  },
  'GET /api/v1/admin/delivery-settings': { id: 'getDeliverySettings', summary: 'How the tenant\'s messages go out', ok: ref('DeliverySettings') },
  'PUT /api/v1/admin/delivery-settings': {
    id: 'putDeliverySettings',
    summary: 'Set the tenant\'s email and WhatsApp settings',
    description: 'A part given as null is removed (the server\'s defaults apply). Tokens and SMTP URLs are stored sealed and never shown.',
   
    ok: ref('DeliverySettings'),
  },
  'GET /api/v1/admin/templates': {
    id: 'listTemplates',
    summary: 'The tenant\'s templates, newest first, without their HTML',
    ok: ref('TemplatePage'),
    parameters: PAGE_PARAMETERS,
    refusals: { 400: [M.validation] },
  },
  'POST /api/v1/admin/templates': {
    id: 'createTemplate',
    summary: 'Create a template',
    description: `At most ${TEMPLATE_LIMITS.placeholders} placeholders and ${TEMPLATE_LIMITS.fieldsUses} {{ @fields }} in the subject and in the html; a tenant keeps at most ${TEMPLATE_LIMITS.perTenant} templates of ${TEMPLATE_LIMITS.tenantBytes.toLocaleString('en-US')} bytes together.`,
   
    ok: ref('Template'),
    refusals: { 409: [TEMPLATE_COUNT_CAP, TEMPLATE_BYTES_CAP] },
  },
  'POST /api/v1/admin/templates/preview': {
    id: 'previewTemplate',
    summary: 'Render a template with sample data',
    description: 'As a delivery renders it; `data` is checked as a submission\'s.',
   
    ok: ref('TemplatePreview'),
    refusals: { 404: ['Template not found'], 422: [`The rendered message would be <n> characters (HTML and text parts), <n> over the limit of ${MAX_MESSAGE_CHARS.toLocaleString('en-US')}`] },
  },
  'GET /api/v1/admin/templates/:templateId': { id: 'getTemplate', summary: 'Get a template', ok: ref('Template') },
  'PATCH /api/v1/admin/templates/:templateId': { id: 'updateTemplate', summary: 'Update a template', ok: ref('Template'), refusals: { 409: [TEMPLATE_BYTES_CAP] } },
  'DELETE /api/v1/admin/templates/:templateId': {
    id: 'deleteTemplate',
    summary: 'Delete a template no form uses',
   
    refusals: { 409: ['The template is used by <n> form(s): set their templateId to another template or null first'] },
  },
  'GET /api/v1/admin/users': { id: 'listUsers', summary: 'List the tenant\'s users', ok: list('User') },
  'POST /api/v1/admin/users': {
    id: 'createUser',
    summary: 'Invite a user',
    description: 'Admins invite members and admins, owners anyone. Without password, a one-time password is returned this once.',
   
    ok: ref('NewUser'),
    refusals: { 409: [M.emailTaken] },
  },
  'GET /api/v1/admin/users/:userId': { id: 'getUser', summary: 'Get a user', ok: ref('User') },
  'PATCH /api/v1/admin/users/:userId': {
    id: 'updateUser',
    summary: 'Rename, change the role of, or deactivate a user',
    description: 'A deactivation ends the user\'s sessions.',
   
    ok: ref('User'),
    refusals: { 409: ['A tenant keeps at least one active owner'] },
  },
  'GET /api/v1/admin/api-keys': { id: 'listApiKeys', summary: 'List API keys', ok: list('ApiKey') },
  'POST /api/v1/admin/api-keys': {
    id: 'createApiKey',
    summary: 'Issue an API key for one site',
    description: 'The key is in the answer this once; only its hash is stored.',
   
    ok: ref('NewApiKey'),
    refusals: { 404: ['Site not found'] },
  },
  'DELETE /api/v1/admin/api-keys/:keyId': { id: 'revokeApiKey', summary: 'Revoke an API key', description: 'At once, on every gateway.', ok: ref('ApiKey') },
};

/** What an id in the path that the tenant has not answers. */
const NOT_FOUND: Record<string, string> = {
  siteId: 'Site not found',
  formId: 'Form not found',
  recipientId: 'Recipient not found',
  webhookId: 'Webhook not found',
  templateId: 'Template not found',
  userId: 'User not found',
  keyId: 'API key not found',
  jobId: 'Job not found',
  claimId: 'Claim not found',
  file: 'Docs asset not found',
};

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

type Refusals = Record<number, string[]>;

/** The refusals of a route: its access, its body, its path, its rights, then its own. */
function refusalsOf(method: string, pattern: string, access: string, params: string[], operation: Operation): Refusals {
  const all: Refusals = {};
  const add = (status: number, ...messages: string[]) => (all[status] = [...new Set([...(all[status] ?? []), ...messages])]);
  if (access === 'signin' || access === 'operator') add(429, M.throttled);
  if (access === 'operator') {
    add(401, 'Invalid operator token');
    add(403, 'Onboarding over HTTP is disabled: set SLUICE_RELAY_OPERATOR_TOKEN, or use `sluice relay onboard`');
  }
  const signedIn = access in RIGHTS;
  if (signedIn) add(401, M.noSession, M.badSession);
  if (signedIn && access !== 'self') add(403, M.passwordChange);
  if (['POST', 'PUT', 'PATCH'].includes(method)) {
    add(400, ...(BODIES[`${method} ${pattern}`] ? [M.validation] : []), 'Body is not valid JSON', 'Body is not valid UTF-8', 'Body is nested deeper than 32 levels');
    add(408, M.timeout);
    add(413, M.tooLarge, M.overBudget);
    add(415, 'Content-Type must be application/json');
    // The body takes the process's in-flight budget as it arrives.
    add(503, M.unavailable);
  }
  for (const param of params) add(404, NOT_FOUND[param]!);
  // The route's right (accounts/rights.ts); users are also checked by the target's role: only owners make or change owners.
  const needed = signedIn ? RIGHTS[access as Right] : 'member';
  if (needed !== 'member') add(403, refusalMessage(needed));
  if (access === 'manageUsers') add(403, refusalMessage('owner'));
  for (const [status, messages] of Object.entries(operation.refusals ?? {})) add(Number(status), ...messages);
  return all;
}

/** The success answer of a route: its body, or nothing (204). */
function success(status: number, operation: Operation): Json {
  if (status === 204) return { description: 'Done (no body).' };
  const description = status === 201 ? 'Created.' : status === 202 ? 'Accepted: queued for delivery.' : 'OK.';
  return { description, ...(operation.content ? { content: operation.content } : json(operation.ok!)) };
}

const securityOf = (access: string): unknown[] => (access in RIGHTS ? [{ session: [] }] : access === 'operator' ? [{ operator: [] }] : []);

export function relayOpenApiDocument(): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = publicPaths();
  for (const { method, pattern, access, status } of relayRouteList()) {
    const key = `${method} ${pattern}`;
    const operation = OPERATIONS[key];
    if (!operation) throw new Error(`relay/openapi.ts documents no ${key}`);
    const path = pattern.replace(/:(\w+)/g, '{$1}');
    const params = [...pattern.matchAll(/:(\w+)/g)].map(([, name]) => name!);
    const parameters = [
      ...params.map((name) => (name === 'file' ? DOCS_ASSET_PARAMETER : { name, in: 'path', required: true, schema: { type: 'string' } })),
      ...(operation.parameters ?? []),
    ];
    const schema = BODIES[key];
    const refusals = refusalsOf(method, pattern, access, params, operation);
    (paths[path] ??= {})[method.toLowerCase()] = {
      operationId: operation.id,
      tags: [path.startsWith('/api/v1/admin') ? 'Admin' : 'Operations'],
      summary: operation.summary,
      ...(operation.description ? { description: operation.description } : {}),
      security: securityOf(access),
      ...(parameters.length ? { parameters } : {}),
      ...(schema ? { requestBody: { required: true, ...json(ref(schema)) } } : {}),
      responses: {
        [status]: success(status, operation),
        ...Object.fromEntries(Object.entries(refusals).map(([code, messages]) => [code, refusal(messages, code === '429' || code === '503' ? RETRY_AFTER : {})])),
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      ...OPENAPI_INFO,
      title: 'Sluice notification relay',
      description: 'Public endpoints: form submissions from browsers, notifications from backends, tenant discovery. Admin API: tenants, sites, forms, recipients, webhooks, templates, users, API keys, stored submissions, delivery jobs (attempts, manual retries), delivery settings and the development inbox. Every error is `{ message, statusCode }`.',
    },
    servers: [{ url: '/', description: 'This relay port (8080 by default).' }],
    tags: [
      { name: 'Public', description: 'What websites and customer backends call.' },
      { name: 'Admin', description: 'Configuration and history, for the tenant\'s users (a session from POST /api/v1/admin/login).' },
      { name: 'Operations', description: 'Liveness and this documentation.' },
    ],
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
        ...RESPONSE_SCHEMAS,
      },
    },
  };
}
