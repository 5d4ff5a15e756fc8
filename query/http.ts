/**
 * The query endpoint's HTTP handler: the part of ClickHouse's HTTP interface that Grafana's
 * ClickHouse data source (clickhouse-go, protocol http) and @clickhouse/client use, read-only.
 *
 *   GET /ping, GET / (no query)          → 200 "Ok.\n", no credentials needed
 *   GET|POST /?query=…  (POST: the body follows the `query` parameter, as in ClickHouse)
 *
 * A request reads top to bottom: throttle, authenticate, read the parameters and the body,
 * check the statement with the engine's parser, run it with readonly = 1 and the limits,
 * answer in the format asked (Native rewritten for the client's protocol revision),
 * compressed when asked; any error is mapped once, in errors.ts.
 */
import { randomUUID } from 'node:crypto';
import { Readable, type Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants, createBrotliCompress, createDeflate, createGzip } from 'node:zlib';
import type { Logger } from '../core/log.ts';
import type { ClientIpResolver } from '../gateway/client-ip.ts';
import type { HttpHandler, HttpRequest, HttpResponse } from '../gateway/http/adapter.ts';
import { decompress, parseContentEncoding } from '../pipeline/decompress.ts';
import type { StatementRunner } from '../storage/chdb-reader.ts';
import { authenticationFailed, credentialsOf, type FailedAuthThrottle, type PasswordCheck } from './auth.ts';
import { ClickHouseException, exceptionResponse } from './errors.ts';
import type { ConcurrencyGate } from '../core/concurrency-gate.ts';
import { nativeParts } from './native.ts';
import { formatName, parseQueryParams, type QueryLimits, type QueryParams } from './request.ts';
import type { QueryScope } from './scope.ts';
import { checkStatement } from './statement.ts';

/** Cap on a request body (the statement; ClickHouse parses at most max_query_size, 256 KiB). */
export const MAX_QUERY_BODY_BYTES = 1024 * 1024;

export interface QueryEndpointDeps {
  runner: StatementRunner;
  password: PasswordCheck;
  throttle: FailedAuthThrottle;
  clientIp: ClientIpResolver;
  gate: ConcurrencyGate;
  /** What a client sees; its database is the current database of a request that names none (otel: unqualified tables are the telemetry's). */
  scope: QueryScope;
  limits: QueryLimits;
  /** For the X-ClickHouse-Timezone and -Server-Display-Name headers. */
  server: { timezone: string; displayName: string };
  /** One call per answer: its status, or `aborted`. */
  onAnswer(status: string): void;
  log: Logger;
}

const OK = 'Ok.\n';

export function queryHttpHandler(deps: QueryEndpointDeps): HttpHandler {
  return async (request) => {
    let response: HttpResponse;
    try {
      response = await answer(deps, request);
    } catch (err) {
      response = exceptionResponse(err, deps.log);
    }
    deps.onAnswer(request.aborted ? 'aborted' : String(response.status));
    return response;
  };
}

async function answer(deps: QueryEndpointDeps, request: HttpRequest): Promise<HttpResponse> {
  const search = new URLSearchParams(request.query);
  const isProbe = request.path === '/ping' || (request.path === '/' && request.method !== 'POST' && !search.has('query'));
  if (isProbe && (request.method === 'GET' || request.method === 'HEAD')) {
    return { status: 200, headers: { 'content-type': 'text/html; charset=UTF-8' }, body: request.method === 'HEAD' ? undefined : OK };
  }
  if (request.path !== '/') return { status: 404, headers: { 'content-type': 'text/plain; charset=UTF-8' }, body: `There is no handle ${request.path.slice(0, 200)}\n\nUse / or /ping for health checks.\n` };
  if (request.method !== 'GET' && request.method !== 'POST') throw ClickHouseException.of('NOT_IMPLEMENTED', `The ${request.method} method is not supported here`);

  const ip = deps.clientIp(request.remoteAddress, request.headers['x-forwarded-for']);
  deps.throttle.admit(ip);
  const credentials = credentialsOf(request.headers, search);
  if (!deps.password.matches(credentials)) {
    await deps.throttle.failed(ip);
    deps.log.info({ ip, user: credentials.user.slice(0, 64) }, 'query endpoint: authentication failed');
    throw authenticationFailed(credentials.user);
  }

  const params = parseQueryParams(search, deps.limits, deps.scope);
  const sql = [params.query, request.method === 'POST' ? await statementBody(request) : ''].filter(Boolean).join('\n');
  if (!sql.trim()) throw ClickHouseException.of('SYNTAX_ERROR', 'Empty query');
  const database = params.database ?? request.headers['x-clickhouse-database'] ?? deps.scope.database;
  const formatHeader = request.headers['x-clickhouse-format'];
  const defaultFormat = params.defaultFormat ?? (formatHeader === undefined ? 'TabSeparated' : formatName(formatHeader));
  return deps.gate.run(async () => {
    if (request.aborted) return { status: 499 }; // left while waiting its turn
    const statement = await checkStatement(deps.runner, deps.scope, database, sql, params.params);
    const format = statement.format ?? defaultFormat;
    const output = await deps.runner.run(database, `${statement.sql}\nSETTINGS ${params.settings}`, { format, params: params.params });
    // The answer goes out as parts, never joined: a copy of a large result on the event loop stalls every port.
    const body = /^native$/i.test(format) && params.protocolVersion > 0 ? nativeParts(output.bytes, params.protocolVersion) : [output.bytes];
    const headers: Record<string, string> = {
      'content-type': contentTypeOf(format),
      'x-clickhouse-format': format,
      'x-clickhouse-query-id': params.queryId ?? randomUUID(),
      'x-clickhouse-timezone': deps.server.timezone,
      'x-clickhouse-server-display-name': deps.server.displayName,
      'x-clickhouse-summary': JSON.stringify({
        read_rows: String(output.rowsRead),
        read_bytes: String(output.bytesRead),
        written_rows: '0',
        written_bytes: '0',
        result_bytes: String(body.reduce((sum, part) => sum + part.byteLength, 0)),
        elapsed_ns: String(Math.round(output.elapsedSeconds * 1e9)),
      }),
    };
    return { status: 200, headers, body: await compressed(body, params, request.headers['accept-encoding'], headers) };
  });
}

