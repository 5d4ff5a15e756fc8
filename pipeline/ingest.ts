/**
 * IngestService: the pipeline's face to the front ends. A front end hands it an authenticated
 * request's raw bytes; it runs them through the worker pool, publishes the rows on the bus and
 * resolves once they are durable. It knows formats and rows, not HTTP or gRPC.
 *
 * Memory: the request comes with its byte-budget reservation (the front end took it after
 * admission and releases it when this settles). It covers the body through the worker pool,
 * is resized to the rows when they come back, and is handed to the bus with them.
 */
import type { Reservation } from '../core/byte-budget.ts';
import { SluiceError, toSluiceError } from '../core/errors.ts';
import type { SignalLabel, SluiceMetrics, Transport } from '../core/metrics.ts';
import { chunkBytes, type Bus } from '../bus/bus.ts';
import type { ContentEncoding } from './decompress.ts';
import type { Signal } from './otlp/index.ts';
import type { PipelinePool } from './pool.ts';
import type { AgentKind } from './agent/schemas.ts';
import type { TableName } from '../storage/schema.ts';
import type { PipelineTask } from './tasks.ts';

export interface OtlpIngestRequest {
  signal: Signal;
  /** The port it came in on (the `transport` label of the item counters). */
  transport: Transport;
  format: 'protobuf' | 'json';
  encoding: ContentEncoding;
  body: Uint8Array;
  sourceId: string;
  /** Budget bytes held for this request (the caller releases them). */
  reservation: Reservation;
}

export interface AgentIngestRequest {
  payload: AgentKind;
  encoding: ContentEncoding;
  body: Uint8Array;
  sourceId: string;
  reservation: Reservation;
}

/** The tables each kind of request may write rows to (the bus's up-front refusal is per table). */
const TABLES_OF: Record<SignalLabel, readonly TableName[]> = {
  traces: ['otel_traces'],
  logs: ['otel_logs'],
  metrics: ['otel_metrics_gauge', 'otel_metrics_sum', 'otel_metrics_histogram', 'otel_metrics_exp_histogram', 'otel_metrics_summary'],
  agent_logs: ['agent_logs'],
  agent_metrics: ['agent_metrics'],
  heartbeats: ['agent_heartbeats'],
  deploys: ['deploy_markers'],
};

/** The metrics label of each agent payload. */
const AGENT_SIGNAL: Record<AgentKind, SignalLabel> = {
  logs: 'agent_logs',
  metrics: 'agent_metrics',
  heartbeat: 'heartbeats',
  deploy: 'deploys',
};

export interface IngestOutcome {
  accepted: number;
  rejected: number;
  rejectMessage?: string;
}

/**
 * A request refused after its payload was decoded (the bus or storage could not take its rows):
 * the error it is answered with, unchanged, and the items it held, which the front end counts
 * as refused (pipeline/ingest-tally.ts).
 */
export class RefusedAfterDecoding extends SluiceError {
  constructor(readonly items: number, error: SluiceError) {
    super(error.code, error.message, { cause: error.cause ?? error, retryAfterSeconds: error.retryAfterSeconds });
  }
}

export interface IngestServiceOptions {
  maxBodyBytes: number;
  /** Largest row chunk the bus carries in one message (Infinity: no limit). */
  maxChunkBytes: number;
}

export class IngestService {
  constructor(
    private readonly pool: PipelinePool,
    private readonly bus: Bus,
    private readonly metrics: SluiceMetrics,
    private readonly options: IngestServiceOptions,
    private readonly onInternalError: (detail: string) => void = () => {},
  ) {}

  ingestOtlp({ reservation, transport, ...request }: OtlpIngestRequest): Promise<IngestOutcome> {
    const task: PipelineTask = { kind: 'otlp', ...request, maxBytes: this.options.maxBodyBytes, maxChunkBytes: this.options.maxChunkBytes };
    return this.run({ signal: request.signal, transport }, task, reservation);
  }

  /** An agent API request: validated whole (a bad batch stores nothing), then published. */
  ingestAgent({ reservation, ...request }: AgentIngestRequest): Promise<IngestOutcome> {
    const task: PipelineTask = {
      kind: 'agent',
      ...request,
      maxBytes: this.options.maxBodyBytes,
      maxChunkBytes: this.options.maxChunkBytes,
      receivedAt: String(BigInt(Date.now()) * 1_000_000n),
    };
    return this.run({ signal: AGENT_SIGNAL[request.payload], transport: 'http' }, task, reservation);
  }

  private async run(labels: { signal: SignalLabel; transport: Transport }, task: PipelineTask, reservation: Reservation): Promise<IngestOutcome> {
    // Rows the bus cannot take now are not made: a request refused up front costs no decoding.
    const refusal = this.bus.refusal?.(TABLES_OF[labels.signal]);
    if (refusal) throw refusal;
    const result = await this.pool.run(task);
    if (!result.ok) {
      if (result.detail) this.onInternalError(result.detail);
      throw new SluiceError(result.code, result.message);
    }
    this.metrics.itemsReceived.inc(labels, result.accepted + result.rejected);
    const stopTimer = this.metrics.publishSeconds.startTimer();
    try {
      // The body went to the worker; the rows take its place until the bus settles them.
      reservation.resize(chunkBytes(result.tables));
      await this.bus.publish(result.tables, reservation);
      stopTimer();
      // Durable: nothing reads these rows again (a bus keeps bytes past settling only when it
      // fails), so their buffers can carry another request's rows.
      this.pool.recycle(result.tables);
    } catch (err) {
      const error = toSluiceError(err);
      this.metrics.itemsRefused.inc({ ...labels, reason: error.code }, result.accepted + result.rejected);
      throw new RefusedAfterDecoding(result.accepted + result.rejected, error);
    }
    this.metrics.itemsAccepted.inc(labels, result.accepted);
    if (result.rejected > 0) this.metrics.itemsDropped.inc(labels, result.rejected);
    return { accepted: result.accepted, rejected: result.rejected, rejectMessage: result.rejectMessage };
  }
}
