/**
 * The gateway's own counters, exposed at GET /metrics in Prometheus text format.
 * Labels stay low-cardinality: signal, protocol, status, table — never a source or an IP.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export type Signal = 'traces' | 'logs' | 'metrics';
/** The `signal` label: an OTLP signal or an agent API payload. */
export type SignalLabel = Signal | 'agent_logs' | 'agent_metrics' | 'heartbeats' | 'deploys';

export interface ConsumerFigures {
  totals: Record<string, number>;
  /** Messages waiting per table stream. */
  lag: Record<string, number>;
}

export class SluiceMetrics {
  readonly registry = new Registry();

  readonly requests = new Counter({
    name: 'sluice_requests_total',
    help: 'Ingestion requests by protocol, signal and response status (HTTP status or gRPC code name).',
    labelNames: ['protocol', 'signal', 'status'] as const,
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

  /** Reads the bus backlog when Prometheus scrapes (set by the composition root). */
  backlogSource: () => number = () => 0;

  readonly backlogBytes: Gauge = new Gauge({
    name: 'sluice_bus_backlog_bytes',
    help: 'Row bytes accepted by the bus and not yet committed.',
    registers: [this.registry],
    collect: (): void => this.backlogBytes.set(this.backlogSource()),
  });

  /** Time from handing rows to the bus to their acknowledgement (JetStream PubAck, or the commit). */
  readonly publishSeconds = new Histogram({
    name: 'sluice_bus_publish_seconds',
    help: 'Time until the bus acknowledged a request\'s rows (JetStream PubAcks, or the embedded commit).',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  /** Read at scrape time from the storage consumer (set by the composition root in cluster mode). */
  consumerSource: (() => Promise<ConsumerFigures>) | undefined;

  private readonly consumerGauge: Gauge = new Gauge({
    name: 'sluice_consumer',
    help: 'Storage consumer figures: lag (messages not yet stored, per table), batches, rows, redelivered and dead-lettered messages, failed batches (totals since start).',
    labelNames: ['figure', 'table'] as const,
    registers: [this.registry],
    collect: async (): Promise<void> => {
      if (!this.consumerSource) return;
      const figures = await this.consumerSource();
      for (const [figure, value] of Object.entries(figures.totals)) this.consumerGauge.set({ figure, table: '' }, value);
      for (const [table, lag] of Object.entries(figures.lag)) this.consumerGauge.set({ figure: 'lag', table }, lag);
    },
  });

  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
