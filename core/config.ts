/**
 * Configuration: defaults < optional JSON config file (SLUICE_CONFIG) < environment.
 * Validated once at start-up with one JSON Schema; every problem is reported with its path,
 * then the config is frozen. OPTIONS is the single list the schema, the environment mapping
 * and the table of docs/reference/configuration.md are built from.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Ajv, type ErrorObject } from 'ajv';
import { parseNatsUrl } from './nats-url.ts';

export interface SluiceConfig {
  dataDir: string;
  host: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  shutdownTimeoutMs: number;
  http: { port: number; engine: 'uws' | 'node'; publicUrl: string; maxConnections: number };
  grpc: { port: number; maxConnections: number; handshakeTimeoutMs: number; idleTimeoutMs: number; messageTimeoutMs: number };
  limits: {
    maxBodyBytes: number;
    maxInFlightBytes: number;
    bodyTimeoutMs: number;
    bodyMinBytesPerSecond: number;
    ratePerMinute: number;
    rateBurst: number;
    trustedProxies: string[];
    ipv6Prefix: number;
    signInFailures: number;
    signInLockoutSeconds: number;
    signInLockoutMaxSeconds: number;
  };
  pipeline: { workers: number; workerHeapMb: number; transcoder: 'auto' | 'wasm' | 'js' };
  /** budgetMb absent: the default (core/memory-budget.ts defaultBudgetMb: a share of the machine, grown to fit the process). */
  memory: { budgetMb?: number };
  storage: {
    database: string;
    maxPendingBytes: number;
    flushIntervalMs: number;
    timeoutMs: number;
    retryAfterSeconds: number;
    ttlDays: number;
  };
  clickhouse: { url: string; cluster: string; replicated: boolean; distributed: boolean };
  query: {
    port: number;
    user: string;
    password: string;
    maxExecutionSeconds: number;
    maxResultRows: number;
    maxResultBytes: number;
    resultOverflowMode: 'throw' | 'break';
    maxMemoryBytes: number;
    maxConcurrent: number;
  };
  nats: { url: string; prefix: string; replicas: number; partitions: string; maxStreamBytes: number; ackWaitSeconds: number };
  redis: { url: string; timeoutMs: number };
  console: { enabled: boolean; port: number; publicUrl: string };
  alerts: { intervalSeconds: number };
  relay: {
    port: number;
    masterKey: string;
    operatorToken: string;
    allowPrivateWebhooks: boolean;
    publicUrl: string;
    submissionsPerMinute: number;
    notificationsPerMinute: number;
    discoveryPerMinute: number;
    captchaTimeoutMs: number;
    recaptchaVerifyUrl: string;
    hcaptchaVerifyUrl: string;
    turnstileVerifyUrl: string;
  };
  delivery: {
    concurrency: number;
    tenantSlots: number;
    destinationSlots: number;
    attempts: number;
    backoffBaseMs: number;
    backoffMaxMs: number;
    maxQueueBytes: number;
    maxQueueJobs: number;
    ackWaitSeconds: number;
    smtpUrl: string;
    smtpFrom: string;
    smtpMaxConnections: number;
    smtpRatePerSecond: number;
    smtpTlsInsecure: boolean;
    smtpTimeoutMs: number;
    smtpFromDomains: string[];
    dkimDomain: string;
    dkimSelector: string;
    dkimKeyFile: string;
    whatsappGraphUrl: string;
    webhookTimeoutMs: number;
    egressAllow: string[];
    inbox: boolean;
  };
}

type OptionType = 'string' | 'integer' | 'boolean' | 'list';