/** The request body as the statement's text (gzip or zstd bodies decompressed, within the same cap). */
async function statementBody(request: HttpRequest): Promise<string> {
  if (request.headers['content-type']?.toLowerCase().startsWith('multipart/')) {
    throw ClickHouseException.of('NOT_IMPLEMENTED', 'multipart bodies (external tables, query parameters in the body) are not supported here');
  }
  const encoding = parseContentEncoding(request.headers['content-encoding']);
  if (!encoding) throw ClickHouseException.of('NOT_IMPLEMENTED', 'Content-Encoding must be gzip, zstd or none here');
  const body = await decompress(encoding, await request.body(), MAX_QUERY_BODY_BYTES);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    throw ClickHouseException.of('BAD_ARGUMENTS', 'the query is not valid UTF-8');
  }
}

/** A Map, not an object: an Accept-Encoding of `constructor` must not find Object's. */
const COMPRESSORS = new Map<string, () => Transform>([
  // ClickHouse's default http_zlib_compression_level is 3; brotli's default quality (11) is far too slow here.
  ['gzip', () => createGzip({ level: 3 })],
  ['deflate', () => createDeflate({ level: 3 })],
  ['br', () => createBrotliCompress({ params: { [constants.BROTLI_PARAM_QUALITY]: 3 } })],
]);

/**
 * With enable_http_compression=1, the body in the first encoding of Accept-Encoding we have (as
 * ClickHouse, never without the parameter). The parts go through a zlib stream (its work on
 * libuv's pool, a chunk at a time) and come out as its chunks, never joined into one buffer.
 */
async function compressed(body: Uint8Array[], params: QueryParams, acceptEncoding: string | undefined, headers: Record<string, string>): Promise<Uint8Array[]> {
  if (!params.compress || !acceptEncoding) return body;
  const encoding = acceptEncoding.split(',')
    .map((entry) => entry.trim().split(';'))
    .filter(([, q]) => q?.trim() !== 'q=0')
    .map(([name]) => name!.toLowerCase())
    .find((name) => COMPRESSORS.has(name));
  if (!encoding) return body;
  headers['content-encoding'] = encoding;
  const output: Buffer[] = [];
  const collect = new Writable({ write: (chunk: Buffer, _encoding, done) => (output.push(chunk), done()) });
  await pipeline(Readable.from(body, { objectMode: false }), COMPRESSORS.get(encoding)!(), collect);
  return output;
}

/** The Content-Type ClickHouse gives a format's output, near enough: JSON, tab- or comma-separated text, binary. */
function contentTypeOf(format: string): string {
  const name = format.toLowerCase();
  if (name.startsWith('json')) return 'application/json; charset=UTF-8';
  if (name.startsWith('tabseparated') || name.startsWith('tsv')) return 'text/tab-separated-values; charset=UTF-8';
  if (name.startsWith('csv')) return 'text/csv; charset=UTF-8';
  if (/^(native|rowbinary|parquet|arrow|orc|avro|msgpack|rawblob)/.test(name)) return 'application/octet-stream';
  return 'text/plain; charset=UTF-8';
}
