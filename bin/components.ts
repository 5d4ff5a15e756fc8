/**
 * Drivers chosen from the config: each part has one interface and an embedded and a cluster
 * driver (DESIGN.md, "Two modes, one code path"). Only the composition root calls these.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Bus } from '../bus/bus.ts';
import { JetStreamBus } from '../bus/jetstream.ts';
import { parsePartitions } from '../bus/jetstream-names.ts';
import { LocalLogBus } from '../bus/local-log.ts';
import type { SluiceConfig } from '../core/config.ts';
import { UNBUDGETED, type ChdbMemoryLimits } from '../core/memory-budget.ts';
import { EgressPolicy, LOOPBACK_AND_PRIVATE_NETWORKS } from '../delivery/egress.ts';
import { isFromInDomains } from '../delivery/email.ts';
import { parseNatsUrl } from '../core/nats-url.ts';
import { redactUrl } from '../core/redact.ts';
import { descriptorUse } from '../core/descriptors.ts';
import type { GrpcLimits } from '../gateway/grpc/server.ts';
import type { HttpServerOptions } from '../gateway/http/adapter.ts';
import { ClientLimiter } from '../gateway/client-ip.ts';
import { TokenBucketLimiter, type Limiter, type TokenBucketOptions } from '../gateway/limiter.ts';
import { BackoffLockout } from '../gateway/lockout.ts';
import { RedisBackoffLockout } from '../gateway/redis-lockout.ts';
import { RedisTokenBucketLimiter } from '../gateway/redis-limiter.ts';
import { SignInLockout } from '../gateway/sign-in-lockout.ts';
import { DEFAULT_CAPTCHA_ENDPOINTS, loadMasterKey, SIGN_IN_PER_MINUTE, type RelayParts } from '../relay/index.ts';
import type { CaptchaEndpoints } from '../relay/captcha.ts';
import { FAILED_AUTH_PER_MINUTE, type QueryLimits } from '../query/index.ts';
import { SlidingWindowLimiter, type SlidingWindowOptions } from '../gateway/window-limiter.ts';
import { RedisSlidingWindowLimiter } from '../gateway/redis-window-limiter.ts';
import { LocalStateStore } from '../state/local.ts';
import { NatsKvStateStore } from '../state/nats-kv.ts';
import type { AccountStore } from '../accounts/store.ts';
import type { StateStore } from '../state/store.ts';
import type { Logger } from '../core/log.ts';
import type { ComponentStatus } from '../core/readiness.ts';
import type { Supervisor } from '../core/supervisor.ts';
import { ChdbStorage } from '../storage/chdb.ts';
import { ClickhouseServerStorage } from '../storage/clickhouse.ts';
import { TABLE_COLUMNS, type SchemaOptions, type TableName } from '../storage/schema.ts';
import type { Storage } from '../storage/storage.ts';
import { JetStreamDeliveryQueue } from '../delivery/jetstream-queue.ts';
import { LocalDeliveryQueue } from '../delivery/local-queue.ts';
import type { DeliveryQueue } from '../delivery/queue.ts';
import type { DeliveryDefaults } from '../relay/delivery-resolver.ts';

/** Base URL agents reach the ingest HTTP port at: SLUICE_PUBLIC_URL, else this host. */
export function publicUrl(config: Readonly<SluiceConfig>, port = config.http.port): string {
  return (config.http.publicUrl || `http://localhost:${port}`).replace(/\/+$/, '');
}

/** The gRPC port's limits: as configured, the connection cap from the open-files limit when 0. */
export async function grpcLimits(config: Readonly<SluiceConfig>): Promise<GrpcLimits> {
  const { maxConnections, handshakeTimeoutMs, idleTimeoutMs, messageTimeoutMs } = config.grpc;
  const { maxBodyBytes, maxInFlightBytes } = config.limits;
  return {
    maxConnections: maxConnections || defaultMaxConnections((await descriptorUse())?.limit),
    handshakeTimeoutMs,
    idleTimeoutMs,
    messageTimeoutMs,
    // One connection cannot take the whole budget; one message always fits.
    maxConnectionBytes: Math.max(maxBodyBytes, Math.floor(maxInFlightBytes / 4)),
  };
}

