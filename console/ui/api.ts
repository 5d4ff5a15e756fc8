/**
 * The app's side of the console API (console/api.ts, console/ROUTES.md): same-origin fetches with
 * the session cookie, JSON both ways, the CSRF token on every write. A 401 on any route but
 * sign-in and first-run means the session is gone: the app is told, and shows the sign-in page.
 */
import type {
  AgentView, AlertRuleSummary, AlertRuleView, ContactPoint, Dashboard, DeployMarker, DeployVerdictView, FirstRunRequest, InboxMessage, InstallTokenView, IssuedKeyView, LogPage, LogSummary, LogQuery, Me,
  MetricInfo, MetricQuery, MetricResult, OperationHealth, Overview, RuleFields, ServicesHealth, Silence, SilenceFields, SignInRequest, SourceKey, SourceView,
  TimeRange, TraceQuery, TraceSummary, TraceView, InvitationOffer, InvitationView, IssuedInvitation, UserRole, UserView,
} from '../api.ts';

/** An error answer of the API (or no answer at all: status 0). */
export class ApiFailure extends Error {
  readonly status: number;
  /** The error's JSON body, for the fields beside `message` (a 409's `tenants` at sign-in). */
  readonly body: Record<string, unknown>;
  constructor(status: number, message: string, body: Record<string, unknown> = {}) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

let csrfToken = '';
let role: Me['user']['role'] | undefined;
let onSignedOut: () => void = () => {};

/** Kept from GET /api/me or the sign-in answer: the CSRF token is sent back on writes. */
export function rememberSession(me: Me | undefined): void {
  csrfToken = me?.csrfToken ?? '';
  role = me?.user.role;
}

/** Whether the signed-in user may change what the tenant configures (the API's `configure` right: admins and owners); members are shown no controls that would be refused. */
export function mayConfigure(): boolean {
  return role === 'admin' || role === 'owner';
}

/** Whether the signed-in user may invite and change users (admins and owners; an admin's rights stop at owners). */
export function mayManageUsers(): boolean {
  return mayConfigure();
}

/** Whether the signed-in user may make or change an owner. */
export function isOwner(): boolean {
  return role === 'owner';
}

/** What to do when the API answers 401 (the session expired or was ended elsewhere). */
export function whenSignedOut(handler: () => void): void {
  onSignedOut = handler;
}

/** Routes whose 401 is an answer to show (wrong password, used link), not a lost session. */
const SIGN_IN_ROUTES = new Set(['/api/session', '/api/first-run', '/api/me', '/api/invitation', '/api/invitation/accept']);

export async function call<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  let response: Response;
  try {
    response = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body), signal });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ApiFailure(0, 'The console server did not answer. Is Sluice running?');
  }
  if (response.status === 401 && !SIGN_IN_ROUTES.has(path)) onSignedOut();
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const message = (parsed as { message?: unknown } | undefined)?.message;
    const body = parsed !== null && typeof parsed === 'object' ? parsed as Record<string, unknown> : {};
    throw new ApiFailure(response.status, typeof message === 'string' ? message : `${response.status} ${response.statusText}`, body);
  }
  return parsed as T;
}

const enc = encodeURIComponent;

