/**
 * The relay's HTTP API on its own port (SLUICE_RELAY_PORT): JSON only, every path under
 * /api/v1, every error `{ "message", "statusCode" }`. This file has the admin API; each
 * route checks the session, then calls RelayAdmin, which enforces tenant and role.
 */
import { timingSafeEqual } from 'node:crypto';
import { docsAsset, docsPage, type OpenApiDocument } from '../core/api-docs.ts';
import type { ByteBudget } from '../core/byte-budget.ts';
import type { Logger } from '../core/log.ts';
import type { HttpHandler, HttpRequest, HttpResponse } from '../gateway/http/adapter.ts';
import { apiErrorResponse, JSON_TYPE, matchPath, readJsonBody } from '../gateway/http/json-api.ts';
import type { Limiter } from '../gateway/limiter.ts';
import type { ClientIpResolver } from '../gateway/client-ip.ts';
import { userView, type Actor, type RelayAdmin } from './admin/index.ts';
import type { AdminSessions } from './auth.ts';
import { forbidden, notFound, RelayError } from './errors.ts';
import { mayDo, refusalMessage, RIGHTS, type Right } from '../accounts/rights.ts';
import type { User } from '../accounts/model.ts';
import type { PageQuery, SubmissionQuery } from './submissions.ts';

export interface RelayHttpDeps {
  admin: RelayAdmin;
  sessions: AdminSessions;
  /** Guards login, claim and onboarding against guessing (per client IP). */
  signInLimiter: Limiter;
  clientIp: ClientIpResolver;
  /** SLUICE_RELAY_OPERATOR_TOKEN: enables POST /api/v1/admin/tenants when set. */
  operatorToken: string;
  openApi: () => OpenApiDocument;
  /** The process's in-flight byte budget: an admin body takes its bytes from it as they arrive. */
  budget: ByteBudget;
  /** The public endpoints by `METHOD path` (relay/public.ts): they answer for themselves. */
  publicRoutes: Record<string, HttpHandler>;
  log: Logger;
}

interface Call {
  request: HttpRequest;
  params: Record<string, string>;
  /** The parsed JSON body (POST, PUT, PATCH). */
  body: unknown;
}

/**
 * Who may call a route: anyone ('public'; 'signin', limited per client), the operator's token,
 * or a signed-in user with a right (accounts/rights.ts). Only 'self' routes are open to a user
 * who still has to change a one-time password.
 */
type Access = 'public' | 'signin' | 'operator' | Right;
interface Route {
  method: string;
  pattern: string;
  access: Access;
  /** Returns the response body (201 for POST unless `status` says otherwise). */
  run: (call: Call, actor: SignedInActor) => unknown;
  status?: number;
}


/** Who calls: for a signed-in user, also the user and the session (sign-out). */
type SignedInActor = Actor & { user?: User; sessionId?: string };

/** A route result sent as it is rather than as JSON (the docs page and its files). */
class Verbatim {
  constructor(readonly response: HttpResponse) {}
}