/** Half the soft open-files limit, the other half left for HTTP, storage and the control socket; at most 10,000. */
export function defaultMaxConnections(openFiles: number | undefined): number {
  if (openFiles === undefined || !Number.isFinite(openFiles)) return 10_000;
  return Math.max(1, Math.min(10_000, Math.floor(openFiles / 2)));
}

/** How `sluice migrate` (and an embedded start) creates the tables. */
export function schemaOptions(config: Readonly<SluiceConfig>): SchemaOptions {
  const options: SchemaOptions = {};
  if (config.clickhouse.cluster) options.cluster = config.clickhouse.cluster;
  if (config.clickhouse.replicated) options.replicated = true;
  if (config.clickhouse.distributed) options.distributed = true;
  if (config.storage.ttlDays > 0) {
    options.ttlDays = Object.fromEntries(Object.keys(TABLE_COLUMNS).map((table) => [table, config.storage.ttlDays])) as Record<TableName, number>;
  }
  return options;
}

export interface StorageChoice {
  /**
   * Create or upgrade the schema in start(). The embedded engine always does; a server does
   * only for `sluice serve` (one process) — cluster consumers leave it to `sluice migrate`,
   * so they do not race each other.
   */
  migrateOnStart: boolean;
  /** The embedded engine's memory limits (the memory budget's split); chDB's defaults without. */
  chdbLimits?: ChdbMemoryLimits | undefined;
}

/** chDB under the data dir, or a ClickHouse server when CLICKHOUSE_URL is set. */
export function createStorage(config: Readonly<SluiceConfig>, choice: StorageChoice): Storage {
  const schema = schemaOptions(config);
  if (!config.clickhouse.url) return new ChdbStorage(config.dataDir, config.storage.database, schema, choice.chdbLimits);
  return new ClickhouseServerStorage({
    url: config.clickhouse.url,
    database: config.storage.database,
    migrateOnStart: choice.migrateOnStart,
    schema,
  });
}

/** Logs which storage runs, once it started, and what an operator should know about it. */
export function announceStorage(storage: Storage, log: Logger): void {
  const { engine, location, version, warnings } = storage.describe();
  log.info({ engine, location, version }, `storage: ${engine}`);
  for (const warning of warnings) log.warn({ engine, version }, warning);
}

/** The NATS connection of cluster mode (NATS_URL), or undefined on the embedded default. */
export async function connectNats(config: Readonly<SluiceConfig>, log: Logger): Promise<NatsConnection | undefined> {
  if (!config.nats.url) return undefined;
  // nats.js ignores credentials in a server URL: they go in as options. Only the servers'
  // redacted form is ever shown.
  const { servers, credentials, tls } = parseNatsUrl(config.nats.url);
  const shown = servers.map((server) => server.shown);
  try {
    // tls://: TLS required (nats.js also upgrades whenever a server offers it).
    const nc = await connect({ servers: servers.map((server) => server.hostPort), ...credentials, ...(tls ? { tls: {} } : {}), name: 'sluice', maxReconnectAttempts: -1, timeout: 5000 });
    log.info({ servers: shown, server: nc.getServer() }, 'connected to NATS');
    return nc;
  } catch (err) {
    // No `cause`: the client's error may hold the URL it was given (an invalid URL's `input`).
    throw new Error(`cannot reach NATS at ${shown.join(', ')}: ${(err as Error).message}`);
  }
}

/** Sources, key hashes and configs: a local file store, or NATS KV shared by every gateway. */
export function createStateStore(config: Readonly<SluiceConfig>, nc: NatsConnection | undefined, log: Logger): StateStore {
  if (!nc) return new LocalStateStore(join(config.dataDir, 'state'));
  return new NatsKvStateStore(nc, { bucketPrefix: `${config.nats.prefix.toLowerCase()}_`, replicas: config.nats.replicas, log });
}

