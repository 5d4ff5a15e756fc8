/**
 * The relay's public endpoints (relay spec sections 4.1 to 4.4, 5, 7, 8): what websites and
 * customer backends call. Each handler reads top to bottom — limit, authenticate, read, validate,
 * resolve, claim the idempotency key, act — and maps every error in one place (errorResponse).
 *
 *   POST /api/v1/submissions       a visitor's browser; origin allowlist and CAPTCHA; CORS
 *   POST /api/v1/notifications     a customer's backend; x-api-key bound to one site
 *   POST /api/v1/tenant-discovery  anyone; the same 200 whatever the address
 *
 * A 201 means the submission and its delivery jobs are durable (RelayIntake); delivery runs
 * afterwards and never changes the answer.
 */
import type { ByteBudget, Reservation } from '../core/byte-budget.ts';
import { nestedDeeperThan } from '../core/json-depth.ts';
import type { Logger } from '../core/log.ts';
import type { SecretBox } from '../core/secret-box.ts';
import type { ClientIpResolver } from '../gateway/client-ip.ts';
import type { HttpHandler, HttpRequest, HttpResponse } from '../gateway/http/adapter.ts';
import type { Limiter } from '../gateway/limiter.ts';
import type { StateStore } from '../state/store.ts';
import type { CaptchaVerifier } from './captcha.ts';
import { checkData } from './data.ts';
import { forbidden, RelayError, validationFailed } from './errors.ts';
import { errorResponse } from './http.ts';
import { fingerprint, IDEMPOTENCY_HEADER, idempotencyKey, type Claim, type Idempotency } from './idempotency.ts';
import type { JobTarget, RelayIntake } from './intake.ts';
import { CHANNELS, type Channel, type Form, type RelayApiKey, type Site } from './model.ts';
import type { MessageRenderer } from './renderer.ts';
import { sanitizeSubject } from './sanitize.ts';
import type { BodyValidator } from './schemas.ts';
import { escapeHtml } from './templates.ts';
import type { RelayStore } from './store.ts';
import { sha256Hex } from '../core/hash.ts';

/** What a caller sends as captchaToken when the site has no CAPTCHA (any value is then ignored). */
export const CAPTCHA_PLACEHOLDER = 'no-captcha';
/** Used CAPTCHA tokens, remembered past every provider's token lifetime (2 to 5 minutes). */
const USED_TOKENS = 'relay_captcha_tokens';
const USED_TOKEN_TTL_MS = 15 * 60_000;
/** One discovery email per address in this time, however often it is asked for. */
const DISCOVERY_SENT = 'relay_discovery_sent';
const DISCOVERY_EMAIL_INTERVAL_MS = 15 * 60_000;
const MAX_BODY_DEPTH = 32;
const JSON_TYPE = 'application/json';

/** The four cases (unknown site, unknown form, inactive site or form, origin not allowed) answer these very bytes. */
const NOT_PERMITTED = 'Submission target not found or not permitted';

export interface PublicRelayDeps {
  store: RelayStore;
  state: StateStore;
  /** Opens the sealed CAPTCHA secrets. */
  secrets: SecretBox;
  captcha: CaptchaVerifier;
  idempotency: Idempotency;
  intake: RelayIntake;
  validate: BodyValidator;
  /** Sanitises a notification's body, a large one off the event loop. */
  renderer: Pick<MessageRenderer, 'sanitizeBody'>;
  /** Sliding windows per client IP (relay spec 8). */
  limiters: { submissions: Limiter; notifications: Limiter; discovery: Limiter };
  clientIp: ClientIpResolver;
  /** The process's in-flight byte budget: a body is read only once its bytes are reserved. */
  budget: ByteBudget;
  /** Where a user signs in, written into tenant discovery emails. */
  signInUrl: () => string;
  /** Counts each answer (for /metrics): its status, or `aborted` when the client left before it. */
  onAnswer?: (endpoint: string, status: number | 'aborted') => void;
  log: Logger;
}

