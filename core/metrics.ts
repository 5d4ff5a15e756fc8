/**
 * The gateway's own counters, exposed at GET /metrics in Prometheus text format.
 * Labels stay low-cardinality: signal, transport, protocol, status, table — never a source or an IP.
 */
import { createRequire } from 'node:module';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export type Signal = 'traces' | 'logs' | 'metrics';
/** The `signal` label: an OTLP signal or an agent API payload. */
export type SignalLabel = Signal | 'agent_logs' | 'agent_metrics' | 'heartbeats' | 'deploys';
/** The `transport` label of the item counters: the port a request came in on (the agent API is HTTP). */
export type Transport = 'http' | 'grpc';

/** Sluice's version, read once from its package.json. */
const SLUICE_VERSION: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** What a storage consumer counted since start (the bus reports it; bus/bus.ts BusFigures). */
export interface ConsumerTotals {
  /** Batches committed to storage. */
  batches: number;
  rows: number;
  /** Rows storage refused, set aside with the reason (files, or the dead-letter stream). */
  deadLettered: number;
  /** Batches whose insert failed (and were retried, or split). */
  failures: number;
  /** JetStream only: messages delivered more than once. */
  redelivered?: number;
}

/** What the bus reports at scrape time (bus/bus.ts BusFigures has the same shape). */
export interface BusMetricFigures {
  backlogBytes?: number;
  backlogLimitBytes?: number;
  fullRefusals?: Record<string, number>;
  timedOut?: { pending: number; withdrawn: number; notWithdrawn: number };
  consumer?: {
    totals: ConsumerTotals;
    /** What waits per partition stream; a stream whose figures could not be read is left out. */
    lag: LagFigures[];
  };
}

/** A partition stream's consumer lag (bus/bus.ts ConsumerLag). */
interface LagFigures {
  table: string;
  partition: number;
  messages: number;
  bytes: number;
  /** The stream's max_bytes (-1: none). */
  limitBytes: number;
}

/** Callers while a read is in flight share it: the metrics that show one source's figures read it once per scrape. */
function sharedRead<T>(read: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  return () => (inFlight ??= read().finally(() => (inFlight = undefined)));
}

/**
 * Sets a counter at scrape time to totals its source keeps since start: a counter still (it only
 * grows, and starts again at 0 with the process, as Prometheus expects of one).
 */
function setTotals<L extends string>(counter: Counter<L>, totals: Iterable<[Partial<Record<L, string>>, number]>): void {
  counter.reset();
  for (const [labels, value] of totals) counter.inc(labels, value);
}

export class SluiceMetrics {
  readonly registry = new Registry();

