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
  /**
   * The body, collected while it streams in. Nothing is allocated for it before this call
   * (call it after admission); its bytes are taken from `allowance` first — the Content-Length,
   * or chunk by chunk — and a refusal there refuses the body. Rejects with payload_too_large at
   * the first byte past the cap (or at once when Content-Length announces more), without
   * buffering the rest. The returned Buffer owns its ArrayBuffer, so it can be transferred to a worker.
   */
  body(allowance?: BodyAllowance): Promise<Buffer>;
}

/** Memory a request body may take: a byte-budget reservation. resize() throws when it cannot grow. */
export interface BodyAllowance {
  resize(bytes: number): void;
}

export interface HttpResponse {
  status: number;
  headers?: Record<string, string>;
  body?: Uint8Array | string;
}

export type HttpHandler = (request: HttpRequest) => Promise<HttpResponse>;

export interface HttpServer {
  /** Which engine serves: uWebSockets.js (native) or node:http. */
  readonly engine: 'uws' | 'node';
  /** Starts listening; resolves to the bound port (useful with port 0). */
  listen(host: string, port: number): Promise<number>;
  close(): Promise<void>;
}

export interface HttpServerOptions {
  maxBodyBytes: number;
}

/** Standard reason phrases for the status line uWebSockets.js needs. */
export const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 204: 'No Content', 304: 'Not Modified', 400: 'Bad Request', 401: 'Unauthorized',
  403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 409: 'Conflict', 413: 'Payload Too Large',
  415: 'Unsupported Media Type', 422: 'Unprocessable Entity', 429: 'Too Many Requests', 500: 'Internal Server Error',
  503: 'Service Unavailable',
};