interface Option {
  /** Dotted path in the config object and the config file. */
  path: string;
  env: string;
  type: OptionType;
  default: unknown;
  /** One line for docs/reference/configuration.md (its links relative to that page). */
  doc: string;
  /** The default as that page shows it, where the value depends on the machine. */
  shownDefault?: string;
  schema?: Record<string, unknown>;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const MIN_QUERY_PASSWORD_LENGTH = 12;

export const OPTIONS: readonly Option[] = [
  { path: 'dataDir', env: 'SLUICE_DATA_DIR', type: 'string', default: './data', doc: 'Directory for the embedded storage (chDB), the local state store and the control socket.', schema: { minLength: 1 } },
  { path: 'host', env: 'SLUICE_HOST', type: 'string', default: '127.0.0.1', doc: 'Address the HTTP and gRPC listeners bind to (0.0.0.0 for all interfaces).', schema: { minLength: 1 } },
  { path: 'logLevel', env: 'SLUICE_LOG_LEVEL', type: 'string', default: 'info', doc: 'pino log level: fatal, error, warn, info, debug, trace or silent.', schema: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] } },
  { path: 'shutdownTimeoutMs', env: 'SLUICE_SHUTDOWN_TIMEOUT_MS', type: 'integer', default: 20_000, doc: 'How long a stop (SIGTERM, SIGINT) may take: listeners close at once, requests in flight get up to half of it to finish, then the rest are cancelled and what is left goes to flushing; at the end the process exits whatever is still running (acknowledged rows wait in the local log or JetStream). A second signal exits at once.', schema: { minimum: 100, maximum: 600_000 } },
  { path: 'http.port', env: 'SLUICE_OTLP_HTTP_PORT', type: 'integer', default: 4318, doc: 'OTLP/HTTP and agent API port (0 picks a free port).', schema: { minimum: 0, maximum: 65535 } },
  { path: 'http.engine', env: 'SLUICE_HTTP_ENGINE', type: 'string', default: 'node', doc: 'HTTP engine: node (node:http: answers every well-formed HTTP/1.x request) or uws (uWebSockets.js: about the same CPU in our runs, and it does not answer HTTP/1.0, a missing Host, 49+ headers or bare-LF lines: only behind a proxy speaking HTTP/1.1; falls back to node, with one warning, where it has no native binary, e.g. on Node 22 and 24).', schema: { enum: ['uws', 'node'] } },
  { path: 'http.publicUrl', env: 'SLUICE_PUBLIC_URL', type: 'string', default: '', doc: 'URL agents reach the HTTP port at (https://ingest.example.com), written into install manifests; default http://localhost:<port>.', schema: { pattern: '^(|https?://[^\\s"\'\\\\<>`]+)$' } },
  { path: 'http.maxConnections', env: 'SLUICE_HTTP_MAX_CONNECTIONS', type: 'integer', default: 10_000, doc: 'Connections each HTTP port (ingest, relay) holds at once; past it new ones are closed at once. node:http only: uWebSockets.js has no such limit.', schema: { minimum: 1 } },
  { path: 'grpc.port', env: 'SLUICE_OTLP_GRPC_PORT', type: 'integer', default: 4317, doc: 'OTLP/gRPC port (0 picks a free port).', schema: { minimum: 0, maximum: 65535 } },
  { path: 'grpc.maxConnections', env: 'SLUICE_GRPC_MAX_CONNECTIONS', type: 'integer', default: 0, doc: 'Connections the gRPC port holds at once; past it new ones are closed at accept (logged, counted). 0: half the soft open-files limit (ulimit -n) at start, at most 10,000, so descriptors stay for HTTP, storage and the control socket.', schema: { minimum: 0 } },
  { path: 'grpc.handshakeTimeoutMs', env: 'SLUICE_GRPC_HANDSHAKE_TIMEOUT_MS', type: 'integer', default: 10_000, doc: 'How long a new gRPC connection may take to send the HTTP/2 preface before it is closed.', schema: { minimum: 100, maximum: 600_000 } },
  { path: 'grpc.idleTimeoutMs', env: 'SLUICE_GRPC_IDLE_TIMEOUT_MS', type: 'integer', default: 120_000, doc: 'How long a gRPC connection may stay without a call before it is closed (GOAWAY; clients reconnect when they next export). Pings do not count as calls.', schema: { minimum: 100, maximum: 86_400_000 } },
  { path: 'grpc.messageTimeoutMs', env: 'SLUICE_GRPC_MESSAGE_TIMEOUT_MS', type: 'integer', default: 30_000, doc: 'How long a gRPC call may take to send its whole request message (from its headers on; a shorter grpc-timeout of the client wins); past it the call ends with DEADLINE_EXCEEDED and its memory is freed.', schema: { minimum: 100, maximum: 600_000 } },
  { path: 'limits.maxBodyBytes', env: 'SLUICE_MAX_BODY_BYTES', type: 'integer', default: 10 * MiB, doc: 'Cap on the compressed and on the decompressed request body, in bytes (10 MiB).', schema: { minimum: 1024 } },
  { path: 'limits.maxInFlightBytes', env: 'SLUICE_MAX_INFLIGHT_BYTES', type: 'integer', default: 0, doc: 'Memory budget of a front end for requests in flight, in bytes: bodies as their bytes arrive and while they are decoded, rows until the bus made them durable (the local log or JetStream); when it is used up, requests get 503 + Retry-After. Keep it several times the body cap. 0: a share of SLUICE_MEMORY_BUDGET_MB (an eighth of what the budget leaves after the process\'s base, 20–256 MiB; 256 MiB without a budget).', schema: { minimum: 0 } },
  { path: 'limits.bodyTimeoutMs', env: 'SLUICE_BODY_TIMEOUT_MS', type: 'integer', default: 10_000, doc: 'How long a request body may take to arrive once Sluice reads it (after the rate limit and key check), plus one second per SLUICE_BODY_MIN_BYTES_PER_SECOND bytes received; a slower body gets 408 and its connection is closed.', schema: { minimum: 100 } },
  { path: 'limits.bodyMinBytesPerSecond', env: 'SLUICE_BODY_MIN_BYTES_PER_SECOND', type: 'integer', default: 64 * 1024, doc: 'The rate a long body must keep up on average: each such many bytes received give it one more second (see SLUICE_BODY_TIMEOUT_MS).', schema: { minimum: 1 } },
  { path: 'limits.ratePerMinute', env: 'SLUICE_RATE_LIMIT_PER_MINUTE', type: 'integer', default: 600, doc: 'Ingestion requests per minute per source IP (token bucket refill rate).', schema: { minimum: 1 } },
  { path: 'limits.rateBurst', env: 'SLUICE_RATE_LIMIT_BURST', type: 'integer', default: 600, doc: 'Token bucket size: the burst a source IP may send at once.', schema: { minimum: 1 } },
  { path: 'limits.trustedProxies', env: 'SLUICE_TRUSTED_PROXIES', type: 'list', default: [], doc: 'Comma-separated proxy IPs whose X-Forwarded-For is trusted for the client IP (none by default).', schema: { items: { type: 'string', minLength: 1 } } },
  { path: 'limits.ipv6Prefix', env: 'SLUICE_IPV6_LIMIT_PREFIX', type: 'integer', default: 64, doc: 'Per-client-IP limits count an IPv6 client by its network of this many leading bits (48 to 128; 64: a /64, what one host or home is usually given, so rotating addresses within it gains nothing); IPv4 clients by their address.', schema: { minimum: 48, maximum: 128 } },
  { path: 'limits.signInFailures', env: 'SLUICE_SIGN_IN_LOCKOUT_FAILURES', type: 'integer', default: 10, doc: 'Failed sign-ins to one account (console and relay, by email, from any address) after which it is locked out for a while; failures are forgotten after SLUICE_SIGN_IN_LOCKOUT_MAX_SECONDS without one, and by a successful sign-in.', schema: { minimum: 1, maximum: 1000 } },
  { path: 'limits.signInLockoutSeconds', env: 'SLUICE_SIGN_IN_LOCKOUT_SECONDS', type: 'integer', default: 60, doc: 'The first lockout of an account, in seconds; each further one in a row doubles, up to SLUICE_SIGN_IN_LOCKOUT_MAX_SECONDS. A locked account gets 429 + Retry-After, its password not checked.', schema: { minimum: 1, maximum: 86_400 } },
  { path: 'limits.signInLockoutMaxSeconds', env: 'SLUICE_SIGN_IN_LOCKOUT_MAX_SECONDS', type: 'integer', default: 900, doc: 'The longest lockout of an account, in seconds (15 minutes): a lockout always ends, so nobody can lock an account for good by guessing at it.', schema: { minimum: 1, maximum: 86_400 } },
  { path: 'pipeline.workers', env: 'SLUICE_WORKERS', type: 'integer', default: Math.max(1, availableParallelism()), shownDefault: 'cores', doc: 'Worker threads that decompress, decode and build rows (default: one per core).', schema: { minimum: 1, maximum: 256 } },
  { path: 'pipeline.workerHeapMb', env: 'SLUICE_WORKER_HEAP_MB', type: 'integer', default: 0, doc: 'Heap limit of each worker thread (the worker pool\'s and the relay\'s render threads), in MiB (V8\'s old generation): a request that needs more fails with 503 and its thread is replaced, the process keeps serving. An OTLP/JSON body of 10 MiB of tiny records needs about 96; raise it with SLUICE_MAX_BODY_BYTES. 0: a share of SLUICE_MEMORY_BUDGET_MB (a quarter of what the budget leaves after the process\'s base, across the threads, 32–512 each; 512 without a budget).', schema: { minimum: 0, maximum: 65_536 } },
  { path: 'pipeline.transcoder', env: 'SLUICE_TRANSCODER', type: 'string', default: 'auto', doc: 'The worker threads\' OTLP transcoder (protobuf to rows): auto (WebAssembly, compiled from C, where it loads and Node runs with --disable-wasm-trap-handler, as every way of starting Sluice does; else JavaScript), wasm (WebAssembly, or Sluice does not start) or js (JavaScript, the reference). Both write the same rows and refusals; a request the module cannot serve (a trap, more than its 256 MiB of memory) is served by JavaScript, logged and counted (sluice_transcoder_fallbacks_total). See [Transcoder](../internals/transcoder.md).', schema: { enum: ['auto', 'wasm', 'js'] } },
  { path: 'memory.budgetMb', env: 'SLUICE_MEMORY_BUDGET_MB', type: 'integer', default: undefined, shownDefault: 'a quarter of memory, 768–4096', doc: 'Memory budget of the whole process, in MiB of resident memory (see [Memory](../guides/operating.md#memory)): divided at start among the process\'s base, requests in flight, the worker threads\' heaps and, where it runs in the process, the embedded engine (chDB: its memory limit, caches and merges, and the query endpoint\'s per-statement limit); options set explicitly keep their value. At the budget, ingestion gets 503 + Retry-After and inserts into chDB wait. By default a quarter of the machine\'s memory (or of the container\'s limit), at least 768 MiB, which fits a machine of 1 GiB, and at most 4096; when the process needs more (many worker threads, a SLUICE_WORKER_HEAP_MB or SLUICE_MAX_INFLIGHT_BYTES set high), the default grows to the least that fits, with a warning; a budget set too small is refused at start, saying the least that runs. 0: no budget.', schema: { minimum: 0 } },
  { path: 'storage.database', env: 'SLUICE_CLICKHOUSE_DATABASE', type: 'string', default: 'otel', doc: 'ClickHouse database holding the tables.', schema: { pattern: '^[A-Za-z_][A-Za-z0-9_]*$' } },
  { path: 'storage.maxPendingBytes', env: 'SLUICE_STORAGE_MAX_PENDING_BYTES', type: 'integer', default: GiB, doc: 'Embedded: bytes of rows in the local log (<dataDir>/log) not yet inserted into chDB; past it requests get 503 (bounds the disk the log takes while storage is slow or down).', schema: { minimum: MiB } },
  { path: 'storage.flushIntervalMs', env: 'SLUICE_STORAGE_FLUSH_INTERVAL_MS', type: 'integer', default: 1000, doc: 'Embedded: the longest rows wait in the local log before they are inserted into chDB (sooner when 32 MiB are waiting); larger batches make fewer parts to merge. Reads through Sluice wait for rows acknowledged before them.', schema: { minimum: 10, maximum: 60_000 } },
  { path: 'storage.timeoutMs', env: 'SLUICE_STORAGE_TIMEOUT_MS', type: 'integer', default: 10_000, doc: 'How long a request waits for its rows to be durable (embedded: written to the local log) before it gets 503.', schema: { minimum: 100 } },
  { path: 'storage.retryAfterSeconds', env: 'SLUICE_RETRY_AFTER_SECONDS', type: 'integer', default: 5, doc: 'Retry-After sent with 503 when storage is down or behind.', schema: { minimum: 1 } },
  { path: 'storage.ttlDays', env: 'SLUICE_TTL_DAYS', type: 'integer', default: 0, doc: 'Days to keep telemetry rows (a TTL on every table, set when a table is created); 0 keeps them forever.', schema: { minimum: 0 } },
  { path: 'query.port', env: 'SLUICE_QUERY_PORT', type: 'integer', default: 0, doc: 'Embedded default: port of the read-only ClickHouse HTTP endpoint for Grafana and other ClickHouse clients (see [Grafana](../guides/querying.md#grafana)); 0: off. Needs SLUICE_QUERY_PASSWORD; refused with CLICKHOUSE_URL or NATS_URL (query that ClickHouse server instead).', schema: { minimum: 0, maximum: 65535 } },
  { path: 'query.user', env: 'SLUICE_QUERY_USER', type: 'string', default: 'grafana', doc: 'User name the query endpoint accepts.', schema: { pattern: '^[A-Za-z0-9_.@-]{1,64}$' } },
  { path: 'query.password', env: 'SLUICE_QUERY_PASSWORD', type: 'string', default: '', doc: 'Password of that user, at least 12 characters; required when SLUICE_QUERY_PORT is set. It reads the telemetry tables (not the relay\'s submissions, nor the server\'s files and settings).' },
  { path: 'query.maxExecutionSeconds', env: 'SLUICE_QUERY_MAX_EXECUTION_SECONDS', type: 'integer', default: 30, doc: 'Longest a query of the endpoint may run (ClickHouse max_execution_time); past it the query fails with TIMEOUT_EXCEEDED. A client may ask for less, never more.', schema: { minimum: 1, maximum: 3600 } },
  { path: 'query.maxResultRows', env: 'SLUICE_QUERY_MAX_RESULT_ROWS', type: 'integer', default: 1_000_000, doc: 'Most rows a query of the endpoint may return (max_result_rows); see SLUICE_QUERY_RESULT_OVERFLOW_MODE. A client may ask for less, never more.', schema: { minimum: 1 } },
  { path: 'query.maxResultBytes', env: 'SLUICE_QUERY_MAX_RESULT_BYTES', type: 'integer', default: 100 * MiB, doc: 'Most bytes (uncompressed, in memory) a query of the endpoint may return (max_result_bytes); bounds the memory a result takes. A client may ask for less, never more.', schema: { minimum: 1024 } },
  { path: 'query.resultOverflowMode', env: 'SLUICE_QUERY_RESULT_OVERFLOW_MODE', type: 'string', default: 'throw', doc: 'What a result over a limit does (result_overflow_mode): throw (the query fails with TOO_MANY_ROWS_OR_BYTES) or break (the rows so far are returned, up to a block more than the limit).', schema: { enum: ['throw', 'break'] } },
  { path: 'query.maxMemoryBytes', env: 'SLUICE_QUERY_MAX_MEMORY_BYTES', type: 'integer', default: 0, doc: 'Most memory the engine may take for one query of the endpoint (ClickHouse max_memory_usage); past it the query fails with MEMORY_LIMIT_EXCEEDED. The endpoint as a whole takes at most SLUICE_QUERY_MAX_CONCURRENT times this. A client may ask for less, never more. 0: a quarter of the engine\'s share of SLUICE_MEMORY_BUDGET_MB (512 MiB without a budget).', schema: { minimum: 0 } },
  { path: 'query.maxConcurrent', env: 'SLUICE_QUERY_MAX_CONCURRENT', type: 'integer', default: 2, doc: 'Queries of the endpoint that run at once; the rest wait their turn (up to 100; more are refused). Each holds a thread of libuv\'s pool, which chDB inserts and disk writes share.', schema: { minimum: 1, maximum: 64 } },
  { path: 'clickhouse.url', env: 'CLICKHOUSE_URL', type: 'string', default: '', doc: 'ClickHouse server (http://user:password@host:8123) instead of the embedded chDB engine.', schema: { pattern: '^(|https?://.+)$' } },
  { path: 'clickhouse.cluster', env: 'SLUICE_CLICKHOUSE_CLUSTER', type: 'string', default: '', doc: 'Cluster name for ON CLUSTER DDL in `sluice migrate` (empty: a single server).', schema: { pattern: '^[A-Za-z0-9_]*$' } },
  { path: 'nats.url', env: 'NATS_URL', type: 'string', default: '', doc: 'NATS servers with JetStream (comma-separated nats:// or tls:// URLs; credentials as user:password@ or token@, the same for every server); set it for cluster mode: bus on JetStream, state on KV.', schema: { pattern: '^(|(nats|tls)://.+)$' } },
  { path: 'nats.prefix', env: 'SLUICE_NATS_PREFIX', type: 'string', default: 'SLUICE', doc: 'Prefix of the JetStream streams and KV buckets, so several deployments can share one NATS.', schema: { pattern: '^[A-Z][A-Z0-9_]{0,31}$' } },
  { path: 'nats.replicas', env: 'SLUICE_NATS_REPLICAS', type: 'integer', default: 1, doc: 'Replicas of each JetStream stream and KV bucket (3 on a 3-node cluster).', schema: { minimum: 1, maximum: 5 } },
  { path: 'nats.partitions', env: 'SLUICE_NATS_PARTITIONS', type: 'string', default: '1', doc: 'Row streams per table, so a table\'s writes spread over several stream leaders: a number for every table, `table=N` for one (`otel_traces=3,otel_logs=3`; `2,otel_traces=6`). Gateways spread a table\'s messages over its partitions; consumers pull from every partition stream there is. Changed by a rolling restart (see [Cluster, *Partitions*](../guides/cluster.md#partitions)).', schema: { pattern: '^[a-z0-9_]+(=[0-9]+)?(,[a-z0-9_]+(=[0-9]+)?)*$' } },
  { path: 'nats.maxStreamBytes', env: 'SLUICE_NATS_MAX_STREAM_BYTES', type: 'integer', default: 1024 * MiB, doc: 'Bytes each row stream (one per table) may hold while consumers catch up; JetStream reserves it on disk; when full, gateways answer 503.', schema: { minimum: MiB } },
  { path: 'nats.ackWaitSeconds', env: 'SLUICE_NATS_ACK_WAIT_SECONDS', type: 'integer', default: 30, doc: 'How long a consumer may hold a batch before JetStream hands it to another (the wait after a consumer dies); longer than your slowest insert. One value for all consumers: each applies it at start.', schema: { minimum: 5, maximum: 600 } },
  { path: 'redis.url', env: 'REDIS_URL', type: 'string', default: '', doc: 'Redis for cluster-wide rate limits (redis://host:6379); without it each gateway limits on its own.', schema: { pattern: '^(|rediss?://.+)$' } },
  { path: 'redis.timeoutMs', env: 'SLUICE_REDIS_TIMEOUT_MS', type: 'integer', default: 100, doc: 'A rate-limit answer from Redis slower than this counts as Redis being down: the gateway limits on its own and tries Redis again every 2 s. Stalls of the gateway\'s own event loop do not count.', schema: { minimum: 1, maximum: 60_000 } },
  { path: 'console.enabled', env: 'SLUICE_CONSOLE', type: 'boolean', default: true, doc: 'Serve the web console (see [Console](../guides/console.md)) on `sluice serve`, and on `sluice gateway` when SLUICE_RELAY_MASTER_KEY and CLICKHOUSE_URL are set.' },
  { path: 'console.port', env: 'SLUICE_CONSOLE_PORT', type: 'integer', default: 4320, doc: 'Web console port, its own origin (0 picks a free port).', schema: { minimum: 0, maximum: 65535 } },
  { path: 'console.publicUrl', env: 'SLUICE_CONSOLE_PUBLIC_URL', type: 'string', default: '', doc: 'URL users open the console at (https://console.example.com): its origin is the only one the console API answers, and https makes its cookie Secure. Default: http://localhost:<console port> (and its 127.0.0.1 and [::1] forms).', schema: { pattern: '^(|https?://[^\\s"\'\\\\<>`/]+(:[0-9]+)?/?)$' } },
  { path: 'alerts.intervalSeconds', env: 'SLUICE_ALERT_INTERVAL_SECONDS', type: 'integer', default: 30, doc: 'How often alert rules are evaluated, each over its own window (see [Console](../guides/console.md), *Alerts*). One process evaluates at a time: it holds a lease in the state store for three intervals, renewed every round, which another process takes over when it lapses.', schema: { minimum: 5, maximum: 3600 } },
  { path: 'relay.port', env: 'SLUICE_RELAY_PORT', type: 'integer', default: 8080, doc: 'Notification relay port (0 picks a free port).', schema: { minimum: 0, maximum: 65535 } },
  { path: 'relay.masterKey', env: 'SLUICE_RELAY_MASTER_KEY', type: 'string', default: '', doc: 'Base64 of 32 random bytes: seals stored relay secrets and signs admin and console sessions. Embedded default: generated into <dataDir>/relay-master.key. Cluster: required for the relay (the same on every gateway).', schema: { pattern: '^(|[A-Za-z0-9+/]{43}=)$' } },
  { path: 'relay.operatorToken', env: 'SLUICE_RELAY_OPERATOR_TOKEN', type: 'string', default: '', doc: 'Enables tenant onboarding over HTTP (POST /api/v1/admin/tenants with x-operator-token); empty: CLI only.' },
  { path: 'relay.allowPrivateWebhooks', env: 'SLUICE_RELAY_ALLOW_PRIVATE_WEBHOOKS', type: 'boolean', default: false, doc: 'Let every destination a tenant aims (webhook URLs, a tenant\'s own SMTP server) be on loopback and private addresses (on-premises receivers); refused by default by the egress policy.' },
  { path: 'relay.publicUrl', env: 'SLUICE_RELAY_PUBLIC_URL', type: 'string', default: '', doc: 'URL users reach the relay port at (https://relay.example.com), written into tenant discovery emails; default http://localhost:<relay port>.', schema: { pattern: '^(|https?://[^\\s"\'\\\\<>`]+)$' } },
  { path: 'relay.submissionsPerMinute', env: 'SLUICE_RELAY_SUBMISSIONS_PER_MINUTE', type: 'integer', default: 10, doc: 'POST /api/v1/submissions accepted per client IP in any 60-second window (a sliding window; shared through Redis when REDIS_URL is set).', schema: { minimum: 1 } },
  { path: 'relay.notificationsPerMinute', env: 'SLUICE_RELAY_NOTIFICATIONS_PER_MINUTE', type: 'integer', default: 300, doc: 'POST /api/v1/notifications accepted per client IP in any 60-second window.', schema: { minimum: 1 } },
  { path: 'relay.discoveryPerMinute', env: 'SLUICE_RELAY_DISCOVERY_PER_MINUTE', type: 'integer', default: 10, doc: 'POST /api/v1/tenant-discovery accepted per client IP in any 60-second window.', schema: { minimum: 1 } },
  { path: 'relay.captchaTimeoutMs', env: 'SLUICE_RELAY_CAPTCHA_TIMEOUT_MS', type: 'integer', default: 5000, doc: 'How long a CAPTCHA provider may take to answer before the submission gets 503 (retry with a fresh token).', schema: { minimum: 100, maximum: 60_000 } },
  { path: 'relay.recaptchaVerifyUrl', env: 'SLUICE_RELAY_RECAPTCHA_VERIFY_URL', type: 'string', default: '', doc: 'reCAPTCHA (v2 and v3) siteverify URL; default Google\'s (https://www.google.com/recaptcha/api/siteverify).', schema: { pattern: '^(|https?://.+)$' } },
  { path: 'relay.hcaptchaVerifyUrl', env: 'SLUICE_RELAY_HCAPTCHA_VERIFY_URL', type: 'string', default: '', doc: 'hCaptcha siteverify URL; default hCaptcha\'s (https://api.hcaptcha.com/siteverify).', schema: { pattern: '^(|https?://.+)$' } },
  { path: 'relay.turnstileVerifyUrl', env: 'SLUICE_RELAY_TURNSTILE_VERIFY_URL', type: 'string', default: '', doc: 'Cloudflare Turnstile siteverify URL; default Cloudflare\'s (https://challenges.cloudflare.com/turnstile/v0/siteverify).', schema: { pattern: '^(|https?://.+)$' } },
  { path: 'delivery.concurrency', env: 'SLUICE_DELIVERY_CONCURRENCY', type: 'integer', default: 64, doc: 'Delivery attempts a process runs at once (serve and each `sluice deliver`).', schema: { minimum: 1, maximum: 1000 } },
  { path: 'delivery.tenantSlots', env: 'SLUICE_DELIVERY_TENANT_SLOTS', type: 'integer', default: 16, doc: 'Of those, how many one tenant may hold: a tenant whose SMTP server stalls delays only its own mail.', schema: { minimum: 1, maximum: 1000 } },
  { path: 'delivery.destinationSlots', env: 'SLUICE_DELIVERY_DESTINATION_SLOTS', type: 'integer', default: 8, doc: 'Of those, how many one destination (an email address, a WhatsApp number, a webhook) may hold.', schema: { minimum: 1, maximum: 1000 } },
  { path: 'delivery.attempts', env: 'SLUICE_DELIVERY_ATTEMPTS', type: 'integer', default: 10, doc: 'Attempts per delivery job (the first included) before it is dead; transient failures only, a permanent one is dead at once.', schema: { minimum: 1, maximum: 100 } },
  { path: 'delivery.backoffBaseMs', env: 'SLUICE_DELIVERY_BACKOFF_BASE_MS', type: 'integer', default: 15_000, doc: 'Wait after the first failed attempt; doubles per attempt (each drawn from half to all of its step), never less than Retry-After.', schema: { minimum: 10 } },
  { path: 'delivery.backoffMaxMs', env: 'SLUICE_DELIVERY_BACKOFF_MAX_MS', type: 'integer', default: 3_600_000, doc: 'The longest wait between two attempts.', schema: { minimum: 10 } },
  { path: 'delivery.maxQueueBytes', env: 'SLUICE_DELIVERY_MAX_QUEUE_BYTES', type: 'integer', default: 1024 * MiB, doc: 'Bytes of jobs the delivery queue holds (embedded: in its log, <dataDir>/delivery; cluster: in each of its two JetStream streams); past it submissions and notifications get 503 + Retry-After.', schema: { minimum: MiB } },
  { path: 'delivery.maxQueueJobs', env: 'SLUICE_DELIVERY_MAX_QUEUE_JOBS', type: 'integer', default: 100_000, doc: 'Embedded: jobs the delivery queue holds (each has about 300 bytes of index in memory: 30 MB for 100,000); past it intake gets 503 + Retry-After.', schema: { minimum: 100 } },
  { path: 'delivery.ackWaitSeconds', env: 'SLUICE_DELIVERY_ACK_WAIT_SECONDS', type: 'integer', default: 60, doc: 'Cluster: how long a delivery attempt may go without a sign of life (sent every third of it) before JetStream hands the job to another worker (the wait after a `sluice deliver` dies mid-attempt). One value for every process: each applies it at start.', schema: { minimum: 3, maximum: 600 } },
  { path: 'delivery.smtpUrl', env: 'SLUICE_SMTP_URL', type: 'string', default: '', doc: 'Server default SMTP server (smtp://user:pass@host:587, STARTTLS when offered; smtps:// for implicit TLS); a tenant may set its own. Empty: email jobs of tenants without their own go dead saying so.', schema: { pattern: '^(|smtps?://.+)$' } },
  { path: 'delivery.smtpFrom', env: 'SLUICE_SMTP_FROM', type: 'string', default: '', doc: 'Server default From address (`relay@example.com` or `Relay <relay@example.com>`).' },
  { path: 'delivery.smtpMaxConnections', env: 'SLUICE_SMTP_MAX_CONNECTIONS', type: 'integer', default: 5, doc: 'Pooled connections per SMTP server.', schema: { minimum: 1, maximum: 100 } },
  { path: 'delivery.smtpRatePerSecond', env: 'SLUICE_SMTP_RATE_PER_SECOND', type: 'integer', default: 0, doc: 'Messages per second per SMTP server; 0: no limit.', schema: { minimum: 0 } },
  { path: 'delivery.smtpTlsInsecure', env: 'SLUICE_SMTP_TLS_INSECURE', type: 'boolean', default: false, doc: 'Accept a self-signed certificate from the server\'s SMTP server (SLUICE_SMTP_URL, an on-premises relay); never from a tenant\'s own.' },
  { path: 'delivery.smtpTimeoutMs', env: 'SLUICE_SMTP_TIMEOUT_MS', type: 'integer', default: 60_000, doc: 'How long one email attempt may take in all, waiting for a pooled connection (and the rate limit) included; past it the attempt fails transiently and its message is withdrawn (or its connection closed) so as not to go out later. Connecting, the greeting and any silence of the server are cut at 30 s, or at this if shorter.', schema: { minimum: 100, maximum: 600_000 } },
  { path: 'delivery.smtpFromDomains', env: 'SLUICE_SMTP_FROM_DOMAINS', type: 'list', default: [], doc: 'Domains (comma-separated) a tenant\'s From may use on the server\'s SMTP transport: ones you verified (SPF, DKIM). Any other From needs the tenant\'s own SMTP server; the server\'s transport sends it with SLUICE_SMTP_FROM.', schema: { items: { type: 'string', pattern: '^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$' } } },
  { path: 'delivery.dkimDomain', env: 'SLUICE_DKIM_DOMAIN', type: 'string', default: '', doc: 'DKIM-sign server default email for this domain (with SLUICE_DKIM_SELECTOR and SLUICE_DKIM_KEY_FILE).' },
  { path: 'delivery.dkimSelector', env: 'SLUICE_DKIM_SELECTOR', type: 'string', default: '', doc: 'DKIM selector (the DNS record <selector>._domainkey.<domain>).' },
  { path: 'delivery.dkimKeyFile', env: 'SLUICE_DKIM_KEY_FILE', type: 'string', default: '', doc: 'PEM file of the DKIM private key.' },
  { path: 'delivery.whatsappGraphUrl', env: 'SLUICE_WHATSAPP_GRAPH_URL', type: 'string', default: 'https://graph.facebook.com/v21.0', doc: 'WhatsApp Cloud API base URL (messages go to {base}/{phone-number-id}/messages).', schema: { pattern: '^https?://.+' } },
  { path: 'delivery.webhookTimeoutMs', env: 'SLUICE_WEBHOOK_TIMEOUT_MS', type: 'integer', default: 15_000, doc: 'How long a webhook receiver, or the WhatsApp Cloud API, may take to answer one attempt (connect, headers and body).', schema: { minimum: 100, maximum: 120_000 } },
  { path: 'delivery.egressAllow', env: 'SLUICE_WEBHOOK_ALLOW', type: 'list', default: [], doc: 'Addresses (CIDRs like 10.1.0.0/16) and host names every destination a tenant aims (webhook URLs, a tenant\'s own SMTP server) may reach although the egress policy forbids them (on-premises receivers).' },
  { path: 'delivery.inbox', env: 'SLUICE_DELIVERY_INBOX', type: 'boolean', default: false, doc: 'Development only: nothing is sent. Every email, WhatsApp message and webhook is rendered as it would be sent and kept in the development inbox (`sluice relay inbox list`, GET /api/v1/admin/inbox, the console\'s Inbox page; the newest 1,000 per tenant, for 7 days), its attempt recorded as delivered. Embedded default only: refused with NATS_URL.' },
  { path: 'clickhouse.replicated', env: 'SLUICE_CLICKHOUSE_REPLICATED', type: 'boolean', default: false, doc: 'Create ReplicatedMergeTree tables (needs ClickHouse Keeper and {shard}/{replica} macros).' },
  { path: 'clickhouse.distributed', env: 'SLUICE_CLICKHOUSE_DISTRIBUTED', type: 'boolean', default: false, doc: 'Shard the tables over SLUICE_CLICKHOUSE_CLUSTER: each table\'s rows in `<table>_local` on every node, under a Distributed table of the plain name that consumers insert into (waiting until every shard stored its rows) and readers query (see [Storage](storage.md#sharded-over-a-cluster)). Only for a new database: an existing one keeps its layout. Needs SLUICE_CLICKHOUSE_CLUSTER.' },
];