/** What the memory budget gives the local log: its insert batches, and the guard its inserts wait for. */
export interface BusMemory {
  insertBatchBytes: number;
  guard?: { hasRoom(): boolean } | undefined;
}

/**
 * The local write-ahead log applied to chDB in the background, or JetStream streams consumed by
 * any number of processes. `memory`: the local log's batches (64 MiB without a budget) and the
 * guard of the memory budget its inserts wait for.
 */
export function createBus(config: Readonly<SluiceConfig>, nc: NatsConnection | undefined, log: Logger, onRestart?: (loop: string) => void, memory?: BusMemory): Bus {
  if (!nc) {
    const batchBytes = memory?.insertBatchBytes ?? UNBUDGETED.insertBatchBytes;
    return new LocalLogBus({
      dir: join(config.dataDir, 'log'),
      maxPendingBytes: config.storage.maxPendingBytes,
      maxBatchBytes: batchBytes,
      flushIntervalMs: config.storage.flushIntervalMs,
      // Half a batch waiting starts an insert before the interval is over.
      flushBytes: Math.floor(batchBytes / 2),
      memory: memory?.guard,
      timeoutMs: config.storage.timeoutMs,
      retryAfterSeconds: config.storage.retryAfterSeconds,
      log,
    });
  }
  const tables = Object.keys(TABLE_COLUMNS);
  return new JetStreamBus(nc, {
    natsUrl: config.nats.url,
    prefix: config.nats.prefix,
    tables,
    partitions: parsePartitions(config.nats.partitions, tables),
    replicas: config.nats.replicas,
    maxStreamBytes: config.nats.maxStreamBytes,
    retryAfterSeconds: config.storage.retryAfterSeconds,
    consumer: { replicas: config.nats.replicas, ackWaitMs: config.nats.ackWaitSeconds * 1000, log, onRestart },
    log,
  });
}

/** Rows per bus message: JetStream messages stay under max_payload (1 MiB by default). */
export function maxChunkBytes(nc: NatsConnection | undefined): number {
  return nc ? 512 * 1024 : Infinity;
}

/** The query endpoint's limits on one statement (SLUICE_QUERY_*). */
export function queryLimits(config: Readonly<SluiceConfig>): QueryLimits {
  const { maxExecutionSeconds, maxResultRows, maxResultBytes, resultOverflowMode, maxMemoryBytes } = config.query;
  return { maxExecutionSeconds, maxResultRows, maxResultBytes, resultOverflowMode, maxMemoryBytes };
}

/** An HTTP port's limits: its body cap, the body deadline and the connection cap (SLUICE_BODY_*, SLUICE_HTTP_MAX_CONNECTIONS). */
export function httpServerOptions(config: Readonly<SluiceConfig>, maxBodyBytes: number): HttpServerOptions {
  return {
    maxBodyBytes,
    bodyDeadline: { timeoutMs: config.limits.bodyTimeoutMs, minBytesPerSecond: config.limits.bodyMinBytesPerSecond },
    maxConnections: config.http.maxConnections,
  };
}

/**
 * The per-client-IP limits. Ingestion: token buckets (SLUICE_RATE_LIMIT_PER_MINUTE and _BURST);
 * the relay's sign-in: a bucket of SIGN_IN_PER_MINUTE; its public endpoints: sliding windows of
 * one minute (relay spec 8: at most N in any 60 seconds, not a bucket refilling during a burst);
 * the query endpoint's failed authentications: a bucket of FAILED_AUTH_PER_MINUTE.
 */
export type LimiterKind = 'ingest' | 'sign-in' | 'submissions' | 'notifications' | 'discovery' | 'query-auth';

/** Each limiter's keys in Redis, apart from the others'. */
export const LIMITER_KEYS: Record<LimiterKind, string> = {
  ingest: 'rl',
  'sign-in': 'relay-signin',
  submissions: 'relay-submissions',
  notifications: 'relay-notifications',
  discovery: 'relay-discovery',
  'query-auth': 'query-auth',
};