function routes(deps: RelayHttpDeps): Route[] {
  const { admin } = deps;
  const r = (method: string, pattern: string, access: Access, run: Route['run'], status?: number): Route => ({ method, pattern, access, run, status });
  const p = (call: Call, name: string) => call.params[name]!;
  return [
    r('GET', '/api/v1/health', 'public', () => ({ status: 'ok', service: 'sluice-relay' })),
    r('GET', '/api/v1/openapi.json', 'public', () => deps.openApi()),
    r('GET', '/api/v1/docs', 'public', async () => new Verbatim(await docsPage(deps.openApi().info.title))),
    r('GET', '/api/v1/docs/assets/:file', 'public', async (c) => {
      const asset = await docsAsset(p(c, 'file'));
      if (!asset) throw notFound('Docs asset');
      return new Verbatim(asset);
    }),
    r('POST', '/api/v1/admin/tenants', 'operator', (c) => admin.tenants.onboard(c.body)),
    r('POST', '/api/v1/admin/login', 'signin', (c) => admin.tenants.login(c.body), 200),
    r('POST', '/api/v1/admin/claim', 'signin', (c) => admin.handovers.claim(c.body), 200),
    r('GET', '/api/v1/admin/me', 'self', (_c, a) => ({ user: userView(a.user!), tenant: admin.tenants.get(a) })),
    r('POST', '/api/v1/admin/me/password', 'self', (c, a) => admin.tenants.changePassword(a.user!, c.body), 200),
    r('DELETE', '/api/v1/admin/session', 'self', (_c, a) => deps.sessions.end(a.sessionId!), 204),
    r('GET', '/api/v1/admin/tenant', 'read', (_c, a) => admin.tenants.get(a)),
    r('PATCH', '/api/v1/admin/tenant', 'own', (c, a) => admin.tenants.update(a, c.body)),
    r('POST', '/api/v1/admin/tenant/handover', 'own', (_c, a) => admin.handovers.create(a)),
    r('GET', '/api/v1/admin/tenant/handover', 'own', (_c, a) => admin.handovers.list(a)),
    r('DELETE', '/api/v1/admin/tenant/handover/:claimId', 'own', (c, a) => admin.handovers.revoke(a, p(c, 'claimId')), 204),
    r('GET', '/api/v1/admin/sites', 'read', (_c, a) => admin.sites.list(a)),
    r('POST', '/api/v1/admin/sites', 'configure', (c, a) => admin.sites.create(a, c.body)),
    r('GET', '/api/v1/admin/sites/:siteId', 'read', (c, a) => admin.sites.get(a, p(c, 'siteId'))),
    r('PATCH', '/api/v1/admin/sites/:siteId', 'configure', (c, a) => admin.sites.update(a, p(c, 'siteId'), c.body)),
    r('PUT', '/api/v1/admin/sites/:siteId/captcha', 'configure', (c, a) => admin.sites.setCaptcha(a, p(c, 'siteId'), c.body), 200),
    r('DELETE', '/api/v1/admin/sites/:siteId/captcha', 'configure', (c, a) => admin.sites.removeCaptcha(a, p(c, 'siteId'))),
    r('DELETE', '/api/v1/admin/sites/:siteId/captcha/secret', 'configure', (c, a) => admin.sites.removeCaptchaSecret(a, p(c, 'siteId')), 200),
    r('GET', '/api/v1/admin/sites/:siteId/forms', 'read', (c, a) => admin.forms.list(a, p(c, 'siteId'))),
    r('POST', '/api/v1/admin/sites/:siteId/forms', 'configure', (c, a) => admin.forms.create(a, p(c, 'siteId'), c.body)),
    r('GET', '/api/v1/admin/sites/:siteId/forms/:formId', 'read', (c, a) => admin.forms.get(a, p(c, 'siteId'), p(c, 'formId'))),
    r('PATCH', '/api/v1/admin/sites/:siteId/forms/:formId', 'configure', (c, a) => admin.forms.update(a, p(c, 'siteId'), p(c, 'formId'), c.body)),
    r('POST', '/api/v1/admin/sites/:siteId/forms/:formId/recipients', 'configure', (c, a) => admin.forms.addRecipient(a, p(c, 'siteId'), p(c, 'formId'), c.body)),
    r('PATCH', '/api/v1/admin/sites/:siteId/forms/:formId/recipients/:recipientId', 'configure', (c, a) =>
      admin.forms.updateRecipient(a, p(c, 'siteId'), p(c, 'formId'), p(c, 'recipientId'), c.body)),
    r('DELETE', '/api/v1/admin/sites/:siteId/forms/:formId/recipients/:recipientId', 'configure', (c, a) =>
      admin.forms.removeRecipient(a, p(c, 'siteId'), p(c, 'formId'), p(c, 'recipientId')), 204),
    r('POST', '/api/v1/admin/sites/:siteId/forms/:formId/webhooks', 'configure', (c, a) => admin.forms.addWebhook(a, p(c, 'siteId'), p(c, 'formId'), c.body)),
    r('PATCH', '/api/v1/admin/sites/:siteId/forms/:formId/webhooks/:webhookId', 'configure', (c, a) =>
      admin.forms.updateWebhook(a, p(c, 'siteId'), p(c, 'formId'), p(c, 'webhookId'), c.body)),
    r('DELETE', '/api/v1/admin/sites/:siteId/forms/:formId/webhooks/:webhookId', 'configure', (c, a) =>
      admin.forms.removeWebhook(a, p(c, 'siteId'), p(c, 'formId'), p(c, 'webhookId')), 204),
    r('GET', '/api/v1/admin/sites/:siteId/forms/:formId/submissions', 'read', (c, a) =>
      admin.forms.listSubmissions(a, p(c, 'siteId'), p(c, 'formId'), submissionQuery(c.request.query))),
    r('GET', '/api/v1/admin/sites/:siteId/forms/:formId/jobs', 'read', (c, a) =>
      admin.delivery.listJobs(a, p(c, 'siteId'), p(c, 'formId'), jobQuery(c.request.query))),
    r('POST', '/api/v1/admin/sites/:siteId/forms/:formId/jobs/retry-dead', 'configure', (c, a) => admin.delivery.retryDeadJobs(a, p(c, 'siteId'), p(c, 'formId')), 202),
    r('GET', '/api/v1/admin/jobs/:jobId', 'read', (c, a) => admin.delivery.getJob(a, p(c, 'jobId'))),
    r('POST', '/api/v1/admin/jobs/:jobId/retry', 'configure', (c, a) => admin.delivery.retryJob(a, p(c, 'jobId')), 202),
    r('GET', '/api/v1/admin/inbox', 'read', (c, a) => admin.inbox.list(a.tenantId, inboxQuery(c.request.query))),
    r('GET', '/api/v1/admin/delivery-settings', 'read', (_c, a) => admin.delivery.getSettings(a)),
    r('PUT', '/api/v1/admin/delivery-settings', 'configure', (c, a) => admin.delivery.putSettings(a, c.body)),
    r('GET', '/api/v1/admin/templates', 'read', (c, a) => admin.templates.list(a, pageQuery(c.request.query))),
    r('POST', '/api/v1/admin/templates', 'configure', (c, a) => admin.templates.create(a, c.body)),
    r('POST', '/api/v1/admin/templates/preview', 'configure', (c, a) => admin.templates.preview(a, c.body), 200),
    r('GET', '/api/v1/admin/templates/:templateId', 'read', (c, a) => admin.templates.get(a, p(c, 'templateId'))),
    r('PATCH', '/api/v1/admin/templates/:templateId', 'configure', (c, a) => admin.templates.update(a, p(c, 'templateId'), c.body)),
    r('DELETE', '/api/v1/admin/templates/:templateId', 'configure', (c, a) => admin.templates.delete(a, p(c, 'templateId')), 204),
    r('GET', '/api/v1/admin/users', 'read', (_c, a) => admin.users.list(a)),
    r('POST', '/api/v1/admin/users', 'manageUsers', (c, a) => admin.users.create(a, c.body)),
    r('GET', '/api/v1/admin/users/:userId', 'read', (c, a) => admin.users.get(a, p(c, 'userId'))),
    r('PATCH', '/api/v1/admin/users/:userId', 'manageUsers', (c, a) => admin.users.update(a, p(c, 'userId'), c.body)),
    r('GET', '/api/v1/admin/api-keys', 'read', (_c, a) => admin.apiKeys.list(a)),
    r('POST', '/api/v1/admin/api-keys', 'configure', (c, a) => admin.apiKeys.create(a, c.body)),
    r('DELETE', '/api/v1/admin/api-keys/:keyId', 'configure', (c, a) => admin.apiKeys.revoke(a, p(c, 'keyId')), 200),
  ];
}