const TYPE_SCHEMA: Record<OptionType, Record<string, unknown>> = {
  string: { type: 'string' },
  integer: { type: 'integer' },
  boolean: { type: 'boolean' },
  list: { type: 'array' },
};

/** The JSON Schema of the whole config, built from OPTIONS; unknown keys are errors. */
export function configSchema(): Record<string, unknown> {
  const root = { type: 'object', additionalProperties: false, properties: {} as Record<string, any>, required: [] as string[] };
  for (const option of OPTIONS) {
    let node = root;
    const parts = option.path.split('.');
    for (const part of parts.slice(0, -1)) {
      node.properties[part] ??= { type: 'object', additionalProperties: false, properties: {}, required: [], default: {} };
      node = node.properties[part];
    }
    const leaf = parts[parts.length - 1]!;
    node.properties[leaf] = { ...TYPE_SCHEMA[option.type], ...option.schema, default: option.default };
  }
  return root;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

function setPath(target: Record<string, any>, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) node = node[part] ??= {};
  node[parts[parts.length - 1]!] = value;
}

function fromEnv(option: Option, raw: string): unknown {
  if (option.type === 'integer') return /^-?\d+$/.test(raw.trim()) ? Number(raw) : raw;
  if (option.type === 'list') return raw.split(',').map((s) => s.trim()).filter(Boolean);
  if (option.type === 'boolean') return ({ true: true, '1': true, false: false, '0': false } as Record<string, boolean>)[raw.trim().toLowerCase()] ?? raw;
  return raw;
}

