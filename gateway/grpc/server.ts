/**
 * OTLP/gRPC: TraceService, MetricsService and LogsService Export, on node:http2 (cleartext,
 * prior knowledge, as exporters with insecure credentials speak it). A unary call is a POST
 * whose one request message is length-prefixed; the answer is one message and a status in
 * trailers, or the status alone. Messages pass through as bytes: decompression (grpc-encoding
 * gzip or zstd, bounded) and decoding happen in the worker pool like every other payload.
 *
 * A call is admitted (rate limit, key) from its headers, before a byte of its message is read;
 * the message's declared length is then reserved from the connection's share and the process's
 * byte budget before it is kept, and it must arrive within the message deadline. Connections
 * are bounded in number, handshake time and idle time (connections.ts).
 */
import { constants, createServer, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { ByteBudget, Reservation } from '../../core/byte-budget.ts';
import { GrpcCode, SluiceError, toSluiceError, type ErrorCode } from '../../core/errors.ts';
import type { Logger } from '../../core/log.ts';
import type { Signal, SluiceMetrics } from '../../core/metrics.ts';
import { RefusedAfterDecoding, type IngestOutcome, type IngestService } from '../../pipeline/ingest.ts';
import type { IngestTally } from '../../pipeline/ingest-tally.ts';
import type { KeyAuthenticator } from '../auth.ts';
import type { ClientIpResolver } from '../client-ip.ts';
import { formatBytes } from '../http/body.ts';
import type { Limiter } from '../limiter.ts';
import { admit, refusedSource } from '../otlp-http.ts';
import { encodeExportResponse } from '../otlp-response.ts';
import { closeStream, Connections, type Connection } from './connections.ts';
import { LimitReporter, type GrpcLimits } from './limits.ts';
import { CallError, readMessage } from './message.ts';
import { ACCEPTED_ENCODINGS, CODE_NAMES, framed, messageEncoding, parseTimeout, statusTrailers, type GrpcStatus } from './wire.ts';

export type { GrpcLimits } from './limits.ts';

export interface GrpcDeps {
  ingest: Pick<IngestService, 'ingestOtlp'>;
  /** The process's in-flight byte budget: a message's declared length is taken before it is read. */
  budget: ByteBudget;
  auth: KeyAuthenticator;
  limiter: Limiter;
  clientIp: ClientIpResolver;
  metrics: SluiceMetrics;
  /** Counts each call per source for the console (ingest_counts). */
  tally: IngestTally;
  log: Logger;
  maxBodyBytes: number;
  limits: GrpcLimits;
}

const SIGNALS: Readonly<Record<string, Signal>> = {
  '/opentelemetry.proto.collector.trace.v1.TraceService/Export': 'traces',
  '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export': 'metrics',
  '/opentelemetry.proto.collector.logs.v1.LogsService/Export': 'logs',
};

/** HTTP/2 settings of every connection. */
const SETTINGS = {
  // The least RFC 9113 recommends; a client queues calls past it.
  maxConcurrentStreams: 100,
  // What an unread (not yet admitted) call can make us buffer: one window.
  initialWindowSize: 64 * 1024,
  // gRPC's suggested default for request metadata.
  maxHeaderListSize: 16 * 1024,
};

const OK: GrpcStatus = { code: GrpcCode.OK, message: '' };

/** The tally's reason for a call that broke the protocol or ended early (a CallError, not a SluiceError). */
const CALL_ERROR_REASONS: Readonly<Record<number, ErrorCode>> = {
  [GrpcCode.CANCELLED]: 'aborted',
  [GrpcCode.DEADLINE_EXCEEDED]: 'request_timeout',
  [GrpcCode.UNIMPLEMENTED]: 'unsupported_media_type',
  [GrpcCode.INTERNAL]: 'bad_request',
};

/** How a call was refused: its status, and for the tally the reason and the items when counted. */
interface Refusal {
  status: GrpcStatus;
  reason: ErrorCode;
  items?: number;
}

export class OtlpGrpcServer {
  private connections: Connections | undefined;
  private readonly reporter: LimitReporter;

  constructor(private readonly deps: GrpcDeps) {
    this.reporter = new LimitReporter(deps.metrics, deps.log, deps.limits);
  }

  async listen(host: string, port: number): Promise<number> {
    const server = createServer({ settings: SETTINGS });
    this.connections = new Connections(server, this.deps.limits, this.deps.metrics, (limit) => this.reporter.reached(limit), (stream, headers, connection) => {
      this.serve(stream, headers, connection).catch((err) => this.deps.log.error({ err }, 'gRPC call failed unexpectedly'));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // Out of descriptors, accept fails: counted and logged like a limit, not a crash.
    server.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EMFILE' || err.code === 'ENFILE') this.reporter.reached('open_files');
      else this.deps.log.error({ err }, 'the gRPC port failed to accept a connection');
    });
    return (server.address() as AddressInfo).port;
  }

  /**
   * Stops taking connections and calls at once (GOAWAY), lets the calls in flight finish for
   * `graceMs`, then cancels the rest; resolves when every connection is closed.
   */
  async close(graceMs: number): Promise<void> {
    const connections = this.connections;
    this.connections = undefined;
    await connections?.close(graceMs);
  }

  /** One call, top to bottom: check its form, admit it, read its message in time, ingest, answer. */
  private async serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, connection: Connection): Promise<void> {
    const { deps } = this;
    // A reset stream ends the call through 'close'.
    stream.on('error', () => {});
    if (headers[':method'] !== 'POST') return refuseHttp(stream, 405);
    // Not a gRPC client (a browser, curl): a 200 carrying a gRPC status would read as success to it.
    const contentType = first(headers['content-type']) ?? '';
    if (!contentType.startsWith('application/grpc')) return refuseHttp(stream, 415);
    const signal = SIGNALS[headers[':path'] ?? ''];
    if (!signal) return answer(stream, { code: GrpcCode.UNIMPLEMENTED, message: `unknown method ${headers[':path']}` });

    const call = new Call(stream, signal, deps);
    const timeoutMs = Math.min(deps.limits.messageTimeoutMs, parseTimeout(first(headers['grpc-timeout'])) ?? Infinity);
    const deadline = setTimeout(() => {
      const status = { code: GrpcCode.DEADLINE_EXCEEDED, message: `the request message did not arrive within ${Math.ceil(timeoutMs)} ms` };
      const expired = call.refuse({ status, reason: 'request_timeout' });
      // A client's own shorter deadline is its business, not a limit of ours.
      if (expired && timeoutMs === deps.limits.messageTimeoutMs) this.reporter.reached('message_timeout');
    }, timeoutMs);
    let reservation: Reservation | undefined;
    let held = 0;
    try {
      const encoding = messageEncoding(first(headers['grpc-encoding']));
      if (!encoding) throw new CallError({ code: GrpcCode.UNIMPLEMENTED, message: `grpc-encoding ${headers['grpc-encoding']} is not supported: ${ACCEPTED_ENCODINGS}` });
      if (!PROTOBUF.test(contentType)) throw new SluiceError('unsupported_media_type', 'OTLP/gRPC messages are protobuf: content-type must be application/grpc or application/grpc+proto');
      const sourceId = await admit(deps, { remoteAddress: connection.remoteAddress, headers: metadata(headers) });
      call.sourceId = sourceId;
      if (call.answered) return;
      const message = await readMessage(stream, (length) => {
        if (length > deps.maxBodyBytes) throw new SluiceError('payload_too_large', `the request message of ${length} bytes exceeds ${formatBytes(deps.maxBodyBytes)}`);
        if (connection.heldBytes + length > deps.limits.maxConnectionBytes) {
          this.reporter.reached('connection_bytes');
          throw new SluiceError('unavailable', 'the calls of this connection hold its share of the gateway\'s in-flight memory', { retryAfterSeconds: 1 });
        }
        // Held until the bus settled the rows; UNAVAILABLE when the budget is used up.
        reservation = deps.budget.reserve(length);
        held = length;
        connection.heldBytes += held;
      });
      clearTimeout(deadline);
      if (message.compressed && encoding === 'identity') throw new CallError({ code: GrpcCode.INTERNAL, message: 'a compressed message needs a grpc-encoding' });
      const outcome = await deps.ingest.ingestOtlp({ signal, transport: 'grpc', format: 'protobuf', encoding: message.compressed ? encoding : 'identity', body: message.body, sourceId, reservation: reservation! });
      call.accept(outcome);
    } catch (err) {
      call.sourceId = refusedSource(deps.auth, call.sourceId, err, metadata(headers));
      call.refuse(this.refusalOf(err));
    } finally {
      clearTimeout(deadline);
      reservation?.release();
      connection.heldBytes -= held;
    }
  }

  private refusalOf(err: unknown): Refusal {
    if (err instanceof CallError) return { status: err.status, reason: CALL_ERROR_REASONS[err.status.code] ?? 'bad_request' };
    const error = toSluiceError(err);
    if (error.code === 'internal') this.deps.log.error({ err: error.cause ?? error }, 'gRPC export failed unexpectedly');
    const status = { code: error.grpcCode, message: error.message, retryAfterSeconds: error.retryAfterSeconds };
    return { status, reason: error.code, items: error instanceof RefusedAfterDecoding ? error.items : undefined };
  }
}

