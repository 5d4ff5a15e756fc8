/**
 * The console's port: the single-page app's files and its private API (console/ROUTES.md).
 * The API is for the app only: every call must come from the console's own origin (Origin, or
 * Sec-Fetch-Site for a same-origin GET), carry the session cookie, and on writes the session's
 * CSRF token. Everything a call reads or changes is its tenant's: ids of another tenant's
 * things answer 404, and storage is only ever asked about the tenant's own SourceIds.
 */
import type { HttpHandler, HttpRequest, HttpResponse } from '../gateway/http/adapter.ts';
import { ApiError } from '../core/errors.ts';
import { apiErrorResponse, JSON_TYPE, matchPath, readJsonBody } from '../gateway/http/json-api.ts';
import type { SignInLockout } from '../gateway/sign-in-lockout.ts';
import { CHOOSE_TENANT_MESSAGE, mayDo, refusalMessage, RIGHTS, signIn } from '../accounts/index.ts';
import type { InvitationOffer, Me, SignInRequest } from './api.ts';
import type { ConsoleAssets } from './ui/build.ts';
import type { FirstRun } from './first-run.ts';
import { validBody } from './schemas.ts';
import type { ConsoleSessions, SignedIn } from './sessions.ts';
import { alertRoutes, dashboardRoutes, inboxRoutes, queryRoutes, sourceRoutes } from './routes.ts';
import { userRoutes } from './user-routes.ts';
import type { Access, Call, ConsoleHttpDeps, RelayAdminCall, Route } from './route.ts';

export type { Access, ConsoleHttpDeps } from './route.ts';

/** A route result sent as it is (a Set-Cookie with the body). */
export class Answer {
  constructor(readonly response: HttpResponse) {}
}

/**
 * Every answer's headers: the app may load only its own files and talk only to its own origin,
 * and no other site may frame it.
 */
const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Methods whose call carries a JSON body. */
const BODIES = new Set(['POST', 'PUT', 'PATCH']);

function sessionRoutes(deps: ConsoleHttpDeps): Route[] {
  const signedIn = async (user: Parameters<ConsoleSessions['start']>[0]) => {
    const { setCookie, signedIn: session } = await deps.sessions.start(user);
    return new Answer({ status: 200, headers: { 'set-cookie': setCookie, ...jsonHeaders() }, body: JSON.stringify(me(session, deps)) });
  };
  return [
    { method: 'POST', pattern: '/api/first-run', access: 'open', run: async ({ body }) => {
      const input = validBody<{ token: string; name: string; email: string; password: string }>('FirstRun', body);
      return signedIn(await deps.firstRun.redeem(input));
    } },
    { method: 'POST', pattern: '/api/session', access: 'open', run: async ({ body }) => {
      const input = validBody<SignInRequest>('SignIn', body);
      await admitAccount(deps.signInLockout, input.email);
      const outcome = await signIn(deps.accounts, input);
      // One answer for an unknown email, a wrong password and a deactivated user or tenant.
      if (outcome.kind === 'refused') throw new ApiError(401, 'Invalid email or password');
      await deps.signInLockout.succeeded(input.email);
      if (outcome.kind === 'choose-tenant') throw new ApiError(409, CHOOSE_TENANT_MESSAGE, { tenants: outcome.tenants.map(({ id, name }) => ({ id, name })) });
      // A one-time password (from `sluice relay onboard` or an invitation) is changed before anything else.
      if (outcome.user.mustChangePassword) {
        throw new ApiError(403, 'This is a one-time password: set your own first (POST /api/v1/admin/me/password on the relay port), then sign in here');
      }
      return signedIn(outcome.user);
    } },
    { method: 'DELETE', pattern: '/api/session', access: 'self', status: 204, run: async ({ session }) => {
      const setCookie = await deps.sessions.end(session.sessionId);
      return new Answer({ status: 204, headers: { 'set-cookie': setCookie } });
    } },
    { method: 'GET', pattern: '/api/me', access: 'self', run: ({ session }) => me(session, deps) },
    // An invitation's link: what it is for, then accepting it (the new user is signed in).
    { method: 'POST', pattern: '/api/invitation', access: 'open', run: ({ body }): InvitationOffer => {
      const invitation = deps.users.pending(validBody<{ token: string }>('InvitationToken', body).token);
      return { email: invitation.email, role: invitation.role, tenant: deps.accounts.tenants.get(invitation.tenantId)?.name ?? '' };
    } },
    { method: 'POST', pattern: '/api/invitation/accept', access: 'open', run: async ({ body }) => {
      return signedIn(await deps.users.accept(validBody<{ token: string; name: string; password: string }>('AcceptInvitation', body)));
    } },
    // One's own account: a new password ends every other session (this one gets a new cookie).
    { method: 'POST', pattern: '/api/me/password', access: 'self', run: async ({ body, session }) => {
      const input = validBody<{ currentPassword: string; newPassword: string }>('ChangePassword', body);
      // A wrong current password counts as a failed sign-in: a stolen session cannot guess it at will.
      await admitAccount(deps.signInLockout, session.user.email);
      const changed = await deps.users.changePassword(session.user, input);
      await deps.signInLockout.succeeded(session.user.email);
      return signedIn(changed);
    } },
    { method: 'POST', pattern: '/api/me/sign-out-everywhere', access: 'self', status: 204, run: async ({ session }) => {
      await deps.users.signOutEverywhere(session.user);
      const setCookie = await deps.sessions.end(session.sessionId);
      return new Answer({ status: 204, headers: { 'set-cookie': setCookie } });
    } },
  ];
}

