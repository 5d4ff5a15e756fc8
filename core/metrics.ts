/**
 * The gateway's own counters, exposed at GET /metrics in Prometheus text format.
 * Labels stay low-cardinality: signal, protocol, status, table — never a source or an IP.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export type Signal = 'traces' | 'logs' | 'metrics';
/** The `signal` label: an OTLP signal or an agent API payload. */
export type SignalLabel = Signal | 'agent_logs' | 'agent_metrics' | 'heartbeats' | 'deploys';

/** What the bus reports at scrape time (bus/bus.ts BusFigures has the same shape). */
export interface BusMetricFigures {
  backlogBytes?: number;
  fullRefusals?: Record<string, number>;
  timedOut?: { pending: number; withdrawn: number; notWithdrawn: number };
  consumer?: {
    totals: Record<string, number>;
    /** Messages waiting per table stream. */
    lag: Record<string, number>;
  };
}

export class SluiceMetrics {
  readonly registry = new Registry();

  constructor() {
    // The process figures every Node dashboard expects: CPU, resident memory, open descriptors,
    // heap, GC, event-loop lag (nodejs_eventloop_lag_p99_seconds...).
    collectDefaultMetrics({ register: this.registry });
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
    help: 'Items decoded from ingestion requests.',
    labelNames: ['signal'] as const,
    registers: [this.registry],
  });

  readonly itemsAccepted = new Counter({
    name: 'sluice_items_accepted_total',
    help: 'Items committed to storage and acknowledged to the client.',
    labelNames: ['signal'] as const,
    registers: [this.registry],
  });

  readonly itemsRefused = new Counter({
    name: 'sluice_items_refused_total',
    help: 'Items of requests refused after decoding (the client was told to retry; nothing of them was stored).',
    labelNames: ['signal', 'reason'] as const,
    registers: [this.registry],
  });

  readonly itemsDropped = new Counter({
    name: 'sluice_items_dropped_total',
    help: 'Invalid items skipped inside an accepted request and reported to the client in partial_success.',
    labelNames: ['signal'] as const,
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

  readonly insertSeconds = new Histogram({
    name: 'sluice_storage_insert_seconds',
    help: 'Duration of one storage insert.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  /** Reads the bus when Prometheus scrapes (set by the composition root). */
  busSource: () => Promise<BusMetricFigures> = async () => ({});

  readonly backlogBytes: Gauge = new Gauge({
    name: 'sluice_bus_backlog_bytes',
    help: 'Row bytes accepted by the bus and not yet committed (embedded).',
    registers: [this.registry],
    collect: async (): Promise<void> => this.backlogBytes.set((await this.busSource()).backlogBytes ?? 0),
  });

  readonly busFullRefusals: Gauge = new Gauge({
    name: 'sluice_bus_full_refusals',
    help: 'Publishes refused (503) because a JetStream stream was at its max_bytes, per table, since start.',
    labelNames: ['table'] as const,
    registers: [this.registry],
    collect: async (): Promise<void> => {
      for (const [table, count] of Object.entries((await this.busSource()).fullRefusals ?? {})) this.busFullRefusals.set({ table }, count);
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

  readonly busTimedOut: Gauge = new Gauge({
    name: 'sluice_bus_timed_out_messages',
    help: 'Messages of JetStream publishes that got no PubAck in time (their requests got 503), since start: pending withdrawal, withdrawn, not withdrawn (a consumer may have stored them).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
    collect: async (): Promise<void> => {
      const figures = (await this.busSource()).timedOut;
      if (!figures) return;
      this.busTimedOut.set({ outcome: 'pending' }, figures.pending);
      this.busTimedOut.set({ outcome: 'withdrawn' }, figures.withdrawn);
      this.busTimedOut.set({ outcome: 'not_withdrawn' }, figures.notWithdrawn);
    },
  });

  /** Time from handing rows to the bus to their acknowledgement (JetStream PubAck, or the commit). */
  readonly publishSeconds = new Histogram({
    name: 'sluice_bus_publish_seconds',
    help: 'Time until the bus acknowledged a request\'s rows (JetStream PubAcks, or the embedded commit).',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  private readonly consumerGauge: Gauge = new Gauge({
    name: 'sluice_consumer',
    help: 'Storage consumer figures: lag (messages not yet stored, per table), batches, rows, redelivered and dead-lettered messages, failed batches (totals since start).',
    labelNames: ['figure', 'table'] as const,
    registers: [this.registry],
    collect: async (): Promise<void> => {
      const figures = (await this.busSource()).consumer;
      if (!figures) return;
      for (const [figure, value] of Object.entries(figures.totals)) this.consumerGauge.set({ figure, table: '' }, value);
      for (const [table, lag] of Object.entries(figures.lag)) this.consumerGauge.set({ figure: 'lag', table }, lag);
    },
  });

  /** The relay's public endpoints: one count per answer. */
  readonly relayRequests = new Counter({
    name: 'sluice_relay_requests_total',
    help: 'Requests to the relay\'s public endpoints by endpoint (submissions, notifications, tenant-discovery) and response status (`aborted`: the client closed the connection before its answer).',
    labelNames: ['endpoint', 'status'] as const,
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

  /** Read at scrape time (set by the composition root): jobs queued or being attempted, and history records lost. */
  deliverySource: (() => Promise<{ depth: number; historyLost: number }>) | undefined;

  private readonly deliveryGauge: Gauge = new Gauge({
    name: 'sluice_delivery_queue',
    help: 'Delivery queue figures: depth (jobs waiting or being attempted) and history_lost (attempt records that could not be written).',
    labelNames: ['figure'] as const,
    registers: [this.registry],
    collect: async (): Promise<void> => {
      if (!this.deliverySource) return;
      const figures = await this.deliverySource().catch(() => undefined);
      if (!figures) return;
      this.deliveryGauge.set({ figure: 'depth' }, figures.depth);
      this.deliveryGauge.set({ figure: 'history_lost' }, figures.historyLost);
    },
  });

  /** Long-running loops (consumers, watches) that failed and were started again. */
  readonly loopRestarts = new Counter({
    name: 'sluice_loop_restarts_total',
    help: 'Long-running loops (storage consumers, state watches) that failed and were restarted, by loop.',
    labelNames: ['loop'] as const,
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
