/**
 * OTLP/HTTP: POST /v1/traces, /v1/metrics, /v1/logs with application/x-protobuf or
 * application/json bodies, identity/gzip/zstd encoded. Responses follow the OTLP/HTTP spec:
 * the Export*ServiceResponse (with partial_success) on success, a google.rpc.Status on error,
 * both in the request's content type.
 */
import type { ByteBudget, Reservation } from '../core/byte-budget.ts';
import { SluiceError, toSluiceError } from '../core/errors.ts';
import type { Signal, SluiceMetrics } from '../core/metrics.ts';
import type { Logger } from '../core/log.ts';
import type { IngestService } from '../pipeline/ingest.ts';
import type { IngestTally } from '../pipeline/ingest-tally.ts';
import { parseContentEncoding, type ContentEncoding } from '../pipeline/decompress.ts';
import { presentedApiKey, requireSource, type KeyAuthenticator } from './auth.ts';
import type { ClientIpResolver } from './client-ip.ts';
import type { HttpRequest, HttpResponse } from './http/adapter.ts';
import type { Limiter } from './limiter.ts';
import { encodeExportResponse, encodeStatus } from './otlp-response.ts';

export interface IngestGuards {
  auth: KeyAuthenticator;
  limiter: Limiter;
  clientIp: ClientIpResolver;
  /** The process's in-flight byte budget, taken after admission and before the body is read. */
  budget: ByteBudget;
}

export interface OtlpHttpDeps extends IngestGuards {
  ingest: IngestService;
  /** Counts each request per source for the console (ingest_counts). */
  tally: IngestTally;
  metrics: SluiceMetrics;
  log: Logger;
}

type Format = 'protobuf' | 'json';

/** A Map, not an object: a Content-Type of `constructor` must not find Object's. */
const CONTENT_TYPES = new Map<string, Format>([
  ['application/x-protobuf', 'protobuf'],
  ['application/protobuf', 'protobuf'],
  ['application/json', 'json'],
]);

const MEDIA_TYPE: Record<Format, string> = { protobuf: 'application/x-protobuf', json: 'application/json' };

/** The OTLP format a Content-Type names (parameters and case aside), or undefined. */
export function formatOf(contentType: string | undefined): Format | undefined {
  const mediaType = contentType?.split(';')[0]?.trim().toLowerCase();
  return mediaType ? CONTENT_TYPES.get(mediaType) : undefined;
}

/** Takes a token from the client IP's bucket; refuses with 429 when it is empty. */
export async function rateLimit(guards: Pick<IngestGuards, 'limiter' | 'clientIp'>, request: Pick<HttpRequest, 'remoteAddress' | 'headers'>): Promise<void> {
  const ip = guards.clientIp(request.remoteAddress, request.headers['x-forwarded-for']);
  const decision = await guards.limiter.take(ip);
  if (!decision.allowed) {
    throw new SluiceError('rate_limited', 'too many requests from this IP', { retryAfterSeconds: decision.retryAfterSeconds });
  }
}

/**
 * The source a refused request counts under in the tally: the one admission found, else its
 * key's when the key is valid (a 415 sent with a good key shows in its source's overview). A
 * refusal of admission itself counts under no source: a rate-limited flood is not spent a hash on.
 */
export function refusedSource(auth: KeyAuthenticator, admitted: string, err: unknown, headers: Readonly<Record<string, string | undefined>>): string {
  if (admitted || !(err instanceof SluiceError) || err.code === 'rate_limited' || err.code === 'unauthorized') return admitted;
  const key = presentedApiKey(headers['x-api-key'], headers.authorization);
  return (key && auth.authenticate(key)) || '';
}

/** Rate limit, then authenticate: refuses with 429 or 401 (gRPC: from the call's metadata). Returns the source id. */
export async function admit(guards: IngestGuards, request: Pick<HttpRequest, 'remoteAddress' | 'headers'>): Promise<string> {
  await rateLimit(guards, request);
  return requireSource(guards.auth, request.headers['x-api-key'], request.headers.authorization);
}

/** What an admitted HTTP ingest request hands the pipeline. */
export interface AdmittedBody {
  encoding: ContentEncoding;
  body: Uint8Array;
  sourceId: string;
  reservation: Reservation;
}

/**
 * The steps every HTTP ingest request takes before the pipeline: its Content-Encoding, admission
 * (`admitted.sourceId` is set as soon as the source is known, for the tally), the byte budget and
 * the body; then `ingest`, with the budget held until it settles.
 */
export async function withAdmittedBody<T>(
  deps: IngestGuards,
  request: HttpRequest,
  admitted: { sourceId: string },
  ingest: (taken: AdmittedBody) => Promise<T>,
): Promise<T> {
  const encoding = parseContentEncoding(request.headers['content-encoding']);
  if (!encoding) throw new SluiceError('unsupported_media_type', 'Content-Encoding must be gzip, zstd or identity');
  const sourceId = (admitted.sourceId = await admit(deps, request));
  // Held until the bus settled the rows; 503 when the budget is used up.
  const reservation = deps.budget.reserve(0);
  try {
    const body = await request.body(reservation);
    return await ingest({ encoding, body, sourceId, reservation });
  } finally {
    reservation.release();
  }
}

export function otlpHttpHandler(signal: Signal, deps: OtlpHttpDeps): (request: HttpRequest) => Promise<HttpResponse> {
  return async (request) => {
    const format = formatOf(request.headers['content-type']);
    let response: HttpResponse;
    const admitted = { sourceId: '' };
    try {
      if (!format) throw new SluiceError('unsupported_media_type', 'Content-Type must be application/x-protobuf or application/json');
      const outcome = await withAdmittedBody(deps, request, admitted, (taken) => deps.ingest.ingestOtlp({ signal, transport: 'http', format, ...taken }));
      response = {
        status: 200,
        headers: { 'content-type': MEDIA_TYPE[format] },
        body: encodeExportResponse(signal, format, { rejected: outcome.rejected, message: outcome.rejectMessage }),
      };
      deps.tally.accepted(admitted.sourceId, signal, outcome.accepted, outcome.rejected);
    } catch (err) {
      deps.tally.refused(refusedSource(deps.auth, admitted.sourceId, err, request.headers), signal, err);
      response = errorResponse(err, format ?? 'json', deps.log);
    }
    deps.metrics.requests.inc({ protocol: 'http', signal, status: statusLabel(request, response) });
    return response;
  };
}

/** The `status` label of sluice_requests_total: the HTTP status, or `aborted` when the client left before its answer. */
export function statusLabel(request: HttpRequest, response: HttpResponse): string {
  return request.aborted ? 'aborted' : String(response.status);
}

/** The one mapping of an error to an OTLP/HTTP response. */
export function errorResponse(err: unknown, format: Format, log: Logger): HttpResponse {
  const error = toSluiceError(err);
  if (error.code === 'internal') log.error({ err: error.cause ?? error }, 'request failed unexpectedly');
  const headers: Record<string, string> = { 'content-type': MEDIA_TYPE[format] };
  if (error.retryAfterSeconds !== undefined) headers['retry-after'] = String(error.retryAfterSeconds);
  return { status: error.httpStatus, headers, body: encodeStatus(format, error.grpcCode, error.message, error.retryAfterSeconds) };
}