function describe(error: ErrorObject, envByPath: Map<string, string>): string {
  const path = error.instancePath.slice(1).replaceAll('/', '.');
  if (error.keyword === 'additionalProperties') {
    const key = [path, error.params.additionalProperty].filter(Boolean).join('.');
    return `${key}: unknown option`;
  }
  const env = envByPath.get(path);
  const allowed = error.keyword === 'enum' ? ` (${(error.params.allowedValues as unknown[]).join(', ')})` : '';
  return `${path || '(root)'}${env ? ` (${env})` : ''}: ${error.message}${allowed}`;
}

/**
 * V8's JSON.parse message quotes the text around the error (`Unexpected token 'p', ..."password": p4ss"...`):
 * a config file holds passwords and tokens, so the quote is cut and the rest kept.
 */
function withoutExcerpt(message: string): string {
  return message.replace(/, (\.\.\.)?".*"(\.\.\.)? is not valid JSON$/s, ' (not valid JSON)');
}

/** One service URL that parses; throws, without the value, when it does not. */
function parseServiceUrl(value: string): void {
  if (!URL.canParse(value)) throw new Error('must be a valid URL (the value is not shown: it may hold a password)');
}

/** The options holding service URLs, which may carry credentials; NATS_URL is a list of servers that must agree (core/nats-url.ts). */
const SERVICE_URLS = [
  { path: 'clickhouse.url', env: 'CLICKHOUSE_URL', check: parseServiceUrl },
  { path: 'nats.url', env: 'NATS_URL', check: parseNatsUrl },
  { path: 'redis.url', env: 'REDIS_URL', check: parseServiceUrl },
] as const;

