/**
 * The console's private API: what the single-page app (console/ui/) and the console server
 * (console/server.ts) exchange, as JSON on the console's own origin. Not for programmatic use:
 * every route needs the session cookie, the console's Origin and, on writes, the CSRF token.
 *
 * Times are Unix milliseconds (numbers) in both directions; nanosecond columns are rounded down
 * to the millisecond, except `startNs`/`durationNs` of spans, which stay exact as strings.
 */

import type { AlertRule, AlertStatus } from '../alerts/index.ts';
import type { SignalChange, Verdict } from './deploy-verdict.ts';

export type { SignalChange, Verdict } from './deploy-verdict.ts';

// ---- session -------------------------------------------------------------------------------

export interface Me {
  user: { id: string; email: string; name: string; role: 'owner' | 'admin' | 'member' };
  tenant: { id: string; name: string };
  /** Sent back as the `X-CSRF-Token` header on every POST, PUT and DELETE. */
  csrfToken: string;
  /** Where sources send their telemetry, for the console's instructions (`OTEL_EXPORTER_OTLP_ENDPOINT`). */
  ingest: { otlpHttp: string; otlpGrpc: string };
  /** The development inbox is on (SLUICE_DELIVERY_INBOX): the Inbox page shows what delivery kept instead of sending. */
  deliveryInbox: boolean;
  /** Where the relay runs beside the console: its public URL (pages post submissions there), its Relay pages and `/api/relay/…`. */
  relay: { url: string } | null;
}

/** POST /api/session: sign in. */
/** `tenantId` only when the email and password open accounts in several tenants: the 409 lists them (`tenants`). */
export interface SignInRequest { email: string; password: string; tenantId?: string }
/** POST /api/first-run: the first owner claims the console with the link `npm start` printed. */
export interface FirstRunRequest { token: string; name: string; email: string; password: string }

// ---- sources and agents --------------------------------------------------------------------

export interface SourceKey { id: string; createdAt: number; label?: string; revokedAt?: number }
export interface SourceView { id: string; name: string; createdAt: number; keys: SourceKey[] }
/** POST /api/sources and POST /api/sources/:id/keys answer with the key, shown this once. */
export interface IssuedKeyView { sourceId: string; keyId: string; apiKey: string }
export interface InstallTokenView { token: string; expiresAt: number; /** `curl -fsS <url> | kubectl apply -f -` */ command: string }
export interface AgentView {
  sourceId: string; agentId: string; host: string; version: string; os: string; arch: string;
  status: string; lastSeen: number; /** No heartbeat for 5 minutes. */ stale: boolean;
}

// ---- users -----------------------------------------------------------------------------------

export type UserRole = 'owner' | 'admin' | 'member';
export interface UserView { id: string; email: string; name: string; role: UserRole; active: boolean; createdAt: string }
export interface InvitationView { id: string; email: string; role: UserRole; expiresAt: string; createdAt: string }
/** POST /api/users/invitations: the one-time link, shown this once. */
export interface IssuedInvitation { invitation: InvitationView; link: string }
/** POST /api/invitation: what a link is for, before it is accepted. */
export interface InvitationOffer { email: string; role: UserRole; tenant: string }

// ---- queries: structured filters, never SQL ------------------------------------------------

export interface TimeRange { from: number; to: number }
/** `key` is an attribute name; matches when the attribute equals `value` exactly. */
export interface AttributeFilter { key: string; value: string }

export interface LogQuery extends TimeRange {
  services?: string[];
  /** Lowest severity number shown (OTLP numbers: 1 trace, 5 debug, 9 info, 13 warn, 17 error, 21 fatal). */
  minSeverity?: number;
  /** Case-insensitive substring of the body / message. */
  text?: string;
  /** One trace's logs (32 lowercase hex digits): OTLP records only, as agent logs carry no trace. */
  traceId?: string;
  attributes?: AttributeFilter[];
  /** Newest first; for the next page, the `cursor` of the last answer. */
  cursor?: string;
  limit?: number;
}
export interface LogEntry {
  /** otel_logs or agent_logs */
  kind: 'otlp' | 'agent';
  time: number;
  /** Exact nanoseconds, for ordering and the detail view. */
  timeNs: string;
  sourceId: string;
  service: string;
  severityText: string;
  severityNumber: number;
  body: string;
  traceId: string;
  spanId: string;
  /** Log attributes (agent: its Attributes; host in `host.name`). */
  attributes: Record<string, string>;
  resource: Record<string, string>;
}
export interface LogPage { logs: LogEntry[]; cursor?: string }

/** Severity bands by OTLP severity number (severity.ts): unset is 0. */
export type SeverityBand = 'unset' | 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';
export interface FacetValue { value: string; count: number }
/** What the entries of a LogQuery (cursor and limit aside) add up to: the Logs page's chart and facets. */
export interface LogSummary {
  total: number;
  /** Width of a volume bucket, ms; each bucket starts at a multiple of it. */
  stepMs: number;
  /** Entries per bucket by severity band, oldest first; buckets with none are left out. */
  volume: Array<{ time: number; counts: Partial<Record<SeverityBand, number>> }>;
  /** The most frequent values of each: services (10), bands (those with entries, most severe first), attributes (the 5 most common keys, 5 values each). */
  facets: {
    services: FacetValue[];
    severities: Array<{ value: SeverityBand; count: number }>;
    attributes: Array<{ key: string; count: number; values: FacetValue[] }>;
  };
}

