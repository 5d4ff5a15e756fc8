import type { Logger } from '../../core/log.ts';

/**
 * The HTTP adapter interface. Request handling (routing, auth, limits, responses) is written
 * against it once; uWebSockets.js and node:http each implement it (gateway/http/uws.ts,
 * gateway/http/node.ts).
 */
export interface HttpRequest {
  /** Upper-case method. */
  readonly method: string;
  readonly path: string;
  /** Raw query string, without '?'. */
  readonly query: string;
  /** Lower-case header names; repeated headers joined with ', '. */
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly remoteAddress: string;
  /** True once the client closed the connection before its answer: nothing will reach it. */
  readonly aborted: boolean;
  /**
   * The body, collected while it streams in. Nothing is allocated for it before this call
   * (call it after admission); its bytes are taken from `allowance` as they arrive (never the
   * announced length up front), and a refusal there refuses the body. Rejects with payload_too_large at
   * the first byte past the cap (or at once when Content-Length announces more), without
   * buffering the rest; with request_timeout when it does not arrive in time (the server's
   * BodyDeadline, counted from this call); with `aborted` once the client went away. The
   * returned Buffer owns its ArrayBuffer, so it can be transferred to a worker.
   */
  body(allowance?: BodyAllowance): Promise<Buffer>;
}

/** Memory a request body may take: a byte-budget reservation. resize() throws when it cannot grow. */
export interface BodyAllowance {
  resize(bytes: number): void;
}

/**
 * How long a body may take once it is read: `timeoutMs`, plus a second per `minBytesPerSecond`
 * received (a long body must keep up that rate on average).
 */
export interface BodyDeadline {
  timeoutMs: number;
  minBytesPerSecond: number;
}

export interface HttpResponse {
  status: number;
  headers?: Record<string, string>;
  /** A list of buffers is sent one after the other, without being joined first (a large answer made of parts: query/native.ts). */
  body?: Uint8Array | string | readonly Uint8Array[];
}

export type HttpHandler = (request: HttpRequest) => Promise<HttpResponse>;

/** A body given as a list of parts. */
export function isPartList(body: HttpResponse['body']): body is readonly Uint8Array[] {
  return Array.isArray(body);
}

export interface HttpServer {
  /** Which engine serves: uWebSockets.js (native) or node:http. */
  readonly engine: 'uws' | 'node';
  /** Starts listening; resolves to the bound port (useful with port 0). A port in use is an error, whoever holds it. */
  listen(host: string, port: number): Promise<number>;
  /**
   * Stops accepting connections at once; requests in flight may finish within `graceMs` (their
   * connections closed after the answer), then every connection left is closed. Resolves once
   * none remains.
   */
  close(graceMs: number): Promise<void>;
}

export interface HttpServerOptions {
  maxBodyBytes: number;
  bodyDeadline: BodyDeadline;
  /** Connections the port holds at once (node:http; uWebSockets.js has no such limit). */
  maxConnections: number;
  /** Aborted requests are logged at debug. */
  log?: Logger;
}

/** Standard reason phrases for the status line uWebSockets.js needs. */
export const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 204: 'No Content', 304: 'Not Modified', 400: 'Bad Request', 401: 'Unauthorized',
  403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 408: 'Request Timeout', 409: 'Conflict', 413: 'Payload Too Large',
  415: 'Unsupported Media Type', 422: 'Unprocessable Entity', 429: 'Too Many Requests', 500: 'Internal Server Error',
  503: 'Service Unavailable',
};