/**
 * A service URL that does not parse, named without its value (it may hold a password). Checked
 * here so that no driver meets it: their URL errors carry the input along.
 */
function serviceUrlProblems(raw: Record<string, any>): string[] {
  const problems: string[] = [];
  for (const { path, env, check } of SERVICE_URLS) {
    const [section, key] = path.split('.') as [string, string];
    const value: unknown = raw[section]?.[key];
    if (typeof value !== 'string' || value === '') continue;
    try {
      check(value);
    } catch (err) {
      problems.push(`${path} (${env}): ${(err as Error).message}`);
    }
  }
  return problems;
}

/** Options whose 0 means "a share of the memory budget" (core/memory-budget.ts); any other value has a floor. */
const ZERO_OR_AT_LEAST = [
  { path: 'limits.maxInFlightBytes', env: 'SLUICE_MAX_INFLIGHT_BYTES', minimum: MiB },
  { path: 'pipeline.workerHeapMb', env: 'SLUICE_WORKER_HEAP_MB', minimum: 32 },
  { path: 'query.maxMemoryBytes', env: 'SLUICE_QUERY_MAX_MEMORY_BYTES', minimum: 16 * MiB },
] as const;

function budgetShareProblems(raw: Record<string, any>): string[] {
  const problems: string[] = [];
  for (const { path, env, minimum } of ZERO_OR_AT_LEAST) {
    const [section, key] = path.split('.') as [string, string];
    const value: unknown = raw[section]?.[key];
    if (typeof value === 'number' && value !== 0 && value < minimum) {
      problems.push(`${path} (${env}): must be 0 (a share of the memory budget) or >= ${minimum}`);
    }
  }
  return problems;
}

