/**
 * The relay module: its store (mirrored from the state store), keys, admin operations, public
 * endpoints and the handler of its HTTP API. It wires nothing itself: the composition root (bin/) gives it the
 * state store, the master key, the deployment's checks, the sign-in limiter and lockout, the read gate, and serves the
 * handler on the relay port.
 */
import type { Bus } from '../bus/bus.ts';
import type { ByteBudget } from '../core/byte-budget.ts';
import type { Logger } from '../core/log.ts';
import type { ReadGate } from '../core/read-gate.ts';
import type { SecretBox } from '../core/secret-box.ts';
import { DeliveryHistory, type AttemptLog, type DeliveryJob, type DeliveryQueue } from '../delivery/index.ts';
import type { ClientIpResolver } from '../gateway/client-ip.ts';
import type { HttpHandler } from '../gateway/http/adapter.ts';
import type { Limiter } from '../gateway/limiter.ts';
import type { SignInLockout } from '../gateway/sign-in-lockout.ts';
import type { AccountStore } from '../accounts/store.ts';
import type { StateStore } from '../state/store.ts';
import type { Storage } from '../storage/storage.ts';
import { RelayAdmin, type DeploymentChecks } from './admin/index.ts';
import { AdminSessions } from './auth.ts';
import { RelayError } from './errors.ts';
import { CaptchaVerifier, type CaptchaEndpoints } from './captcha.ts';
import { relayAdminBridge, relayHandler } from './http.ts';
import { Idempotency } from './idempotency.ts';
import type { InboxReader } from './inbox.ts';
import { alertNotifier } from './alert-notifier.ts';
import { RelayIntake } from './intake.ts';
import { relayOpenApiDocument } from './openapi.ts';
import { PublicRelay } from './public.ts';
import type { MessageRenderer } from './renderer.ts';
import { createBodyValidator, type BodyValidator } from './schemas.ts';
import { deriveRelayKeys } from './secrets.ts';
import { RelayStore } from './store.ts';
import { SubmissionReader } from './submissions.ts';

export { loadMasterKey } from './secrets.ts';
export { DEFAULT_CAPTCHA_ENDPOINTS } from './captcha.ts';

/**
 * Body size on the relay port (the spec leaves it open): ample for a template or a notification
 * body (100,000 characters) with its data; past it, 413.
 */
export const MAX_RELAY_BODY_BYTES = 1024 * 1024;
/** Sign-in attempts (login, claim, onboarding) per client IP and minute. */
export const SIGN_IN_PER_MINUTE = 10;

export interface RelayParts {
  state: StateStore;
  /** Tenants and users (accounts/), shared with the console; opened by the composition root. */
  accounts: AccountStore;
  log: Logger;
  /** 32 bytes: seals stored secrets and signs sessions; the same on every gateway. */
  masterKey: Buffer;
  /** Checks that depend on the deployment: injected, never defaulted. */
  checks: DeploymentChecks;
  /** Storage, for listing submissions: undefined in a process without it. Opened on first use. */
  storage: () => Promise<Storage | undefined>;
  /** Where the listings' reads of storage take turns per tenant, with the console's (the process's one gate). */
  readGate: ReadGate;
  database: string;
  /** A manual retry: records the job's new series as queued and puts it on the delivery queue. */
  requeue: (job: DeliveryJob) => Promise<void>;
  /** Renders messages (previews and deliveries), large ones on the process's render pool. */
  renderer: MessageRenderer;
  /** Sign-in attempts per account, shared with the console. Opened on first use (a CLI command never signs in). */
  signInLockout: () => Promise<SignInLockout>;
  /** The development inbox, when SLUICE_DELIVERY_INBOX is on: the admin lists what it kept. */
  inbox?: InboxReader;
}

export interface Relay {
  store: RelayStore;
  admin: RelayAdmin;
  sessions: AdminSessions;
  secrets: SecretBox;
  validate: BodyValidator;
  renderer: MessageRenderer;
  shutdown(): void;
}