export function limitRule(config: Readonly<SluiceConfig>, kind: LimiterKind): TokenBucketOptions | SlidingWindowOptions {
  const minute = (limit: number) => ({ limit, windowMs: 60_000 });
  switch (kind) {
    case 'ingest': return { ratePerMinute: config.limits.ratePerMinute, burst: config.limits.rateBurst };
    case 'sign-in': return { ratePerMinute: SIGN_IN_PER_MINUTE, burst: SIGN_IN_PER_MINUTE };
    case 'submissions': return minute(config.relay.submissionsPerMinute);
    case 'notifications': return minute(config.relay.notificationsPerMinute);
    case 'discovery': return minute(config.relay.discoveryPerMinute);
    case 'query-auth': return { ratePerMinute: FAILED_AUTH_PER_MINUTE, burst: FAILED_AUTH_PER_MINUTE };
  }
}

/**
 * A per-client-IP limiter: in process, or in Redis shared by every gateway (with local
 * fallback); either way keyed by the client's network (SLUICE_IPV6_LIMIT_PREFIX, gateway/client-ip.ts).
 * `keyPrefix` keeps the keys of different limiters apart in Redis.
 */
export async function createLimiter(config: Readonly<SluiceConfig>, log: Logger, rule: TokenBucketOptions | SlidingWindowOptions, keyPrefix: string): Promise<ClientLimiter> {
  const isWindow = 'windowMs' in rule;
  const client = (limiter: Limiter) => new ClientLimiter(limiter, config.limits.ipv6Prefix);
  if (!config.redis.url) return client(isWindow ? new SlidingWindowLimiter(rule) : new TokenBucketLimiter(rule));
  const { redis, ...options } = await limiterRedis(config, log);
  return client(isWindow
    ? new RedisSlidingWindowLimiter(redis, { ...rule, ...options, keyPrefix }, log)
    : new RedisTokenBucketLimiter(redis, { ...rule, ...options, keyPrefix }, log));
}

/**
 * The sign-in lockout per account (SLUICE_SIGN_IN_LOCKOUT_*), shared by the console and the
 * relay: in process, or in Redis shared by every gateway like the limiters.
 */
export async function createSignInLockout(config: Readonly<SluiceConfig>, log: Logger, keyPrefix: string, onRefused?: () => void): Promise<SignInLockout> {
  const rule = {
    failures: config.limits.signInFailures,
    lockoutMs: config.limits.signInLockoutSeconds * 1000,
    maxLockoutMs: config.limits.signInLockoutMaxSeconds * 1000,
  };
  if (!config.redis.url) return new SignInLockout(new BackoffLockout(rule), onRefused);
  const { redis, ...options } = await limiterRedis(config, log);
  return new SignInLockout(new RedisBackoffLockout(redis, { ...rule, ...options, keyPrefix }, log), onRefused);
}

/** A Redis client of one limiter, connected (or found unreachable: the limiter falls back), and how to close it. */
async function limiterRedis(config: Readonly<SluiceConfig>, log: Logger) {
  // Loaded only here: the client takes ~0.3 s to load, which a process without Redis never needs.
  const { createClient } = await import('redis');
  const redis = createClient({
    url: config.redis.url,
    // Commands fail at once while disconnected (the limiter falls back); reconnects go on.
    disableOfflineQueue: true,
    socket: { connectTimeout: 1000, reconnectStrategy: (retries) => Math.min(100 * 2 ** retries, 5000) },
  });
  redis.on('error', () => {}); // reported by the limiter as a fallback, once
  // connect() does not settle while Redis is down (the client keeps reconnecting): wait for the
  // first answer either way, then let the reconnects go on in the background.
  const connecting = redis.connect();
  connecting.catch(() => {}); // rejects only when the client is closed before it ever connected
  const failed = await Promise.race([connecting.then(() => undefined), new Promise<Error>((resolve) => redis.once('error', resolve))]);
  if (failed) log.warn({ redis: redactUrl(config.redis.url), err: failed.message }, 'Redis unreachable at start; rate limits fall back to this gateway');
  const closeClient = async () => {
    // quit() never settles on a client that is still reconnecting: that one is destroyed.
    if (redis.isReady) await redis.quit().catch(() => redis.destroy());
    else if (redis.isOpen) redis.destroy();
  };
  return { redis, closeClient, commandTimeoutMs: config.redis.timeoutMs };
}

