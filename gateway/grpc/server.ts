/**
 * OTLP/gRPC: TraceService, MetricsService and LogsService Export on @grpc/grpc-js. Messages
 * pass through as raw bytes (identity (de)serializers): decoding happens in the worker pool
 * like every other payload. grpc-js itself inflates gzip messages, bounded by
 * max_receive_message_length (it stops a message that decompresses past the cap).
 */
import * as grpc from '@grpc/grpc-js';
import type { ByteBudget } from '../../core/byte-budget.ts';
import { SluiceError, toSluiceError } from '../../core/errors.ts';
import type { Logger } from '../../core/log.ts';
import type { Signal, SluiceMetrics } from '../../core/metrics.ts';
import type { IngestService } from '../../pipeline/ingest.ts';
import { requireSource, type KeyAuthenticator } from '../auth.ts';
import type { ClientIpResolver } from '../client-ip.ts';
import type { Limiter } from '../limiter.ts';
import { encodeExportResponse, encodeStatus } from '../otlp-response.ts';

export interface GrpcDeps {
  ingest: IngestService;
  /** The process's in-flight byte budget (grpc-js has read the message already: it bounds what follows). */
  budget: ByteBudget;
  auth: KeyAuthenticator;
  limiter: Limiter;
  clientIp: ClientIpResolver;
  metrics: SluiceMetrics;
  log: Logger;
  maxBodyBytes: number;
}

const SERVICES: Record<Signal, string> = {
  traces: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
  metrics: '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export',
  logs: '/opentelemetry.proto.collector.logs.v1.LogsService/Export',
};

const passThrough = (value: Buffer) => value;
/** grpc-js writes Buffers only: wrap the encoded response without copying. */
const asBuffer = (value: Uint8Array) => Buffer.from(value.buffer, value.byteOffset, value.byteLength);

function serviceDefinition(path: string): grpc.ServiceDefinition {
  return {
    Export: {
      path,
      requestStream: false,
      responseStream: false,
      requestSerialize: passThrough,
      requestDeserialize: passThrough,
      responseSerialize: asBuffer,
      responseDeserialize: passThrough,
    },
  };
}

const CODE_NAMES = Object.fromEntries(Object.entries(grpc.status).map(([name, code]) => [code, name]));

/** "ipv4:1.2.3.4:5678" / "ipv6:[::1]:5678" → the address. */
function peerAddress(peer: string): string {
  const match = peer.match(/^(?:ipv[46]:)?\[?([^\]]*?)\]?:\d+$/);
  return match?.[1] ?? peer;
}

function first(metadata: grpc.Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0];
  return value === undefined ? undefined : String(value);
}

export class OtlpGrpcServer {
  private server: grpc.Server | undefined;

  constructor(private readonly deps: GrpcDeps) {}

  async listen(host: string, port: number): Promise<number> {
    const server = new grpc.Server({
      'grpc.max_receive_message_length': this.deps.maxBodyBytes,
      'grpc.max_send_message_length': 1024 * 1024,
    });
    for (const [signal, path] of Object.entries(SERVICES) as Array<[Signal, string]>) {
      server.addService(serviceDefinition(path), { Export: this.exportHandler(signal) });
    }
    this.server = server;
    const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    return new Promise((resolve, reject) => {
      server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound)));
    });
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
  }

  private exportHandler(signal: Signal): grpc.handleUnaryCall<Buffer, Uint8Array> {
    return (call, callback) => {
      this.export(signal, call).then(
        (response) => {
          this.deps.metrics.requests.inc({ protocol: 'grpc', signal, status: 'OK' });
          callback(null, response);
        },
        (err) => {
          const error = toSluiceError(err);
          if (error.code === 'internal') this.deps.log.error({ err: error.cause ?? error }, 'gRPC export failed unexpectedly');
          this.deps.metrics.requests.inc({ protocol: 'grpc', signal, status: CODE_NAMES[error.grpcCode] ?? String(error.grpcCode) });
          callback(toGrpcError(error));
        },
      );
    };
  }

  private async export(signal: Signal, call: grpc.ServerUnaryCall<Buffer, Uint8Array>): Promise<Uint8Array> {
    const { deps } = this;
    const ip = deps.clientIp(peerAddress(call.getPeer()), first(call.metadata, 'x-forwarded-for'));
    const decision = await deps.limiter.take(ip);
    if (!decision.allowed) {
      throw new SluiceError('rate_limited', 'too many requests from this IP', { retryAfterSeconds: decision.retryAfterSeconds });
    }
    const sourceId = requireSource(deps.auth, first(call.metadata, 'x-api-key'), first(call.metadata, 'authorization'));
    // Held until the bus settled the rows; UNAVAILABLE when the budget is used up.
    const reservation = deps.budget.reserve(call.request.byteLength);
    try {
      // Copy into a buffer of its own so it can be transferred to a worker.
      const body = Buffer.allocUnsafeSlow(call.request.byteLength);
      body.set(call.request);
      const outcome = await deps.ingest.ingestOtlp({ signal, format: 'protobuf', encoding: 'identity', body, sourceId, reservation });
      return encodeExportResponse(signal, 'protobuf', { rejected: outcome.rejected, message: outcome.rejectMessage }) as Uint8Array;
    } finally {
      reservation.release();
    }
  }
}

/** A SluiceError as a gRPC status; retryable ones carry RetryInfo in grpc-status-details-bin. */
function toGrpcError(error: SluiceError): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata();
  if (error.retryAfterSeconds !== undefined) {
    const status = encodeStatus('protobuf', error.grpcCode, error.message, error.retryAfterSeconds) as Uint8Array;
    metadata.set('grpc-status-details-bin', Buffer.from(status));
  }
  return { code: error.grpcCode, details: error.message, metadata };
}