/** Counts an attempt at the account's password (sign-in, or the current one of a change), before it is checked: 429 while it is locked out. */
async function admitAccount(lockout: SignInLockout, email: string): Promise<void> {
  const attempt = await lockout.attempt(email);
  if (!attempt.allowed) throw new ApiError(429, 'Too many sign-in attempts: try again later', { retryAfterSeconds: attempt.retryAfterSeconds });
}

function me({ user, tenant, csrfToken }: SignedIn, deps: Pick<ConsoleHttpDeps, 'ingest' | 'inbox' | 'relay'>): Me {
  return {
    user: { id: user.id, email: user.email, name: user.name, role: user.role }, tenant: { id: tenant.id, name: tenant.name }, csrfToken,
    ingest: deps.ingest(), deliveryInbox: deps.inbox !== undefined, relay: deps.relay ? { url: deps.relay.url() } : null,
  };
}

const jsonHeaders = () => ({ 'content-type': JSON_TYPE, 'cache-control': 'no-store' });

function routeTable(deps: ConsoleHttpDeps): Route[] {
  return [...sessionRoutes(deps), ...sourceRoutes(deps), ...queryRoutes(deps), ...dashboardRoutes(deps), ...inboxRoutes(deps), ...alertRoutes(deps), ...userRoutes(deps)];
}

/** The routes as data, for the route-by-role test (the handlers are never called: no deps needed). */
export function consoleRouteList(): Array<{ method: string; pattern: string; access: Access }> {
  return routeTable({} as ConsoleHttpDeps).map(({ method, pattern, access }) => ({ method, pattern, access }));
}

export function consoleHandler(deps: ConsoleHttpDeps): HttpHandler {
  const table = routeTable(deps);
  const answer = (response: HttpResponse): HttpResponse => ({ ...response, headers: { ...SECURITY_HEADERS, ...response.headers } });
  return async (request) => {
    if (!request.path.startsWith('/api/')) return answer(staticFile(deps.assets, request));
    try {
      return answer(await apiCall(deps, table, request));
    } catch (err) {
      return answer(apiErrorResponse(err, deps.log, 'console'));
    }
  };
}

/** The session of the cookie (401 without one), with the CSRF token checked on a write. */
async function signedInSession(deps: ConsoleHttpDeps, request: HttpRequest): Promise<SignedIn> {
  const session = await deps.sessions.check(request.headers.cookie);
  if (!session) throw new ApiError(401, 'Sign in first');
  if (WRITES.has(request.method) && !deps.sessions.csrfMatches(session.sessionId, request.headers['x-csrf-token'])) {
    throw new ApiError(403, 'Missing or wrong X-CSRF-Token: reload the page');
  }
  return session;
}