interface SubmissionBody { siteKey: string; formKey: string; captchaToken?: string; data: Record<string, unknown> }
interface NotificationBody {
  siteKey: string;
  formKey?: string;
  channels?: Channel[];
  recipients?: Partial<Record<Channel, string[]>>;
  data?: Record<string, unknown>;
  template?: string;
  subject?: string;
  body?: string;
}

/** A request through the door: its client, its parsed body and the idempotency key it carries. */
interface Received {
  ip: string;
  body: unknown;
  key: string | undefined;
}

interface Answer {
  status: number;
  body: unknown;
}

export class PublicRelay {
  /** Discovery emails being queued after their answer went out; shutdown waits for them. */
  private readonly background = new Set<Promise<void>>();

  constructor(private readonly deps: PublicRelayDeps) {
    deps.state.expireAfter(USED_TOKENS, USED_TOKEN_TTL_MS);
    deps.state.expireAfter(DISCOVERY_SENT, DISCOVERY_EMAIL_INTERVAL_MS);
  }

  /** The handlers by `METHOD path`, for the relay's router. */
  routes(): Record<string, HttpHandler> {
    const counted = (endpoint: string, handle: HttpHandler): HttpHandler => async (request) => {
      const response = await handle(request);
      this.deps.onAnswer?.(endpoint, request.aborted ? 'aborted' : response.status);
      return response;
    };
    return {
      'POST /api/v1/submissions': counted('submissions', (request) => this.submission(request)),
      'OPTIONS /api/v1/submissions': async (request) => ({ status: 204, headers: this.preflight(request.headers.origin) }),
      'POST /api/v1/notifications': counted('notifications', (request) => this.notification(request)),
      'POST /api/v1/tenant-discovery': counted('tenant-discovery', (request) => this.tenantDiscovery(request)),
    };
  }

  async shutdown(): Promise<void> {
    await Promise.all(this.background);
  }

  // ---- POST /api/v1/submissions ------------------------------------------------------------

  private async submission(request: HttpRequest): Promise<HttpResponse> {
    const origin = request.headers.origin;
    const cors = this.cors(origin);
    try {
      return await this.withBody(request, this.deps.limiters.submissions, async (received, budget) => {
        const input = this.deps.validate<SubmissionBody>('Submission', received.body);
        checkData(input.data);
        const { site, form } = this.submissionTarget(input, origin);
        return this.once(received, `submissions\n${site.id}`, cors, async (claim) => {
          await this.checkCaptcha(site, input.captchaToken, received.ip);
          stillClaimed(claim);
          const submissionId = await this.deps.intake.store(
            { tenantId: site.tenantId, siteId: site.id, formId: form.id, kind: 'submission', data: input.data, subject: '', body: '', meta: this.meta(request, received.ip, '') },
            formTargets(form, CHANNELS),
            budget,
            claim?.firstUse,
          );
          return { status: 201, body: { success: true, submissionId } };
        });
      });
    } catch (err) {
      // The 404 carries no CORS header: its headers, like its body, are the same for all four reasons.
      return errorResponse(err, this.deps.log, err instanceof RelayError && err.statusCode === 404 ? { vary: 'Origin' } : cors);
    }
  }

  /**
   * The active site and form the keys name, when the Origin may post to them. Every refusal is
   * the same 404, decided from memory (no I/O): neither its bytes nor its timing tell which.
   */
  private submissionTarget(input: SubmissionBody, origin: string | undefined): { site: Site; form: Form } {
    const site = this.deps.store.siteByKey(input.siteKey);
    const form = site ? this.deps.store.formByKey(site.id, input.formKey) : undefined;
    let reason: string | undefined;
    if (!site) reason = 'unknown siteKey';
    else if (!form) reason = 'unknown formKey';
    else if (!site.active) reason = 'site is inactive';
    else if (!form.active) reason = 'form is inactive';
    else if (!originAllowed(site, origin)) reason = origin === undefined ? 'no Origin header, and the site has allowed origins' : 'origin not allowed';
    if (reason) {
      this.deps.log.info({ reason, siteKey: input.siteKey.slice(0, 100), formKey: input.formKey.slice(0, 100), origin: origin?.slice(0, 300) }, 'submission refused with 404');
      throw new RelayError(404, NOT_PERMITTED);
    }
    return { site: site!, form: form! };
  }