/** application/grpc and application/grpc+proto, parameters allowed. */
const PROTOBUF = /^application\/grpc(\+proto)?(;|$)/;

/**
 * A call answered once, and counted once (sluice_requests_total and the tally): a client gone
 * before the answer counts as CANCELLED.
 */
class Call {
  answered = false;
  /** The source the tally counts the call under: its key's once admitted, '' until then. */
  sourceId = '';

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly signal: Signal,
    private readonly deps: Pick<GrpcDeps, 'metrics' | 'tally'>,
  ) {
    stream.once('close', () => {
      if (!this.answered) this.refuse({ status: { code: GrpcCode.CANCELLED, message: 'the client cancelled the call' }, reason: 'aborted' });
    });
  }

  /** OK with the export response (partial_success for items refused one by one). */
  accept(outcome: IngestOutcome): void {
    if (!this.settle(OK)) return;
    this.deps.tally.accepted(this.sourceId, this.signal, outcome.accepted, outcome.rejected);
    answer(this.stream, OK, encodeExportResponse(this.signal, 'protobuf', { rejected: outcome.rejected, message: outcome.rejectMessage }) as Uint8Array);
  }

  /** An error status alone; false when the call was answered (or cancelled) already. */
  refuse({ status, reason, items }: Refusal): boolean {
    if (!this.settle(status)) return false;
    this.deps.tally.refusedFor(this.sourceId, this.signal, reason, items);
    answer(this.stream, status);
    return true;
  }

  private settle(status: GrpcStatus): boolean {
    if (this.answered) return false;
    this.answered = true;
    this.deps.metrics.requests.inc({ protocol: 'grpc', signal: this.signal, status: CODE_NAMES[status.code] ?? String(status.code) });
    return true;
  }
}