/** `?limit=50&before=<cursor>` of a listing. */
function pageQuery(query: string): PageQuery {
  const params = new URLSearchParams(query);
  const before = params.get('before');
  return { ...limitParam(params), ...(before !== null ? { before } : {}) };
}

/** A page of submissions, and `?q=` to search them. */
function submissionQuery(query: string): SubmissionQuery {
  const q = new URLSearchParams(query).get('q');
  return { ...pageQuery(query), ...(q !== null ? { q } : {}) };
}

function jobQuery(query: string): { state?: string; limit?: number } {
  const params = new URLSearchParams(query);
  const state = params.get('state');
  return { ...limitParam(params), ...(state !== null ? { state } : {}) };
}

/** `?limit=50` of the development inbox's listing. */
function inboxQuery(query: string): { limit?: number } {
  return limitParam(new URLSearchParams(query));
}

/** `limit` as a number (NaN when it is not digits: the operation refuses it, naming the field). */
function limitParam(params: URLSearchParams): { limit?: number } {
  const limit = params.get('limit');
  return limit === null ? {} : { limit: /^\d+$/.test(limit) ? Number(limit) : NaN };
}

/** The status of a route's success. */
function successStatus(route: Route): number {
  return route.status ?? (route.method === 'POST' ? 201 : 200);
}

/** The routes as data, for the OpenAPI document (the handlers are never called: no deps needed). */
export function relayRouteList(): Array<{ method: string; pattern: string; access: Access; status: number }> {
  return routes({} as RelayHttpDeps).map((route) => ({ method: route.method, pattern: route.pattern, access: route.access, status: successStatus(route) }));
}

/** A call of the admin API on behalf of a user signed in elsewhere (the console): its path under /api/v1/admin. */
export interface AdminBridgeCall {
  method: string;
  /** E.g. `/sites/site_1/forms`. */
  path: string;
  /** The query string, without `?`. */
  query: string;
  body: unknown;
}

/**
 * The admin API for the console's own routes (`/api/relay/…`): the same routes, the same
 * rights checked the same way, the actor the console's signed-in user. Only routes of a user's
 * rights: not sign-in, onboarding or one's own session and password (the console has its own).
 */