  /** Verifies the CAPTCHA when the site has a provider; refuses a token seen before on any gateway. */
  private async checkCaptcha(site: Site, token: string | undefined, ip: string): Promise<void> {
    const config = site.captcha;
    if (!config) return;
    if (!token) throw new RelayError(400, 'CAPTCHA token is required for this site');
    const secret = this.openSecret(site);
    if (secret === undefined) throw new RelayError(503, 'CAPTCHA is misconfigured for this site');
    const failed = new RelayError(400, 'CAPTCHA verification failed');
    if (token === CAPTCHA_PLACEHOLDER) throw failed;
    // Providers refuse a second use too; this also holds while a provider is slow to notice.
    if (!(await this.deps.state.create(USED_TOKENS, sha256Hex(token), { siteId: site.id }))) {
      this.deps.log.info({ siteId: site.id }, 'CAPTCHA token used before');
      throw failed;
    }
    const outcome = await this.deps.captcha.verify({
      provider: config.provider,
      secret,
      siteKey: config.siteKey,
      token,
      remoteIp: ip,
      allowedHostnames: site.allowedOrigins.map((allowed) => new URL(allowed).hostname),
      ...(config.scoreThreshold !== undefined ? { scoreThreshold: config.scoreThreshold } : {}),
    });
    if (outcome.ok) return;
    this.deps.log.info({ siteId: site.id, reason: outcome.reason, detail: outcome.detail }, 'CAPTCHA refused');
    if (outcome.reason === 'rejected') throw failed;
    throw new RelayError(503, 'CAPTCHA verification temporarily unavailable. Please try again.', { retryAfterSeconds: 5 });
  }

  /** The site's CAPTCHA secret, or undefined when none is stored or it cannot be opened (another master key). */
  private openSecret(site: Site): string | undefined {
    if (!site.captcha?.secretSealed) return undefined;
    try {
      return this.deps.secrets.open(site.captcha.secretSealed);
    } catch {
      this.deps.log.error({ siteId: site.id }, 'the CAPTCHA secret of a site cannot be opened (was SLUICE_RELAY_MASTER_KEY changed?)');
      return undefined;
    }
  }

  /** CORS preflight: the site is not known yet (no body), so any origin an active site allows passes. */
  private preflight(origin: string | undefined): Record<string, string> {
    const headers = this.cors(origin);
    if (!headers['access-control-allow-origin']) return headers;
    return {
      ...headers,
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers': 'Content-Type, Idempotency-Key',
      'access-control-max-age': '600',
    };
  }

  /** Allow-Origin for an origin some active site accepts (Vary either way: answers differ by Origin). */
  private cors(origin: string | undefined): Record<string, string> {
    const headers: Record<string, string> = { vary: 'Origin' };
    if (origin === undefined) return headers;
    const allowed = this.deps.store.allowedOrigins();
    if (allowed.any || allowed.origins.has(origin)) {
      headers['access-control-allow-origin'] = origin;
      headers['access-control-expose-headers'] = 'Retry-After, Idempotent-Replayed';
    }
    return headers;
  }

  // ---- POST /api/v1/notifications ----------------------------------------------------------

