/**
 * The baseline: the OTLP/HTTP receiver you would write in an afternoon. node:http, zlib gunzip,
 * protobufjs decode + toObject, one JSON row per span in the otel_traces shape, one chDB
 * insert per request, 200 only after the insert. Everything on the event loop, no batching.
 *
 * usage: tsx bench/naive-server.ts --port 4318 --data-dir /tmp/naive
 *   GET /api/v1/health → 200; GET /count → spans stored; POST /v1/traces → ingest.
 */
import { createServer, type IncomingMessage } from 'node:http';
import { parseArgs, promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { Session } from 'chdb';
import { loadTraceTypes } from './payload.ts';

const { values: args } = parseArgs({ options: { port: { type: 'string', default: '4318' }, 'data-dir': { type: 'string' } } });
if (!args['data-dir']) throw new Error('--data-dir is required');

const TABLE = 'otel_traces';
const session = new Session(args['data-dir']);
session.query(`CREATE TABLE IF NOT EXISTS ${TABLE} (
  Timestamp DateTime64(9), TraceId String, SpanId String, ParentSpanId String, TraceState String,
  SpanName LowCardinality(String), SpanKind LowCardinality(String), ServiceName LowCardinality(String),
  ResourceAttributes Map(LowCardinality(String), String), ScopeName String, ScopeVersion String,
  SpanAttributes Map(LowCardinality(String), String), Duration UInt64,
  StatusCode LowCardinality(String), StatusMessage String,
  Events Nested(Timestamp DateTime64(9), Name LowCardinality(String), Attributes Map(LowCardinality(String), String)),
  Links Nested(TraceId String, SpanId String, TraceState String, Attributes Map(LowCardinality(String), String))
) ENGINE = MergeTree ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))`);

const types = loadTraceTypes();
const emptyResponse = Buffer.from(types.response.encode(types.response.create({})).finish());
const gunzipAsync = promisify(gunzip);

// The Collector's ClickHouse exporter spells kinds and status codes like this.
const KINDS = ['Unspecified', 'Internal', 'Server', 'Client', 'Producer', 'Consumer'];
const STATUS = ['Unset', 'Ok', 'Error'];

/** toObject output: untyped, as in the afternoon version. */
type Obj = Record<string, any>;

const hex = (b: Uint8Array | undefined) => (b ? Buffer.from(b).toString('hex') : '');
/** Unix nanoseconds as 'seconds.nanoseconds', which DateTime64(9) parses exactly. */
const time = (ns: string) => `${ns.slice(0, -9) || '0'}.${ns.slice(-9).padStart(9, '0')}`;

function value(v: Obj | undefined): string {
  if (!v) return '';
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return String(v.intValue);
  if (v.doubleValue !== undefined) return String(v.doubleValue);
  if (v.boolValue !== undefined) return String(v.boolValue);
  return JSON.stringify(v);
}

function attributes(list: Obj[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { key, value: v } of list ?? []) out[key] = value(v);
  return out;
}

function rows(request: Obj): string {
  const lines: string[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = attributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const span of ss.spans ?? []) {
        const events = span.events ?? [];
        const links = span.links ?? [];
        lines.push(
          JSON.stringify({
            Timestamp: time(span.startTimeUnixNano),
            TraceId: hex(span.traceId),
            SpanId: hex(span.spanId),
            ParentSpanId: hex(span.parentSpanId),
            TraceState: span.traceState ?? '',
            SpanName: span.name ?? '',
            SpanKind: KINDS[span.kind ?? 0],
            ServiceName: resource['service.name'] ?? '',
            ResourceAttributes: resource,
            ScopeName: ss.scope?.name ?? '',
            ScopeVersion: ss.scope?.version ?? '',
            SpanAttributes: attributes(span.attributes),
            Duration: (BigInt(span.endTimeUnixNano) - BigInt(span.startTimeUnixNano)).toString(),
            StatusCode: STATUS[span.status?.code ?? 0],
            StatusMessage: span.status?.message ?? '',
            'Events.Timestamp': events.map((e: Obj) => time(e.timeUnixNano)),
            'Events.Name': events.map((e: Obj) => e.name ?? ''),
            'Events.Attributes': events.map((e: Obj) => attributes(e.attributes)),
            'Links.TraceId': links.map((l: Obj) => hex(l.traceId)),
            'Links.SpanId': links.map((l: Obj) => hex(l.spanId)),
            'Links.TraceState': links.map((l: Obj) => l.traceState ?? ''),
            'Links.Attributes': links.map((l: Obj) => attributes(l.attributes)),
          }),
        );
      }
    }
  }
  return lines.join('\n');
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function ingest(req: IncomingMessage): Promise<void> {
  let body = await readBody(req);
  if (req.headers['content-encoding'] === 'gzip') body = await gunzipAsync(body);
  const request = types.request.toObject(types.request.decode(body), { longs: String, defaults: false });
  const values = rows(request);
  if (values) await session.insert({ table: TABLE, values: Buffer.from(values), format: 'JSONEachRow' });
}

const server = createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/v1/traces') {
    ingest(req).then(
      () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(emptyResponse),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(err.message),
    );
  } else if (req.method === 'GET' && req.url === '/api/v1/health') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
  } else if (req.method === 'GET' && req.url === '/count') {
    session.queryAsync(`SELECT count() FROM ${TABLE}`, { format: 'TSV' }).then(
      (result) => res.writeHead(200, { 'content-type': 'text/plain' }).end(result.text().trim()),
      (err: Error) => res.writeHead(500).end(err.message),
    );
  } else {
    res.writeHead(404).end();
  }
});

server.listen(Number(args.port), '127.0.0.1');
const stop = () => server.close(() => (session.close(), process.exit(0)));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