export interface TraceQuery extends TimeRange {
  services?: string[];
  operation?: string;
  minDurationMs?: number;
  maxDurationMs?: number;
  status?: 'ok' | 'error' | 'unset';
  attributes?: AttributeFilter[];
  limit?: number;
}
export interface TraceSummary {
  traceId: string; start: number; durationMs: number;
  rootService: string; rootName: string; spans: number; errors: number; services: string[];
}
export interface SpanView {
  traceId: string; spanId: string; parentSpanId: string; name: string; kind: string;
  service: string; startNs: string; durationNs: string; statusCode: string; statusMessage: string;
  attributes: Record<string, string>; resource: Record<string, string>; scope: string;
  events: Array<{ timeNs: string; name: string; attributes: Record<string, string> }>;
  links: Array<{ traceId: string; spanId: string; attributes: Record<string, string> }>;
}
export interface TraceView {
  traceId: string; spans: SpanView[];
  /** The trace has more spans than a view holds (10,000): the first ones by start time are shown. */
  truncated?: boolean;
}

export type MetricKind = 'gauge' | 'sum' | 'histogram' | 'exp_histogram' | 'summary' | 'agent';
export interface MetricInfo { name: string; kind: MetricKind; unit: string; description: string; services: string[] }
/** rate: per second of a sum (monotonic counters: of its increase); p50/p95/p99: of histograms. */
export type Aggregation = 'avg' | 'sum' | 'min' | 'max' | 'rate' | 'p50' | 'p95' | 'p99' | 'count';
export interface MetricQuery extends TimeRange {
  name: string;
  kind: MetricKind;
  aggregation: Aggregation;
  services?: string[];
  /** An attribute to split the series by (a data point attribute or `service.name`). */
  groupBy?: string;
  attributes?: AttributeFilter[];
  /** Seconds per point; when absent the server picks one (about 240 points, at least 60 s: SDKs export every minute by default); at most 500 points. */
  stepSeconds?: number;
}
export interface MetricSeries { group: string; points: Array<[time: number, value: number | null]> }
export interface MetricResult {
  stepSeconds: number; series: MetricSeries[];
  /** More groups matched than a chart shows (50): the ones with the most points are shown. */
  truncated?: boolean;
}

export interface DeployMarker {
  time: number; sourceId: string; service: string; version: string; environment: string;
  commit: string; deployedBy: string; description: string; url: string;
}

/** A service's requests (server and consumer spans) over a range: rate, errors, latency (ms). */
export interface ServiceHealth {
  service: string;
  requests: number; errors: number; errorRate: number; perSecond: number; p50: number; p95: number; p99: number;
  /** Per step: its start, requests per second, error rate, p95 (ms). */
  series: Array<[time: number, perSecond: number, errorRate: number, p95: number]>;
}
export interface ServicesHealth { stepSeconds: number; services: ServiceHealth[] }
/** One operation (span name) of a service's requests. */
export interface OperationHealth {
  name: string;
  requests: number; errors: number; errorRate: number; perSecond: number; p50: number; p95: number; p99: number;
}

/** One side of a deploy: its window (ms), the service's requests in it, errors and durations (ms). */
export interface VerdictWindow {
  from: number; to: number; requests: number; errors: number; errorRate: number; p50: number; p95: number; p99: number;
}
/** A deploy marker judged (console/deploy-verdict.ts): the windows before and after it, what changed, the verdict. */
export interface DeployVerdictView {
  marker: DeployMarker;
  verdict: Verdict;
  reason: string;
  errors?: SignalChange;
  latency?: SignalChange;
  before: VerdictWindow;
  after: VerdictWindow;
}

export interface OverviewSeries {
  sourceId: string; signal: string; outcome: 'received' | 'accepted' | 'refused'; reason?: string;
  points: Array<[time: number, perSecond: number]>;
}
export interface Overview { stepSeconds: number; series: OverviewSeries[] }

// ---- development inbox ---------------------------------------------------------------------

/** GET /api/inbox: the tenant's messages the development inbox kept, newest first (delivery/inbox.ts). */
export type { InboxMessage } from '../delivery/index.ts';

// ---- alerts --------------------------------------------------------------------------------

/** Rules, their states and silences as the alert API sends them (alerts/model.ts). */
export type { AlertCondition, AlertRule, AlertStateName, AlertStatus, RuleFields, Silence, SilenceFields, Transition } from '../alerts/index.ts';

/** A relay form an alert rule may notify: its recipients and webhooks get the notifications. */
export interface ContactPoint { siteId: string; siteName: string; formId: string; formName: string }
/** GET /api/alerts/rules: each rule with its state, without the history (null: not evaluated yet). */
export interface AlertRuleSummary { rule: AlertRule; status: Omit<AlertStatus, 'history' | 'samples'> | null }
/** GET /api/alerts/rules/:id, and the answer to a POST or PUT: the state with its last 200 changes. */
export interface AlertRuleView { rule: AlertRule; status: AlertStatus | null }

// ---- dashboards ----------------------------------------------------------------------------

/** A dashboard's chart: its metric query (the dashboard's range and service apply), and how much of a row it takes (half by default). */
export interface ChartSpec { title: string; query: Omit<MetricQuery, 'from' | 'to'>; width?: 'half' | 'full' }
export interface Dashboard { id: string; name: string; charts: ChartSpec[]; updatedAt: number }

/** Every error answer. */
export interface ApiError { message: string; statusCode: number }