/** A message and OK in trailers, or an error status alone (trailers-only). */
function answer(stream: ServerHttp2Stream, status: GrpcStatus, message?: Uint8Array): void {
  if (stream.destroyed || stream.closed || stream.headersSent) return;
  const headers = { ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': ACCEPTED_ENCODINGS };
  if (message !== undefined) {
    stream.respond(headers, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(statusTrailers(status)));
    stream.end(framed(message));
    return;
  }
  stream.respond({ ...headers, ...statusTrailers(status) }, { endStream: true });
  // The client may still be sending: RST_STREAM NO_ERROR after the answer stops it (RFC 9113 8.1).
  closeStream(stream, constants.NGHTTP2_NO_ERROR);
}

/** A plain HTTP refusal, for a request that is not a gRPC call. */
function refuseHttp(stream: ServerHttp2Stream, status: number): void {
  stream.respond({ ':status': status }, { endStream: true });
  closeStream(stream, constants.NGHTTP2_NO_ERROR);
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The metadata admission reads, as the HTTP front end has it. */
function metadata(headers: IncomingHttpHeaders): Record<string, string | undefined> {
  return {
    'x-api-key': first(headers['x-api-key']),
    authorization: first(headers.authorization),
    'x-forwarded-for': first(headers['x-forwarded-for']),
  };
}