  private async notification(request: HttpRequest): Promise<HttpResponse> {
    try {
      return await this.withBody<RelayApiKey>(request, this.deps.limiters.notifications, async (received, budget, key) => {
        const input = this.deps.validate<NotificationBody>('Notification', refuseWebhookChannel(received.body));
        if (input.data !== undefined) checkData(input.data);
        const site = this.deps.store.sites.get(key!.siteId);
        if (!site || site.siteKey !== input.siteKey) throw forbidden('API key does not belong to this site');
        if (!site.active) throw forbidden('This site is inactive: activate it in the admin to send notifications');
        const form = this.notificationForm(site, input.formKey);
        const targets = notificationTargets(this.deps.store, site, form, input);
        const body = await this.deps.renderer.sanitizeBody(input.body ?? '');
        return this.once(received, `notifications\n${key!.id}`, {}, async (claim) => {
          stillClaimed(claim);
          const submissionId = await this.deps.intake.store(
            {
              tenantId: site.tenantId,
              siteId: site.id,
              formId: form?.id ?? '',
              kind: 'notification',
              data: input.data ?? {},
              subject: sanitizeSubject(input.subject ?? ''),
              body,
              meta: this.meta(request, received.ip, key!.id),
            },
            targets,
            budget,
            claim?.firstUse,
          );
          return { status: 201, body: { success: true, submissionId } };
        });
      }, (request) => this.apiKey(request));
    } catch (err) {
      return errorResponse(err, this.deps.log);
    }
  }

  /** The active key in `x-api-key` (not Authorization), checked against the store itself: a revocation counts at once. */
  private async apiKey(request: HttpRequest): Promise<RelayApiKey> {
    const presented = request.headers['x-api-key'];
    if (!presented) throw new RelayError(401, 'Missing API key');
    const indexed = this.deps.store.apiKeyFor(presented);
    const current = indexed && (await this.deps.store.currentApiKey(indexed));
    if (!current) throw new RelayError(401, 'Invalid API key');
    return current;
  }

  /** The active form `formKey` names on the site (none asked: undefined); never a silent 201 for a wrong key. */
  private notificationForm(site: Site, formKey: string | undefined): Form | undefined {
    if (formKey === undefined) return undefined;
    const form = this.deps.store.formByKey(site.id, formKey);
    if (!form?.active) throw new RelayError(404, `Form not found: ${formKey}. It may not exist on this site, or it may have been deactivated.`);
    return form;
  }

  // ---- POST /api/v1/tenant-discovery -------------------------------------------------------

  /**
   * The caller gives an email address; the answer is the same 200 whatever it is. If users have
   * that address, an email listing their tenants is queued after the answer went out, so
   * neither the answer nor its timing tells whether they exist; one such email per address per
   * DISCOVERY_EMAIL_INTERVAL_MS, so nobody can flood an inbox through it.
   */
  private async tenantDiscovery(request: HttpRequest): Promise<HttpResponse> {
    try {
      return await this.withBody(request, this.deps.limiters.discovery, async (received) => {
        const { email } = this.deps.validate<{ email: string }>('TenantDiscovery', received.body);
        return this.once(received, `tenant-discovery\n${received.ip}`, {}, async () => {
          this.later(() => this.sendTenantList(email.toLowerCase()));
          return { status: 200, body: { success: true, message: 'If this address belongs to an account, an email listing its tenants is on its way.' } };
        });
      });
    } catch (err) {
      return errorResponse(err, this.deps.log);
    }
  }

  private async sendTenantList(email: string): Promise<void> {
    const { store } = this.deps;
    const { users, tenants: known } = store.accounts;
    const tenants = users.filter((user) => user.email === email && user.active).flatMap((user) => known.get(user.tenantId) ?? []);
    if (tenants.length === 0) return;
    if (!(await this.deps.state.create(DISCOVERY_SENT, sha256Hex(email), { at: new Date().toISOString() }))) return;
    const items = tenants.map((tenant) => `<li><strong>${escapeHtml(tenant.name)}</strong> (${escapeHtml(tenant.id)})</li>`).join('');
    const link = escapeHtml(this.deps.signInUrl());
    const body = `<p>Someone asked which Sluice relay tenants the address ${escapeHtml(email)} belongs to:</p><ul>${items}</ul>`
      + `<p>Sign in with this address and your password at <a href="${link}">${link}</a>.</p><p>If you did not ask, you can ignore this email.</p>`;
    await this.deps.intake.queue([{ tenantId: '', kind: 'tenant_discovery', channel: 'email', destination: email, subject: 'Your Sluice relay tenants', body }]);
  }