/** The query endpoint needs a password, and the embedded engine to serve (a ClickHouse server has its own HTTP port). */
function queryEndpointProblems(raw: Record<string, any>): string[] {
  if (!raw.query?.port) return [];
  const problems: string[] = [];
  const password: unknown = raw.query.password;
  if (typeof password !== 'string' || password.length < MIN_QUERY_PASSWORD_LENGTH) {
    problems.push(`query.password (SLUICE_QUERY_PASSWORD): required when query.port is set, at least ${MIN_QUERY_PASSWORD_LENGTH} characters (the value is not shown)`);
  }
  if (raw.clickhouse?.url || raw.nats?.url) {
    problems.push('query.port (SLUICE_QUERY_PORT): the query endpoint serves the embedded chDB only; with CLICKHOUSE_URL or NATS_URL, point Grafana at the ClickHouse server');
  }
  return problems;
}

/** The development inbox keeps what would be sent, in the one process of the embedded default: never in a cluster, where messages must go out. */
function deliveryInboxProblems(raw: Record<string, any>): string[] {
  if (raw.delivery?.inbox !== true || !raw.nats?.url) return [];
  return ['delivery.inbox (SLUICE_DELIVERY_INBOX): the development inbox is a feature of the embedded default (npm start), where nothing is sent; refused with NATS_URL (a cluster delivers for real)'];
}

