/**
 * Every error Sluice reports to a client is a SluiceError with a code from ERROR_CODES, which
 * says its HTTP status and gRPC code; an ApiError is one with extra fields for a JSON API's body.
 * Each protocol writes them in one place: gateway/otlp-http.ts (OTLP over HTTP),
 * gateway/agent-http.ts (the agent API), gateway/grpc/server.ts (gRPC) and
 * gateway/http/json-api.ts (the relay's and the console's JSON APIs).
 */

/** gRPC status codes we use (google.rpc.Code). */
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  ABORTED: 10,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

interface ErrorSpec {
  http: number;
  grpc: number;
  /** A retryable error is transient: the client should send the same data again later. */
  retryable: boolean;
  /** One line for the error table of docs/reference/http-api.md (its links relative to that page). */
  doc: string;
}

/** The registry of every error code. docs/reference/http-api.md documents each (a test checks it). */
export const ERROR_CODES = {
  bad_request: { http: 400, grpc: GrpcCode.INVALID_ARGUMENT, retryable: false, doc: 'The payload cannot be decoded (truncated or garbage protobuf, malformed JSON, invalid UTF-8) or breaks a rule of [Limits and value rules](limits.md) (e.g. rows of one table spanning more than 100 days); sending it again cannot succeed.' },
  unauthorized: { http: 401, grpc: GrpcCode.UNAUTHENTICATED, retryable: false, doc: 'The API key is missing, unknown or revoked (the JSON APIs: the session or token).' },
  forbidden: { http: 403, grpc: GrpcCode.PERMISSION_DENIED, retryable: false, doc: 'JSON APIs: the caller is known but its role may not do this (a member writing, an origin a site does not allow).' },
  not_found: { http: 404, grpc: GrpcCode.NOT_FOUND, retryable: false, doc: 'No such path (the JSON APIs: no such object, or one of another tenant).' },
  method_not_allowed: { http: 405, grpc: GrpcCode.UNIMPLEMENTED, retryable: false, doc: 'The path exists but not for this method.' },
  conflict: { http: 409, grpc: GrpcCode.ABORTED, retryable: false, doc: 'JSON APIs: the object\'s state does not allow it (a name or email taken, a cap reached, an Idempotency-Key whose first request still runs).' },
  request_timeout: { http: 408, grpc: GrpcCode.DEADLINE_EXCEEDED, retryable: true, doc: 'The body did not arrive in time (SLUICE_BODY_TIMEOUT_MS, plus a second per SLUICE_BODY_MIN_BYTES_PER_SECOND bytes received); nothing of it was stored, and the connection is closed.' },
  payload_too_large: { http: 413, grpc: GrpcCode.RESOURCE_EXHAUSTED, retryable: false, doc: 'The body is over 10 MiB, compressed or decompressed.' },
  unsupported_media_type: { http: 415, grpc: GrpcCode.INVALID_ARGUMENT, retryable: false, doc: 'Content-Type or Content-Encoding is not supported.' },
  unprocessable: { http: 422, grpc: GrpcCode.INVALID_ARGUMENT, retryable: false, doc: 'JSON APIs: well-formed but not acceptable as it is (an Idempotency-Key reused with another body, a template whose rendered message is over its size limit).' },
  rate_limited: { http: 429, grpc: GrpcCode.UNAVAILABLE, retryable: true, doc: 'The source IP used up its token bucket; retry after Retry-After seconds.' },
  unavailable: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryable: true, doc: 'Storage or the bus is down or cannot keep up, or the gateway\'s in-flight memory budget is used up; nothing of the request was stored; retry after Retry-After seconds.' },
  aborted: { http: 499, grpc: GrpcCode.CANCELLED, retryable: true, doc: 'The client closed the connection before its answer (never sent: counted as `status="aborted"` in `sluice_requests_total`, logged at debug).' },
  internal: { http: 500, grpc: GrpcCode.INTERNAL, retryable: false, doc: 'A bug: the request failed in a way Sluice did not expect (logged with its cause); not known to succeed if sent again.' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface SluiceErrorOptions {
  cause?: unknown;
  /** For retryable errors: how long the client should wait, in seconds. */
  retryAfterSeconds?: number;
}

export class SluiceError extends Error {
  readonly code: ErrorCode;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options: SluiceErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = 'SluiceError';
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  get httpStatus(): HttpStatus { return ERROR_CODES[this.code].http; }
  get grpcCode(): number { return ERROR_CODES[this.code].grpc; }
  get retryable(): boolean { return ERROR_CODES[this.code].retryable; }
}

/** The HTTP statuses of the registry: an error answers one of these, never another. */
export type HttpStatus = (typeof ERROR_CODES)[ErrorCode]['http'];

const CODE_BY_STATUS = new Map(Object.entries(ERROR_CODES).map(([code, spec]) => [spec.http as number, code as ErrorCode]));

/**
 * A SluiceError a JSON API answers as `{ message, statusCode, ...details }` (the relay spec's
 * shape); `details.retryAfterSeconds` becomes the Retry-After header. Made from its status, which
 * names its code in the registry.
 */
export class ApiError extends SluiceError {
  constructor(
    readonly statusCode: HttpStatus,
    message: string,
    /** Extra fields of the response body. */
    readonly details: Record<string, unknown> = {},
  ) {
    const retryAfterSeconds = typeof details.retryAfterSeconds === 'number' ? details.retryAfterSeconds : undefined;
    super(CODE_BY_STATUS.get(statusCode)!, message, { retryAfterSeconds });
    this.name = 'ApiError';
  }
}

/** Anything thrown becomes a SluiceError; unknown throwables are internal errors. */
export function toSluiceError(err: unknown): SluiceError {
  if (err instanceof SluiceError) return err;
  return new SluiceError('internal', 'internal error', { cause: err });
}

/** Shorthand for the most common refusal. */
export function badRequest(message: string, cause?: unknown): SluiceError {
  return new SluiceError('bad_request', message, { cause });
}