export function relayAdminBridge(admin: RelayAdmin): (user: User, call: AdminBridgeCall) => Promise<{ status: number; body: unknown }> {
  const USER_RIGHTS = new Set<Access>(['read', 'configure', 'manageUsers', 'own']);
  const table = routes({ admin } as RelayHttpDeps).filter((route) => USER_RIGHTS.has(route.access));
  return async (user, call) => {
    const path = `/api/v1/admin${call.path}`;
    const matching = table.map((route) => ({ route, params: matchPath(route.pattern, path) })).filter((m) => m.params);
    if (matching.length === 0) throw new RelayError(404, `Cannot ${call.method} /api/relay${call.path}`);
    const found = matching.find((m) => m.route.method === call.method);
    if (!found) throw new RelayError(405, `${call.method} is not allowed on /api/relay${call.path}`);
    const { route } = found;
    if (!mayDo(user.role, route.access as Right)) throw forbidden(refusalMessage(RIGHTS[route.access as Right]));
    const request = { method: call.method, path, query: call.query, headers: {} } as unknown as HttpRequest;
    const result = await route.run({ request, params: found.params!, body: call.body }, { tenantId: user.tenantId, role: user.role, userId: user.id, user });
    const status = successStatus(route);
    return { status, body: status === 204 ? undefined : result };
  };
}

export function relayHandler(deps: RelayHttpDeps): HttpHandler {
  const table = routes(deps);
  return async (request) => {
    const publicRoute = deps.publicRoutes[`${request.method} ${request.path}`];
    if (publicRoute) return publicRoute(request);
    try {
      const publicMethods = Object.keys(deps.publicRoutes).filter((key) => key.endsWith(` ${request.path}`)).map((key) => key.split(' ')[0]!);
      if (publicMethods.length > 0) {
        const response = errorResponse(new RelayError(405, `${request.method} is not allowed on ${request.path}`), deps.log);
        response.headers!.allow = publicMethods.join(', ');
        return response;
      }
      const matching = table.map((route) => ({ route, params: matchPath(route.pattern, request.path) })).filter((m) => m.params);
      if (matching.length === 0) throw new RelayError(404, `Cannot ${request.method} ${request.path}`);
      const found = matching.find((m) => m.route.method === request.method || (request.method === 'HEAD' && m.route.method === 'GET'));
      if (!found) {
        const response = errorResponse(new RelayError(405, `${request.method} is not allowed on ${request.path}`), deps.log);
        response.headers!.allow = [...new Set(matching.map((m) => m.route.method))].join(', ');
        return response;
      }
      const { route } = found;
      const params = found.params!;
      const actor = await admit(deps, route.access, request);
      const body = ['POST', 'PUT', 'PATCH'].includes(route.method) ? await readJsonBody(request, deps.budget) : undefined;
      const result = await route.run({ request, params, body }, actor);
      const status = successStatus(route);
      if (status === 204) return { status: 204 };
      if (result instanceof Verbatim) return result.response;
      return { status, headers: { 'content-type': JSON_TYPE, 'cache-control': 'no-store' }, body: JSON.stringify(result) };
    } catch (err) {
      return errorResponse(err, deps.log);
    }
  };
}

async function admit(deps: RelayHttpDeps, access: Access, request: HttpRequest): Promise<SignedInActor> {
  switch (access) {
    case 'public':
      return { tenantId: '', role: 'member' };
    case 'signin':
    case 'operator': {
      const decision = await deps.signInLimiter.take(deps.clientIp(request.remoteAddress, request.headers['x-forwarded-for']));
      if (!decision.allowed) throw new RelayError(429, 'ThrottlerException: Too Many Requests', { retryAfterSeconds: decision.retryAfterSeconds });
      if (access === 'operator') checkOperator(deps.operatorToken, request.headers['x-operator-token']);
      return { tenantId: '', role: 'member' };
    }
    default: {
      const { user, sessionId } = await deps.sessions.authenticate(request.headers.authorization);
      if (access !== 'self' && user.mustChangePassword) {
        throw forbidden('Password change required: POST /api/v1/admin/me/password with the one-time password as currentPassword');
      }
      if (!mayDo(user.role, access)) throw forbidden(refusalMessage(RIGHTS[access]));
      return { tenantId: user.tenantId, role: user.role, userId: user.id, user, sessionId };
    }
  }
}

function checkOperator(configured: string, presented: string | undefined): void {
  if (!configured) throw forbidden('Onboarding over HTTP is disabled: set SLUICE_RELAY_OPERATOR_TOKEN, or use `sluice relay onboard`');
  const a = Buffer.from(configured);
  const b = Buffer.from(presented ?? '');
  if (a.length !== b.length || !timingSafeEqual(a, b)) throw new RelayError(401, 'Invalid operator token');
}

/** The one mapping of an error to the relay's answer (gateway/http/json-api.ts). */
export function errorResponse(err: unknown, log: Logger, headers: Record<string, string> = {}): HttpResponse {
  return apiErrorResponse(err, log, 'relay', headers);
}