/** `/api/relay/…`: the relay's admin API as the signed-in user, its own routes and rights (ROUTES.md). */
const RELAY_PREFIX = '/api/relay';

async function relayCall(deps: ConsoleHttpDeps, relayAdmin: RelayAdminCall, request: HttpRequest): Promise<HttpResponse> {
  checkOrigin(deps.isConsoleOrigin, request);
  const session = await signedInSession(deps, request);
  const body = BODIES.has(request.method) ? await readJsonBody(request, deps.budget) : undefined;
  const answer = await relayAdmin(session.user, { method: request.method, path: request.path.slice(RELAY_PREFIX.length), query: request.query, body });
  if (answer.status === 204) return { status: 204 };
  return { status: answer.status, headers: jsonHeaders(), body: JSON.stringify(answer.body) };
}

async function apiCall(deps: ConsoleHttpDeps, table: Route[], request: HttpRequest): Promise<HttpResponse> {
  if (deps.relay && request.path.startsWith(`${RELAY_PREFIX}/`)) return relayCall(deps, deps.relay.admin, request);
  const matching = table.map((route) => ({ route, params: matchPath(route.pattern, request.path) })).filter((m) => m.params);
  if (matching.length === 0) throw new ApiError(404, `Cannot ${request.method} ${request.path}`);
  const found = matching.find((m) => m.route.method === request.method);
  if (!found) throw new ApiError(405, `${request.method} is not allowed on ${request.path}`);
  checkOrigin(deps.isConsoleOrigin, request);
  const { route } = found;
  let session: SignedIn | undefined;
  if (route.access === 'open') {
    const decision = await deps.signInLimiter.take(deps.clientIp(request.remoteAddress, request.headers['x-forwarded-for']));
    if (!decision.allowed) throw new ApiError(429, 'Too many sign-in attempts: try again later', { retryAfterSeconds: decision.retryAfterSeconds });
  } else {
    session = await signedInSession(deps, request);
    if (!mayDo(session.user.role, route.access)) throw new ApiError(403, refusalMessage(RIGHTS[route.access]));
  }
  const body = BODIES.has(request.method) ? await readJsonBody(request, deps.budget) : undefined;
  let sourceIds: Promise<string[]> | undefined;
  const call: Call = {
    request,
    params: found.params!,
    body,
    session: session!,
    sourceIds: () => (sourceIds ??= deps.sources.sourceIdsOf(session!.tenant.id)),
  };
  const result = await route.run(call);
  if (result instanceof Answer) return result.response;
  const status = route.status ?? 200;
  if (status === 204) return { status };
  return { status, headers: jsonHeaders(), body: JSON.stringify(result) };
}

/**
 * The console's own origin only. Browsers send Origin on every POST, PUT and DELETE; a same-origin
 * GET may come without one, and then Sec-Fetch-Site says where it came from. A call with
 * neither (a script, not the app) is refused: this API is not for programmatic use.
 */
function checkOrigin(isConsoleOrigin: (origin: string) => boolean, request: HttpRequest): void {
  const origin = request.headers.origin;
  if (origin !== undefined) {
    if (!isConsoleOrigin(origin)) throw new ApiError(403, 'Cross-origin requests are refused');
    return;
  }
  if (request.method === 'GET' && request.headers['sec-fetch-site'] === 'same-origin') return;
  throw new ApiError(403, 'Cross-origin requests are refused');
}

/** The app's files; every other path is the app itself (it routes in the browser). */
function staticFile(assets: ConsoleAssets, request: HttpRequest): HttpResponse {
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    return { status: 405, headers: { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }, body: 'Method not allowed\n' };
  }
  const asset = assets.get(request.path) ?? (request.path.startsWith('/assets/') ? undefined : assets.get('/'));
  if (!asset) return { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: 'Not found\n' };
  return {
    status: 200,
    headers: { 'content-type': asset.contentType, 'cache-control': asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache' },
    body: request.method === 'HEAD' ? '' : asset.body,
  };
}