/**
 * The master key that seals the relay's secrets and signs sessions (relay and console):
 * configured, or the data dir's own when embedded.
 */
export async function masterKey(config: Readonly<SluiceConfig>, what: string): Promise<Buffer> {
  // A key made up here would differ from the other gateways': secrets sealed with it could not be opened there.
  if (config.nats.url && !config.relay.masterKey) throw new Error(`${what} in cluster mode needs SLUICE_RELAY_MASTER_KEY (the same on every gateway)`);
  return loadMasterKey(config.relay.masterKey, config.dataDir);
}

/** The relay's parts: its master key, the accounts, the deployment's checks, storage to read. */
export async function relayParts(
  config: Readonly<SluiceConfig>,
  state: StateStore,
  accounts: AccountStore,
  storage: () => Promise<Storage | undefined>,
  requeue: RelayParts['requeue'],
  log: Logger,
): Promise<Omit<RelayParts, 'renderer' | 'signInLockout' | 'readGate'>> {
  const egress = tenantEgressPolicy(config);
  return {
    state,
    accounts,
    log,
    masterKey: await masterKey(config, 'the relay'),
    checks: {
      webhookUrl: (url) => egress.checkConfiguredUrl(url, 'webhook'),
      smtpUrl: (url) => egress.checkConfiguredUrl(url, 'smtp'),
      serverFrom: (from) => isFromInDomains(from, config.delivery.smtpFromDomains),
    },
    storage,
    database: config.storage.database,
    requeue,
  };
}

/**
 * Where every connection a tenant aims may go (webhooks, a tenant's SMTP server): public
 * addresses; also loopback and private ones with relay.allowPrivateWebhooks, and what
 * SLUICE_WEBHOOK_ALLOW names.
 */
export function tenantEgressPolicy(config: Readonly<SluiceConfig>): EgressPolicy {
  return new EgressPolicy({ allow: [...(config.relay.allowPrivateWebhooks ? LOOPBACK_AND_PRIVATE_NETWORKS : []), ...config.delivery.egressAllow] });
}

/** The delivery queue: a write-ahead log in the data dir embedded, JetStream streams in a cluster. */
export function createDeliveryQueue(config: Readonly<SluiceConfig>, nc: NatsConnection | undefined, state: StateStore, supervisor: Supervisor, log: Logger): DeliveryQueue {
  const { delivery, storage } = config;
  const shares = { perTenant: delivery.tenantSlots, perDestination: delivery.destinationSlots };
  if (!nc) {
    return new LocalDeliveryQueue({
      dir: join(config.dataDir, 'delivery'),
      maxBytes: delivery.maxQueueBytes,
      maxJobs: delivery.maxQueueJobs,
      timeoutMs: storage.timeoutMs,
      retryAfterSeconds: storage.retryAfterSeconds,
      shares,
      // Releases before the log kept the queue in the state store's journal.
      carryOver: state,
      log,
    });
  }
  return new JetStreamDeliveryQueue(nc, {
    prefix: config.nats.prefix,
    replicas: config.nats.replicas,
    maxStreamBytes: delivery.maxQueueBytes,
    // Attempts say they are alive every third of it, so it bounds only how long a dead worker's job waits.
    ackWaitMs: delivery.ackWaitSeconds * 1000,
    retryAfterSeconds: storage.retryAfterSeconds,
    shares,
    run: (name, loop) => supervisor.run(name, loop),
    log,
  });
}