  /** Runs work after the answer (not a step of it before); a failure is logged (the caller was told nothing that depends on it). */
  private later(work: () => Promise<void>): void {
    const running = new Promise<void>((resolve) => setImmediate(resolve))
      .then(work)
      .catch((err) => this.deps.log.error({ err }, 'tenant discovery: the email could not be queued'))
      .finally(() => this.background.delete(running));
    this.background.add(running);
  }

  // ---- shared steps ------------------------------------------------------------------------

  /**
   * The door every public request goes through: the client's sliding window (429), its
   * authentication if any (401, before its body is read), a budget reservation for the body,
   * the body as JSON, the Idempotency-Key's length. The reservation is held until `handle`
   * settled (its rows are durable) and released on every path.
   */
  private async withBody<A>(
    request: HttpRequest,
    limiter: Limiter,
    handle: (received: Received, budget: Reservation, auth: A | undefined) => Promise<HttpResponse>,
    authenticate?: (request: HttpRequest) => Promise<A>,
  ): Promise<HttpResponse> {
    const ip = this.deps.clientIp(request.remoteAddress, request.headers['x-forwarded-for']);
    const decision = await limiter.take(ip);
    if (!decision.allowed) throw new RelayError(429, 'ThrottlerException: Too Many Requests', { retryAfterSeconds: decision.retryAfterSeconds });
    const auth = authenticate ? await authenticate(request) : undefined;
    const reservation = this.deps.budget.reserve(0);
    try {
      const encoding = request.headers['content-encoding']?.trim().toLowerCase();
      // The relay takes small uncompressed JSON: a compressed body is refused, never inflated.
      if (encoding && encoding !== 'identity') throw validationFailed('Content-Encoding', 'must be identity: send the JSON uncompressed');
      const body = parseJson(await request.body(reservation), request.headers['content-type']);
      const key = idempotencyKey(request.headers[IDEMPOTENCY_HEADER]);
      return await handle({ ip, body, key }, reservation, auth);
    } finally {
      reservation.release();
    }
  }

  /**
   * Runs `work` once per Idempotency-Key within `scope`: a repeat gets the stored answer
   * (Idempotent-Replayed: true), 409 while the first runs, 422 with another body. Without a
   * key every request runs. Only a success is stored; a failure frees the key for a retry.
   */
  private async once(received: Received, scope: string, headers: Record<string, string>, work: (claim: Claim | undefined) => Promise<Answer>): Promise<HttpResponse> {
    const respond = (status: number, body: string, extra: Record<string, string> = {}) => ({ status, headers: { ...headers, ...extra, 'content-type': JSON_TYPE, 'cache-control': 'no-store' }, body });
    if (received.key === undefined) {
      const answer = await work(undefined);
      return respond(answer.status, JSON.stringify(answer.body));
    }
    const start = await this.deps.idempotency.begin(scope, received.key, fingerprint(received.body));
    if (start.kind === 'replay') return respond(start.response.status, start.response.body, { 'idempotent-replayed': 'true' });
    let answer: Answer;
    try {
      answer = await work(start.claim);
    } catch (err) {
      await start.claim.release().catch((releaseErr) => this.deps.log.warn({ err: releaseErr }, 'an idempotency key could not be released; it frees itself when its lease ends'));
      throw err;
    }
    const body = JSON.stringify(answer.body);
    await start.claim.finish({ status: answer.status, body }).catch((err) => this.deps.log.warn({ err }, 'the answer of an idempotent request could not be stored for replay'));
    return respond(answer.status, body);
  }

  private meta(request: HttpRequest, ip: string, apiKeyId: string) {
    return { ip, origin: (request.headers.origin ?? '').slice(0, 300), userAgent: (request.headers['user-agent'] ?? '').slice(0, 512), apiKeyId };
  }
}

