/**
 * IngestService: the pipeline's face to the front ends. A front end hands it an authenticated
 * request's raw bytes; it runs them through the worker pool, publishes the rows on the bus and
 * resolves once they are durable. It knows formats and rows, not HTTP or gRPC.
 */
import { SluiceError } from '../core/errors.ts';
import type { SluiceMetrics } from '../core/metrics.ts';
import type { Bus } from '../bus/bus.ts';
import type { ContentEncoding } from './decompress.ts';
import type { Signal } from './otlp/index.ts';
import type { PipelinePool } from './pool.ts';

export interface OtlpIngestRequest {
  signal: Signal;
  format: 'protobuf' | 'json';
  encoding: ContentEncoding;
  body: Uint8Array;
  sourceId: string;
}

export interface IngestOutcome {
  accepted: number;
  rejected: number;
  rejectMessage?: string;
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

  async ingestOtlp(request: OtlpIngestRequest): Promise<IngestOutcome> {
    const { signal } = request;
    const result = await this.pool.run({
      kind: 'otlp',
      ...request,
      maxBytes: this.options.maxBodyBytes,
      maxChunkBytes: this.options.maxChunkBytes,
    });
    if (!result.ok) {
      if (result.detail) this.onInternalError(result.detail);
      throw new SluiceError(result.code, result.message);
    }
    this.metrics.itemsReceived.inc({ signal }, result.accepted + result.rejected);
    const stopTimer = this.metrics.publishSeconds.startTimer();
    try {
      await this.bus.publish(result.tables);
      stopTimer();
    } catch (err) {
      const reason = err instanceof SluiceError ? err.code : 'internal';
      this.metrics.itemsRefused.inc({ signal, reason }, result.accepted + result.rejected);
      throw err;
    }
    this.metrics.itemsAccepted.inc({ signal }, result.accepted);
    if (result.rejected > 0) this.metrics.itemsDropped.inc({ signal }, result.rejected);
    return { accepted: result.accepted, rejected: result.rejected, rejectMessage: result.rejectMessage };
  }
}