/** One function per route of ROUTES.md. Queries take an AbortSignal: a newer query cancels the older. */
export const api = {
  me: () => call<Me>('GET', '/api/me'),
  signIn: (request: SignInRequest) => call<Me>('POST', '/api/session', request),
  firstRun: (request: FirstRunRequest) => call<Me>('POST', '/api/first-run', request),
  signOut: () => call<void>('DELETE', '/api/session'),
  changePassword: (currentPassword: string, newPassword: string) => call<Me>('POST', '/api/me/password', { currentPassword, newPassword }),
  signOutEverywhere: () => call<void>('POST', '/api/me/sign-out-everywhere'),
  invitation: (token: string) => call<InvitationOffer>('POST', '/api/invitation', { token }),
  acceptInvitation: (token: string, name: string, password: string) => call<Me>('POST', '/api/invitation/accept', { token, name, password }),

  users: () => call<{ users: UserView[] }>('GET', '/api/users'),
  changeUser: (id: string, change: { role?: UserRole; active?: boolean }) => call<UserView>('PUT', `/api/users/${enc(id)}`, change),
  invitations: () => call<{ invitations: InvitationView[] }>('GET', '/api/users/invitations'),
  invite: (email: string, role: UserRole) => call<IssuedInvitation>('POST', '/api/users/invitations', { email, role }),
  revokeInvitation: (id: string) => call<void>('DELETE', `/api/users/invitations/${enc(id)}`),

  sources: () => call<{ sources: SourceView[] }>('GET', '/api/sources'),
  createSource: (name: string) => call<{ source: SourceView; key: IssuedKeyView }>('POST', '/api/sources', { name }),
  issueKey: (sourceId: string, revokeKeyId?: string) => call<IssuedKeyView>('POST', `/api/sources/${enc(sourceId)}/keys`, revokeKeyId ? { revokeKeyId } : {}),
  revokeKey: (sourceId: string, keyId: string) => call<SourceKey>('POST', `/api/sources/${enc(sourceId)}/keys/${enc(keyId)}/revoke`),
  installToken: (sourceId: string) => call<InstallTokenView>('POST', `/api/sources/${enc(sourceId)}/install-tokens`),
  agents: () => call<{ agents: AgentView[] }>('GET', '/api/agents'),

  overview: (range: TimeRange, signal?: AbortSignal) => call<Overview>('POST', '/api/query/overview', range, signal),
  services: (range: TimeRange, signal?: AbortSignal) => call<{ services: string[] }>('POST', '/api/query/services', range, signal),
  servicesHealth: (query: TimeRange & { services?: string[] }, signal?: AbortSignal) => call<ServicesHealth>('POST', '/api/query/service-health', query, signal),
  serviceOperations: (query: TimeRange & { service: string }, signal?: AbortSignal) => call<{ operations: OperationHealth[] }>('POST', '/api/query/service-operations', query, signal),
  logs: (query: LogQuery, signal?: AbortSignal) => call<LogPage>('POST', '/api/query/logs', query, signal),
  logSummary: (query: LogQuery, signal?: AbortSignal) => call<LogSummary>('POST', '/api/query/log-summary', query, signal),
  traces: (query: TraceQuery, signal?: AbortSignal) => call<{ traces: TraceSummary[] }>('POST', '/api/query/traces', query, signal),
  trace: (traceId: string, signal?: AbortSignal) => call<TraceView>('GET', `/api/traces/${enc(traceId)}`, undefined, signal),
  metricNames: (range: TimeRange, signal?: AbortSignal) => call<{ metrics: MetricInfo[] }>('POST', '/api/query/metric-names', range, signal),
  metrics: (query: MetricQuery, signal?: AbortSignal) => call<MetricResult>('POST', '/api/query/metrics', query, signal),
  deploys: (range: TimeRange & { services?: string[] }, signal?: AbortSignal) => call<{ deploys: DeployMarker[] }>('POST', '/api/query/deploys', range, signal),
  deployVerdicts: (range: TimeRange & { services?: string[] }, signal?: AbortSignal) => call<{ verdicts: DeployVerdictView[] }>('POST', '/api/query/deploy-verdicts', range, signal),

  dashboards: () => call<{ dashboards: Dashboard[] }>('GET', '/api/dashboards'),
  createDashboard: (body: Pick<Dashboard, 'name' | 'charts'>) => call<Dashboard>('POST', '/api/dashboards', body),
  saveDashboard: (id: string, body: Pick<Dashboard, 'name' | 'charts'>) => call<Dashboard>('PUT', `/api/dashboards/${enc(id)}`, body),
  deleteDashboard: (id: string) => call<void>('DELETE', `/api/dashboards/${enc(id)}`),

  inbox: () => call<{ messages: InboxMessage[] }>('GET', '/api/inbox'),

  contactPoints: () => call<{ contactPoints: ContactPoint[] }>('GET', '/api/alerts/contact-points'),
  alertRules: () => call<{ rules: AlertRuleSummary[] }>('GET', '/api/alerts/rules'),
  alertRule: (id: string) => call<AlertRuleView>('GET', `/api/alerts/rules/${enc(id)}`),
  createAlertRule: (fields: RuleFields) => call<AlertRuleView>('POST', '/api/alerts/rules', fields),
  saveAlertRule: (id: string, fields: RuleFields) => call<AlertRuleView>('PUT', `/api/alerts/rules/${enc(id)}`, fields),
  deleteAlertRule: (id: string) => call<void>('DELETE', `/api/alerts/rules/${enc(id)}`),
  silences: () => call<{ silences: Silence[] }>('GET', '/api/alerts/silences'),
  createSilence: (fields: SilenceFields) => call<Silence>('POST', '/api/alerts/silences', fields),
  endSilence: (id: string) => call<void>('DELETE', `/api/alerts/silences/${enc(id)}`),
};

/** A message for the page from whatever a call threw. */
export function problem(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