/** The server's SMTP transport and WhatsApp endpoint, for tenants without settings of their own. */
export async function deliveryDefaults(config: Readonly<SluiceConfig>): Promise<DeliveryDefaults> {
  const { delivery } = config;
  const dkim = delivery.dkimDomain && delivery.dkimSelector && delivery.dkimKeyFile
    ? { domainName: delivery.dkimDomain, keySelector: delivery.dkimSelector, privateKey: await readFile(delivery.dkimKeyFile, 'utf8') }
    : undefined;
  return {
    smtp: {
      url: delivery.smtpUrl,
      from: delivery.smtpFrom,
      maxConnections: delivery.smtpMaxConnections,
      maxMessagesPerConnection: 100,
      ratePerSecond: delivery.smtpRatePerSecond,
      tlsInsecure: delivery.smtpTlsInsecure,
      // The operator's choice, maybe a relay on its own network: not the egress policy's to judge.
      operatorServer: true,
      timeoutMs: delivery.smtpTimeoutMs,
      ...(dkim ? { dkim } : {}),
    },
    serverFromDomains: delivery.smtpFromDomains,
    whatsapp: { graphUrl: delivery.whatsappGraphUrl.replace(/\/+$/, ''), timeoutMs: delivery.webhookTimeoutMs },
  };
}

/** The CAPTCHA providers' siteverify URLs (configured, else the providers' own) and timeout. */
export function captchaSettings(config: Readonly<SluiceConfig>): { endpoints: CaptchaEndpoints; timeoutMs: number } {
  const { relay } = config;
  return {
    endpoints: {
      recaptcha: relay.recaptchaVerifyUrl || DEFAULT_CAPTCHA_ENDPOINTS.recaptcha,
      hcaptcha: relay.hcaptchaVerifyUrl || DEFAULT_CAPTCHA_ENDPOINTS.hcaptcha,
      turnstile: relay.turnstileVerifyUrl || DEFAULT_CAPTCHA_ENDPOINTS.turnstile,
    },
    timeoutMs: relay.captchaTimeoutMs,
  };
}

/**
 * How long an idempotency claim holds when its request never answers (the process died): past
 * the longest a request can take (a CAPTCHA check, then a commit) with room to spare.
 */
export function idempotencyLeaseMs(config: Readonly<SluiceConfig>): number {
  return 2 * (config.relay.captchaTimeoutMs + config.storage.timeoutMs) + 30_000;
}

/** Base URL users reach the relay at: SLUICE_RELAY_PUBLIC_URL, else this host. */
export function relayPublicUrl(config: Readonly<SluiceConfig>, port: number): string {
  return (config.relay.publicUrl || `http://localhost:${port}`).replace(/\/+$/, '');
}

/** Storage answers a trivial query: the engine is open (chDB) or the server reachable. */
export async function storageStatus(storage: Storage): Promise<ComponentStatus> {
  try {
    await storage.query('SELECT 1');
    return { ok: true };
  } catch (err) {
    return { ok: false, detail: (err as Error).message };
  }
}

/**
 * Follows the NATS connection's events (disconnects, reconnects) under the supervisor, and
 * returns the probe readiness asks: not ok while the client is disconnected or closed.
 */
export function watchNatsConnection(nc: NatsConnection, supervisor: Supervisor, log: Logger): () => ComponentStatus {
  let down: string | undefined;
  supervisor.run('nats.connection', async ({ signal }) => {
    const events = nc.status();
    signal.addEventListener('abort', () => (events as { stop?: () => void }).stop?.(), { once: true });
    for await (const event of events) {
      if (event.type === 'disconnect') {
        down = `disconnected from ${redactedServer(String(event.server ?? ''))}; reconnecting`;
        log.warn('NATS connection lost; reconnecting');
      } else if (event.type === 'reconnect') {
        down = undefined;
        log.info('NATS connection restored');
      }
      if (signal.aborted) return;
    }
    // The events end when the connection closes (at shutdown): nothing left to follow.
    if (nc.isClosed()) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  });
  return () => {
    if (nc.isClosed()) return { ok: false, detail: 'the NATS connection is closed' };
    return down ? { ok: false, detail: down } : { ok: true };
  };
}

/** host:port of a server as nats.js names it, without credentials. */
function redactedServer(server: string): string {
  return server.replace(/^[^@/]*@/, '');
}