/** Distributed tables name their cluster. */
function distributedProblems(raw: Record<string, any>): string[] {
  if (raw.clickhouse?.distributed !== true || raw.clickhouse?.cluster) return [];
  return ['clickhouse.distributed (SLUICE_CLICKHOUSE_DISTRIBUTED): needs SLUICE_CLICKHOUSE_CLUSTER, the cluster the tables are sharded over'];
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/**
 * Loads, validates and freezes the configuration. Throws ConfigError listing every problem.
 * `overrides` (used by tests and the bench) apply on top of the environment.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Record<string, unknown> = {}): Readonly<SluiceConfig> {
  const problems: string[] = [];
  let raw: Record<string, any> = {};
  if (env.SLUICE_CONFIG) {
    try {
      raw = JSON.parse(readFileSync(env.SLUICE_CONFIG, 'utf8'));
    } catch (err) {
      problems.push(`SLUICE_CONFIG: cannot read ${env.SLUICE_CONFIG}: ${withoutExcerpt((err as Error).message)}`);
    }
  }
  for (const option of OPTIONS) {
    const value = env[option.env];
    if (value !== undefined && value !== '') setPath(raw, option.path, fromEnv(option, value));
  }
  for (const [path, value] of Object.entries(overrides)) setPath(raw, path, value);

  const ajv = new Ajv({ allErrors: true, useDefaults: true });
  const validate = ajv.compile(configSchema());
  if (!validate(raw)) {
    const envByPath = new Map(OPTIONS.map((o) => [o.path, o.env]));
    problems.push(...(validate.errors ?? []).map((e) => describe(e, envByPath)));
  }
  problems.push(...serviceUrlProblems(raw), ...queryEndpointProblems(raw), ...deliveryInboxProblems(raw), ...budgetShareProblems(raw), ...distributedProblems(raw));
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(raw as SluiceConfig);
}