/** Origin check (spec 4.1): an exact entry of the site's list; no Origin only when the list is empty. */
function originAllowed(site: Site, origin: string | undefined): boolean {
  if (site.allowedOrigins.length === 0) return true;
  return origin !== undefined && site.allowedOrigins.includes(origin);
}

/** Past half its lease a claim is not worth starting work on: another request may take the key soon. */
function stillClaimed(claim: Claim | undefined): void {
  if (claim && !claim.holds()) throw new RelayError(503, 'The request took too long to start. Please try again.', { retryAfterSeconds: 1 });
}

/** The JSON body (relay spec: Content-Type application/json); refusals are 400 Validation failed. */
export function parseJson(raw: Buffer, contentType: string | undefined): unknown {
  if (contentType?.split(';')[0]?.trim().toLowerCase() !== JSON_TYPE) throw validationFailed('Content-Type', 'must be application/json');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch {
    throw validationFailed('body', 'is not valid UTF-8');
  }
  // What walks a body afterwards (validation, canonical JSON, templates) recurses.
  if (nestedDeeperThan(text, MAX_BODY_DEPTH)) throw validationFailed('body', `is nested deeper than ${MAX_BODY_DEPTH} levels`);
  try {
    return JSON.parse(text);
  } catch {
    throw validationFailed('body', 'is not valid JSON');
  }
}

/** `webhook` is no channel (spec 4.2 rule 3): said plainly before the schema's generic enum message. */
export function refuseWebhookChannel(body: unknown): unknown {
  if (body && typeof body === 'object') {
    const { channels, recipients } = body as { channels?: unknown; recipients?: unknown };
    const problem = 'webhook is not a channel: a form\'s webhooks fire when a notification names no recipients';
    if (Array.isArray(channels)) {
      const index = channels.indexOf('webhook');
      if (index >= 0) throw validationFailed(`channels[${index}]`, problem);
    }
    if (recipients && typeof recipients === 'object' && Object.hasOwn(recipients, 'webhook')) throw validationFailed('recipients.webhook', problem);
  }
  return body;
}

/** The form's active recipients of `channels`, and its active webhooks. */
export function formTargets(form: Form, channels: readonly Channel[]): JobTarget[] {
  return [
    ...form.recipients.filter((r) => r.active && channels.includes(r.channel)).map((r) => ({ channel: r.channel, destination: r.address })),
    ...form.webhooks.filter((w) => w.active).map((w) => ({ channel: 'webhook' as const, destination: w.id })),
  ];
}

/**
 * Who a notification goes to (spec 4.2 rules 1 to 3): the named recipients, each one an active
 * recipient of the form (or, without formKey, of an active form of the site) — 403 otherwise,
 * the address never echoed; or, naming none, the form's own recipients and webhooks.
 */
function notificationTargets(store: RelayStore, site: Site, form: Form | undefined, input: NotificationBody): JobTarget[] {
  const { recipients, channels } = input;
  if (!recipients) {
    if (!form) throw validationFailed('recipients', 'is required when no formKey is given');
    return formTargets(form, channels ?? CHANNELS);
  }
  const named = Object.keys(recipients) as Channel[];
  for (const channel of channels ?? []) if (!named.includes(channel)) throw validationFailed(`recipients.${channel}`, 'is required: the channel is named in channels');
  for (const channel of named) if (channels && !channels.includes(channel)) throw validationFailed(`recipients.${channel}`, 'names a channel that channels leaves out');
  const pool = form ? [form] : store.forms.filter((candidate) => candidate.siteId === site.id && candidate.active);
  const targets = new Map<string, JobTarget>();
  for (const channel of named) {
    for (const raw of recipients[channel]!) {
      const address = channel === 'email' ? raw.toLowerCase() : raw;
      const configured = pool.some((candidate) => candidate.recipients.some((r) => r.active && r.channel === channel && r.address === address));
      if (!configured) throw forbidden('Recipient not configured for this site');
      targets.set(`${channel}\n${address}`, { channel, destination: address });
    }
  }
  return [...targets.values()];
}