/** Opens the relay's store (its mirrors start) and admin operations. */
export async function openRelay(parts: RelayParts): Promise<Relay> {
  const keys = deriveRelayKeys(parts.masterKey);
  const store = new RelayStore(parts.state, parts.accounts, parts.log);
  await store.start();
  const sessions = new AdminSessions(keys.sessionKey, parts.accounts, parts.state);
  const validate = createBodyValidator();
  /** Storage to read from, or 503 saying what needs it in a process without it (a gateway with no CLICKHOUSE_URL). */
  const readable = (what: string) => async () => {
    const opened = await parts.storage();
    if (!opened) throw new RelayError(503, `${what} read from storage, which this process does not open: set CLICKHOUSE_URL on it`);
    return opened;
  };
  const delivery = { history: new DeliveryHistory(readable('The delivery history is'), parts.database, parts.readGate), requeue: parts.requeue, ...(parts.inbox ? { inbox: parts.inbox } : {}) };
  const submissions = new SubmissionReader(readable('Submissions are'), parts.database, parts.readGate);
  const admin = new RelayAdmin(store, keys.secrets, sessions, validate, submissions, parts.checks, delivery, parts.renderer, parts.signInLockout);
  return { store, admin, sessions, secrets: keys.secrets, validate, renderer: parts.renderer, shutdown: () => store.shutdown() };
}

export interface PublicRelayParts {
  /** Carries submissions and their jobs to storage; a 201 waits for it. */
  bus: Bus;
  /** Where the jobs go to be delivered; a 201 waits for it too. */
  deliveries: DeliveryQueue;
  /** The delivery history, where jobs that could not be queued are recorded. */
  history: AttemptLog;
  budget: ByteBudget;
  /** Sliding windows per client IP: 10, 300 and 10 a minute by default. */
  limiters: { submissions: Limiter; notifications: Limiter; discovery: Limiter };
  clientIp: ClientIpResolver;
  captcha: { endpoints: CaptchaEndpoints; timeoutMs: number };
  /** How long an idempotency claim holds for a request that never finishes (a crash). */
  idempotencyLeaseMs: number;
  /** Where users sign in, for tenant discovery emails (known once the port is bound). */
  signInUrl: () => string;
  onAnswer?: (endpoint: string, status: number | 'aborted') => void;
  log: Logger;
}

/** The public endpoints (submissions, notifications, tenant discovery) of an open relay. */
export function openPublicRelay(relay: Relay, parts: PublicRelayParts): PublicRelay {
  const state = relay.store.state;
  return new PublicRelay({
    store: relay.store,
    state,
    secrets: relay.secrets,
    captcha: new CaptchaVerifier(parts.captcha),
    idempotency: new Idempotency(state, { leaseMs: parts.idempotencyLeaseMs }),
    intake: new RelayIntake(parts.bus, parts.deliveries, parts.history),
    validate: relay.validate,
    renderer: relay.renderer,
    limiters: parts.limiters,
    clientIp: parts.clientIp,
    budget: parts.budget,
    signInUrl: parts.signInUrl,
    ...(parts.onAnswer ? { onAnswer: parts.onAnswer } : {}),
    log: parts.log,
  });
}

/** What alert rules need of the relay: a notifier through its intake, and the forms a tenant's rules may notify. */
export function relayAlerts(relay: Relay, parts: Pick<PublicRelayParts, 'bus' | 'deliveries' | 'history' | 'log'>) {
  const { store } = relay;
  return {
    notify: alertNotifier(store, new RelayIntake(parts.bus, parts.deliveries, parts.history), parts.log),
    contactPoints: (tenantId: string) => store.forms
      .filter((form) => form.active && store.sites.get(form.siteId)?.tenantId === tenantId)
      .map((form) => ({ siteId: form.siteId, siteName: store.sites.get(form.siteId)!.name, formId: form.id, formName: form.name }))
      .sort((a, b) => `${a.siteName}/${a.formName}`.localeCompare(`${b.siteName}/${b.formName}`)),
  };
}

/** The admin API as the console's signed-in user (relay/http.ts relayAdminBridge): the console's `/api/relay/…` routes. */
export function relayConsoleAdmin(relay: Relay) {
  return relayAdminBridge(relay.admin);
}

export interface RelayHttpParts {
  /** Guards login, claim and onboarding against guessing (per client IP). */
  signInLimiter: Limiter;
  clientIp: ClientIpResolver;
  /** SLUICE_RELAY_OPERATOR_TOKEN: enables POST /api/v1/admin/tenants when set. */
  operatorToken: string;
  /** The public endpoints. */
  publicRelay: PublicRelay;
  budget: ByteBudget;
  /** GET /metrics of the process (the composition root's; the same on every HTTP port). */
  metrics: HttpHandler;
  log: Logger;
}

/** The relay port's handler: the public endpoints, the admin API, the OpenAPI document, health and /metrics. */
export function relayHttpHandler(relay: Relay, { publicRelay, metrics, ...parts }: RelayHttpParts): HttpHandler {
  const openApi = relayOpenApiDocument();
  const publicRoutes = { ...publicRelay.routes(), 'GET /metrics': metrics };
  return relayHandler({ ...parts, admin: relay.admin, sessions: relay.sessions, openApi: () => openApi, publicRoutes });
}