  constructor() {
    // The process figures every Node dashboard expects: CPU, resident memory, open descriptors,
    // heap, GC, event-loop lag (nodejs_eventloop_lag_p99_seconds...). The lag is sampled every
    // 100 ms, not prom-client's 10: its timer was most of an idle process's wake-ups (100 a
    // second, test/idle-wakeups.test.ts), and a stall still shows in the next sample.
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
    // Gauges named like counters (promtool refuses them); each is the sum of the same name without
    // `_total`, by type (sum(nodejs_active_handles) is the same figure).
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) this.registry.removeSingleMetric(name);
  }

  private readonly buildInfo = new Gauge({
    name: 'sluice_build_info',
    help: 'Always 1: the Sluice version, the Node.js version, the HTTP engine this process runs (uws or node) and the OTLP transcoder of its worker threads (wasm, js, or none in a role without them).',
    labelNames: ['version', 'node_version', 'http_engine', 'transcoder'] as const,
    registers: [this.registry],
  });

  /** Records what this process runs, once its HTTP engine and transcoder are known (the composition root calls it). */
  recordBuild(httpEngine: string, transcoder: 'wasm' | 'js' | 'none'): void {
    this.buildInfo.reset();
    this.buildInfo.set({ version: SLUICE_VERSION, node_version: process.version, http_engine: httpEngine, transcoder }, 1);
  }

  readonly requests = new Counter({
    name: 'sluice_requests_total',
    help: 'Ingestion requests by protocol, signal and response status (HTTP status or gRPC code name; `aborted`: the client closed the connection before its answer).',
    labelNames: ['protocol', 'signal', 'status'] as const,
    registers: [this.registry],
  });

  readonly grpcConnections = new Gauge({
    name: 'sluice_grpc_connections',
    help: 'Connections open on the OTLP/gRPC port.',
    registers: [this.registry],
  });

  readonly grpcLimited = new Counter({
    name: 'sluice_grpc_limited_total',
    help: 'Connections and calls the OTLP/gRPC port cut off at a limit: max_connections (refused at accept), open_files (accept failed: no descriptor left), handshake_timeout and idle_timeout (closed), message_timeout (DEADLINE_EXCEEDED), connection_bytes (UNAVAILABLE).',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  /** Items decoded from requests (spans, log records, metric data points). */
  readonly itemsReceived = new Counter({
    name: 'sluice_items_received_total',
    help: 'Items decoded from ingestion requests, by signal and transport (http, grpc).',
    labelNames: ['signal', 'transport'] as const,
    registers: [this.registry],
  });

  readonly itemsAccepted = new Counter({
    name: 'sluice_items_accepted_total',
    help: 'Items made durable on the bus (the local log, or JetStream) and acknowledged to the client, by signal and transport (http, grpc).',
    labelNames: ['signal', 'transport'] as const,
    registers: [this.registry],
  });

  readonly itemsRefused = new Counter({
    name: 'sluice_items_refused_total',
    help: 'Items of requests refused after decoding (the client was told to retry; nothing of them was stored), by signal, transport and reason (an error code).',
    labelNames: ['signal', 'transport', 'reason'] as const,
    registers: [this.registry],
  });

  readonly itemsDropped = new Counter({
    name: 'sluice_items_dropped_total',
    help: 'Invalid items skipped inside an accepted request and reported to the client in partial_success, by signal and transport.',
    labelNames: ['signal', 'transport'] as const,
    registers: [this.registry],
  });

  readonly inserts = new Counter({
    name: 'sluice_storage_inserts_total',
    help: 'Storage inserts by table and outcome.',
    labelNames: ['table', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly insertRows = new Counter({
    name: 'sluice_storage_rows_inserted_total',
    help: 'Rows inserted into storage.',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });

  /** Rows per insert: how well the consumer batches (the Collector's batch send size). */
  readonly insertBatchRows = new Histogram({
    name: 'sluice_storage_insert_rows',
    help: 'Rows in one storage insert, by table.',
    labelNames: ['table'] as const,
    buckets: [1, 10, 100, 1000, 10_000, 100_000, 1_000_000],
    registers: [this.registry],
  });

  readonly insertSeconds = new Histogram({
    name: 'sluice_storage_insert_seconds',
    help: 'Duration of one storage insert.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  /** Reads the bus when Prometheus scrapes (set by the composition root). */
  busSource: () => Promise<BusMetricFigures> = async () => ({});
  private readonly busFigures = sharedRead(() => this.busSource());

  readonly backlogBytes: Gauge = new Gauge({
    name: 'sluice_bus_backlog_bytes',
    help: 'Row bytes accepted by the bus and not yet committed to storage (embedded: in the local log).',
    registers: [this.registry],
    collect: async (): Promise<void> => this.backlogBytes.set((await this.busFigures()).backlogBytes ?? 0),
  });

  private readonly backlogLimitBytes: Gauge = new Gauge({
    name: 'sluice_bus_backlog_limit_bytes',
    help: 'The most row bytes the local log holds before it refuses requests with 503 (SLUICE_STORAGE_MAX_PENDING_BYTES; embedded only).',
    registers: [this.registry],
    collect: async (): Promise<void> => {
      const limit = (await this.busFigures()).backlogLimitBytes;
      if (limit !== undefined) this.backlogLimitBytes.set(limit);
    },
  });

  private readonly busFullRefusals: Counter = new Counter({
    name: 'sluice_bus_full_refusals_total',
    help: 'Publishes refused (503) because a JetStream stream was at its max_bytes, per table.',
    labelNames: ['table'] as const,
    registers: [this.registry],
    collect: async (): Promise<void> => {
      setTotals(this.busFullRefusals, Object.entries((await this.busFigures()).fullRefusals ?? {}).map(([table, count]) => [{ table }, count]));
    },
  });

  /** Reads the byte budget when Prometheus scrapes (set by the composition root on roles with a front end). */
  byteBudgetSource: (() => { inUseBytes: number; limitBytes: number }) | undefined;

  readonly byteBudget: Gauge = new Gauge({
    name: 'sluice_inflight_bytes',
    help: 'The in-flight byte budget: bytes held by requests (bodies, then rows until the bus acknowledged them) and the limit (SLUICE_MAX_INFLIGHT_BYTES).',
    labelNames: ['figure'] as const,
    registers: [this.registry],
    collect: (): void => {
      if (!this.byteBudgetSource) return;
      const { inUseBytes, limitBytes } = this.byteBudgetSource();
      this.byteBudget.set({ figure: 'in_use' }, inUseBytes);
      this.byteBudget.set({ figure: 'limit' }, limitBytes);
    },
  });

  readonly byteBudgetRefusals = new Counter({
    name: 'sluice_inflight_refusals_total',
    help: 'Requests refused with 503 because the in-flight byte budget was used up.',
    registers: [this.registry],
  });

  /** Reads the memory guard when Prometheus scrapes (set by the composition root when a memory budget is set). */
  memorySource: (() => { rssBytes: number; peakRssBytes: number; budgetBytes: number; highWaterBytes: number; storageMarkBytes: number; refusals: number; insertWaits: number }) | undefined;

  readonly memory: Gauge = new Gauge({
    name: 'sluice_memory_bytes',
    help: 'The process\'s memory budget (SLUICE_MEMORY_BUDGET_MB): its resident set now (rss) and the highest the guard saw (peak_rss), the budget, the mark from which requests are refused (high_water) and the one from which inserts into the embedded engine wait (storage_mark).',
    labelNames: ['figure'] as const,
    registers: [this.registry],
    collect: (): void => {
      if (!this.memorySource) return;
      const { rssBytes, peakRssBytes, budgetBytes, highWaterBytes, storageMarkBytes } = this.memorySource();
      this.memory.set({ figure: 'rss' }, rssBytes);
      this.memory.set({ figure: 'peak_rss' }, peakRssBytes);
      this.memory.set({ figure: 'budget' }, budgetBytes);
      this.memory.set({ figure: 'high_water' }, highWaterBytes);
      this.memory.set({ figure: 'storage_mark' }, storageMarkBytes);
    },
  });

  readonly memoryRefusals: Counter = new Counter({
    name: 'sluice_memory_refusals_total',
    help: 'Requests refused with 503 because the process was at its memory budget (SLUICE_MEMORY_BUDGET_MB).',
    registers: [this.registry],
    collect: (): void => {
      if (this.memorySource) setTotals(this.memoryRefusals, [[{}, this.memorySource().refusals]]);
    },
  });

  readonly memoryInsertWaits: Counter = new Counter({
    name: 'sluice_memory_insert_waits_total',
    help: 'Times an insert into the embedded engine waited because the process was at its memory budget.',
    registers: [this.registry],
    collect: (): void => {
      if (this.memorySource) setTotals(this.memoryInsertWaits, [[{}, this.memorySource().insertWaits]]);
    },
  });

  private readonly busTimedOutPending: Gauge = new Gauge({
    name: 'sluice_bus_timed_out_pending_messages',
    help: 'Messages of JetStream publishes that got no PubAck in time (their requests got 503) and are still to be withdrawn.',
    registers: [this.registry],
    collect: async (): Promise<void> => this.busTimedOutPending.set((await this.busFigures()).timedOut?.pending ?? 0),
  });

  private readonly busTimedOut: Counter = new Counter({
    name: 'sluice_bus_timed_out_messages_total',
    help: 'Messages of JetStream publishes that got no PubAck in time (their requests got 503), by outcome: withdrawn, or not_withdrawn (a consumer may have stored them).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
    collect: async (): Promise<void> => {
      const figures = (await this.busFigures()).timedOut;
      if (!figures) return;
      setTotals(this.busTimedOut, [[{ outcome: 'withdrawn' }, figures.withdrawn], [{ outcome: 'not_withdrawn' }, figures.notWithdrawn]]);
    },
  });

  /** Time from handing rows to the bus to their acknowledgement (JetStream PubAck, or the commit). */
  readonly publishSeconds = new Histogram({
    name: 'sluice_bus_publish_seconds',
    help: 'Time until the bus acknowledged a request\'s rows (JetStream PubAcks, or the embedded commit).',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  // The storage consumer of this process (embedded: the local log's; cluster: `consume`, `serve`).
  private readonly consumerTotals = {
    batches: this.consumerCounter('sluice_consumer_batches_total', 'Batches the storage consumer committed to storage.', (t) => t.batches),
    rows: this.consumerCounter('sluice_consumer_rows_total', 'Rows the storage consumer committed to storage.', (t) => t.rows),
    failures: this.consumerCounter('sluice_consumer_failed_batches_total', 'Batches whose insert failed (storage down or refusing): retried with backoff, or split and dead-lettered.', (t) => t.failures),
    deadLettered: this.consumerCounter(
      'sluice_consumer_dead_lettered_total',
      'Rows storage refused, set aside with the reason (embedded: a logged request\'s rows in a file under <dataDir>/log/dead-letters; cluster: a message or one request\'s part of it in the dead-letter stream).',
      (t) => t.deadLettered,
    ),
    redelivered: this.consumerCounter('sluice_consumer_redelivered_messages_total', 'Messages JetStream delivered to the consumer more than once (a consumer died or was slow to ack; cluster only).', (t) => t.redelivered),
  };

  private readonly consumerLag = this.lagGauge('sluice_consumer_lag_messages', 'Messages waiting in each partition stream of each table for the storage consumers, acknowledged ones not yet stored included (cluster only).', (lag) => lag.messages);
  private readonly consumerLagBytes = this.lagGauge('sluice_consumer_lag_bytes', 'Bytes waiting in each partition stream of each table for the storage consumers (cluster only): past sluice_consumer_stream_limit_bytes, gateways refuse with 503.', (lag) => lag.bytes);
  private readonly streamLimitBytes = this.lagGauge('sluice_consumer_stream_limit_bytes', 'Each partition stream\'s limit (SLUICE_NATS_MAX_STREAM_BYTES as the stream has it; cluster only).', (lag) => (lag.limitBytes >= 0 ? lag.limitBytes : undefined));

  /** A gauge per partition stream of the consumer's lag figures; a stream whose figures could not be read has no sample rather than a made-up one. */
  private lagGauge(name: string, help: string, pick: (lag: LagFigures) => number | undefined): Gauge {
    const gauge: Gauge = new Gauge({
      name,
      help,
      labelNames: ['table', 'partition'] as const,
      registers: [this.registry],
      collect: async (): Promise<void> => {
        gauge.reset();
        for (const lag of (await this.busFigures()).consumer?.lag ?? []) {
          const value = pick(lag);
          if (value !== undefined) gauge.set({ table: lag.table, partition: lag.partition }, value);
        }
      },
    });
    return gauge;
  }

  private consumerCounter(name: string, help: string, pick: (totals: ConsumerTotals) => number | undefined): Counter {
    const counter: Counter = new Counter({
      name,
      help,
      registers: [this.registry],
      collect: async (): Promise<void> => {
        const totals = (await this.busFigures()).consumer?.totals;
        setTotals(counter, [[{}, (totals && pick(totals)) ?? 0]]);
      },
    });
    return counter;
  }

  /** The relay's public endpoints: one count per answer. */
  readonly relayRequests = new Counter({
    name: 'sluice_relay_requests_total',
    help: 'Requests to the relay\'s public endpoints by endpoint (submissions, notifications, tenant-discovery) and response status (`aborted`: the client closed the connection before its answer).',
    labelNames: ['endpoint', 'status'] as const,
    registers: [this.registry],
  });

  /** The query endpoint (SLUICE_QUERY_PORT): one count per answer. */
  readonly queryRequests = new Counter({
    name: 'sluice_query_requests_total',
    help: 'Requests to the read-only ClickHouse endpoint by response status (403: refused credentials, 429: an address held off after failed ones; `aborted`: the client closed the connection before its answer).',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  /** Delivery attempts by channel and outcome: delivered, failed (retried later) or dead. */
  readonly deliveryAttempts = new Counter({
    name: 'sluice_delivery_attempts_total',
    help: 'Delivery attempts by channel (email, whatsapp, webhook) and outcome (delivered, failed: retried later, dead: no more attempts).',
    labelNames: ['channel', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly deliverySeconds = new Histogram({
    name: 'sluice_delivery_attempt_seconds',
    help: 'Time of one delivery attempt (resolve, connect, send, answer) by channel and outcome.',
    labelNames: ['channel', 'outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30],
    registers: [this.registry],
  });

  /** Messages the development inbox kept instead of sending (SLUICE_DELIVERY_INBOX), by channel. */
  readonly deliveryInboxMessages = new Counter({
    name: 'sluice_delivery_inbox_messages_total',
    help: 'Messages the development inbox kept instead of sending them (SLUICE_DELIVERY_INBOX=true: nothing is sent), by channel (email, whatsapp, webhook).',
    labelNames: ['channel'] as const,
    registers: [this.registry],
  });

  /** Read at scrape time (set by the composition root): jobs queued or being attempted, and history records lost. */
  deliverySource: (() => Promise<{ depth: number; historyLost: number }>) | undefined;
  private readonly deliveryFigures = sharedRead(async () => this.deliverySource?.().catch(() => undefined));

  private readonly deliveryQueueDepth: Gauge = new Gauge({
    name: 'sluice_delivery_queue_depth',
    help: 'Delivery jobs waiting or being attempted.',
    registers: [this.registry],
    collect: async (): Promise<void> => {
      const figures = await this.deliveryFigures();
      if (figures) this.deliveryQueueDepth.set(figures.depth);
    },
  });

  private readonly deliveryHistoryLost: Counter = new Counter({
    name: 'sluice_delivery_history_lost_total',
    help: 'Delivery attempt records that could not be written to the attempt history (the attempts themselves happened).',
    registers: [this.registry],
    collect: async (): Promise<void> => {
      const figures = await this.deliveryFigures();
      if (figures) setTotals(this.deliveryHistoryLost, [[{}, figures.historyLost]]);
    },
  });

  /** Rows of the per-source ingest counts given up (pipeline/ingest-tally.ts). */
  readonly ingestCountsDropped = new Counter({
    name: 'sluice_ingest_counts_dropped_total',
    help: 'Rows of ingest_counts (requests and items per source for the console) dropped: the bus refused them for too long (the oldest go first), or at shutdown.',
    registers: [this.registry],
  });

  /** Long-running loops (consumers, watches) that failed and were started again. */
  readonly loopRestarts = new Counter({
    name: 'sluice_loop_restarts_total',
    help: 'Long-running loops (storage consumers, state watches) that failed and were restarted, by loop.',
    labelNames: ['loop'] as const,
    registers: [this.registry],
  });

  /** Worker threads that reached their heap limit (SLUICE_WORKER_HEAP_MB) and were replaced. */
  readonly workerOutOfMemory = new Counter({
    name: 'sluice_worker_out_of_memory_total',
    help: 'Worker threads that reached their heap limit (SLUICE_WORKER_HEAP_MB) and were replaced, by pool; the requests they held got 503.',
    labelNames: ['pool'] as const,
    registers: [this.registry],
  });

  /** Requests the WebAssembly transcoder could not serve, served by the JavaScript one (pipeline/wasm/select.ts). */
  readonly transcoderFallbacks = new Counter({
    name: 'sluice_transcoder_fallbacks_total',
    help: 'OTLP requests the WebAssembly transcoder could not serve, served by the JavaScript one instead, by reason: trap (a bug in the module; its instance was replaced), out_of_memory (the request needed more than the module\'s memory maximum), not_loaded (SLUICE_TRANSCODER=wasm, and a thread could not load the module).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  /** Sign-in attempts refused because their account is locked out (gateway/sign-in-lockout.ts). */
  readonly signInLockedOut = new Counter({
    name: 'sluice_sign_in_locked_out_total',
    help: 'Sign-in attempts (console and relay) refused with 429 because their account is locked out after repeated failures; their password was not checked.',
    registers: [this.registry],
  });

  readonly unhandledRejections = new Counter({
    name: 'sluice_unhandled_rejections_total',
    help: 'Promise rejections nothing handled (bugs): each is logged with its cause; the process keeps serving.',
    registers: [this.registry],
  });

  /** Read at scrape time (set by the composition root): the readiness of each component. */
  readinessSource: () => Promise<Record<string, { ok: boolean }>> = async () => ({});

  private readonly componentReady: Gauge = new Gauge({
    name: 'sluice_component_ready',
    help: 'Whether each component can do its work now (1) or not (0), as GET /api/v1/ready reports it.',
    labelNames: ['component'] as const,
    registers: [this.registry],
    collect: async (): Promise<void> => {
      this.componentReady.reset();
      for (const [component, status] of Object.entries(await this.readinessSource())) this.componentReady.set({ component }, status.ok ? 1 : 0);
    },
  });

  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
