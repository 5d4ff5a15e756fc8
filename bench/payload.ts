/**
 * Payload generator: realistic OTLP trace export requests, encoded as protobuf and gzipped the
 * way an OpenTelemetry SDK exporter sends them. Deterministic (seeded), so every run sends
 * the same bytes.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import protobuf from 'protobufjs';

/** Root of our OTLP .proto files (`proto/opentelemetry/proto/...`). */
export const PROTO_DIR = fileURLToPath(new URL('../proto', import.meta.url));

export interface TraceTypes {
  request: protobuf.Type;
  response: protobuf.Type;
}

/** Loads ExportTraceService{Request,Response} from our proto files, imports resolved under PROTO_DIR. */
export function loadTraceTypes(protoDir = PROTO_DIR): TraceTypes {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(protoDir, target);
  root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', { keepCase: false });
  return {
    request: root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest'),
    response: root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse'),
  };
}

/** mulberry32: a small seeded PRNG, so payloads are reproducible. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Rand = ReturnType<typeof rng>;
const pick = <T>(rand: Rand, items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
const int = (rand: Rand, min: number, max: number) => min + Math.floor(rand() * (max - min + 1));
const bytes = (rand: Rand, n: number) => Buffer.from(Array.from({ length: n }, () => int(rand, 0, 255)));
const hex = (rand: Rand, n: number) => bytes(rand, n).toString('hex');

const SERVICES = ['checkout', 'cart', 'payments', 'catalog', 'search', 'accounts', 'shipping', 'frontend'];
const ROUTES = ['/api/v1/orders/:id', '/api/v1/cart', '/api/v1/products', '/api/v1/search', '/api/v1/users/:id', '/healthz'];
const METHODS = ['GET', 'GET', 'GET', 'POST', 'PUT', 'DELETE'];
const AGENTS = [
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148',
  'okhttp/4.12.0',
  'python-requests/2.31.0',
];

type AnyValue = { stringValue: string } | { intValue: number } | { boolValue: boolean } | { doubleValue: number };
const kv = (key: string, value: AnyValue) => ({ key, value });
const str = (key: string, v: string) => kv(key, { stringValue: v });

/** Who made the request: shared by the spans of one trace, as in real traffic. */
function caller(rand: Rand) {
  return {
    agent: pick(rand, AGENTS),
    client: `10.${int(rand, 0, 255)}.${int(rand, 0, 255)}.${int(rand, 1, 254)}`,
    user: `user-${int(rand, 1, 100_000)}`,
    session: hex(rand, 8),
  };
}

/** Twenty attributes of the kinds instrumentations emit: 10 strings, 5 ints, 2 bools, 3 doubles. */
function spanAttributes(rand: Rand, who: ReturnType<typeof caller>, route: string, status: number) {
  const method = pick(rand, METHODS);
  const path = route.replace(':id', String(int(rand, 1, 999_999)));
  return [
    str('http.request.method', method),
    str('url.full', `https://shop.example.com${path}?page=${int(rand, 1, 50)}`),
    str('url.path', path),
    str('http.route', route),
    str('server.address', 'shop.example.com'),
    str('user_agent.original', who.agent),
    str('network.protocol.version', pick(rand, ['1.1', '2'])),
    str('client.address', who.client),
    str('enduser.id', who.user),
    str('session.id', who.session),
    kv('server.port', { intValue: 443 }),
    kv('http.response.status_code', { intValue: status }),
    kv('http.request.body.size', { intValue: method === 'GET' ? 0 : int(rand, 50, 20_000) }),
    kv('http.response.body.size', { intValue: int(rand, 100, 200_000) }),
    kv('thread.id', { intValue: int(rand, 1, 64) }),
    kv('cache.hit', { boolValue: rand() < 0.3 }),
    kv('feature.new_checkout', { boolValue: rand() < 0.5 }),
    kv('db.latency_ms', { doubleValue: Math.round(rand() * 250_000) / 1000 }),
    kv('cpu.utilization', { doubleValue: rand() }),
    kv('sample.rate', { doubleValue: pick(rand, [1, 0.5, 0.25, 0.1]) }),
  ];
}

/** One export request: one service, one instrumentation scope, traces of 5 spans each. */
export function traceRequest(rand: Rand, spansPerRequest: number, nowMs: number) {
  const service = pick(rand, SERVICES);
  const spans = [];
  let traceId = Buffer.alloc(0);
  let rootId = Buffer.alloc(0);
  let rootStart = 0n;
  let who = caller(rand);
  for (let i = 0; i < spansPerRequest; i++) {
    const isRoot = i % 5 === 0;
    const spanId = bytes(rand, 8);
    if (isRoot) {
      traceId = bytes(rand, 16);
      rootId = spanId;
      who = caller(rand);
      rootStart = BigInt(nowMs - int(rand, 0, 60_000)) * 1_000_000n + BigInt(int(rand, 0, 999_999));
    }
    const start = isRoot ? rootStart : rootStart + BigInt(int(rand, 10_000, 5_000_000));
    const end = start + BigInt(int(rand, 50_000, 800_000_000));
    const failed = rand() < 0.05;
    const status = failed ? pick(rand, [500, 502, 503]) : pick(rand, [200, 200, 200, 201, 204, 304, 404]);
    const route = pick(rand, ROUTES);
    spans.push({
      traceId,
      spanId,
      parentSpanId: isRoot ? Buffer.alloc(0) : rootId,
      name: isRoot ? `${pick(rand, METHODS)} ${route}` : pick(rand, ['SELECT orders', 'redis GET', 'POST /charge', 'render']),
      kind: isRoot ? 2 : pick(rand, [1, 3, 3]), // SERVER; INTERNAL or CLIENT
      startTimeUnixNano: start.toString(),
      endTimeUnixNano: end.toString(),
      attributes: spanAttributes(rand, who, route, status),
      events: failed
        ? [{ timeUnixNano: end.toString(), name: 'exception', attributes: [str('exception.type', 'UpstreamError'), str('exception.message', `upstream returned ${status}`)] }]
        : [],
      status: failed ? { code: 2, message: `HTTP ${status}` } : { code: 0 },
    });
  }
  return {
    resourceSpans: [
      {
        resource: {
          attributes: [
            str('service.name', service),
            str('service.version', `1.${int(rand, 0, 20)}.${int(rand, 0, 9)}`),
            str('service.instance.id', hex(rand, 16)),
            str('host.name', `ip-10-0-${int(rand, 0, 255)}-${int(rand, 1, 254)}`),
            str('deployment.environment.name', 'production'),
            str('cloud.region', pick(rand, ['eu-west-1', 'us-east-1', 'ap-south-1'])),
            str('k8s.pod.name', `${service}-${hex(rand, 5)}`),
            str('telemetry.sdk.name', 'opentelemetry'),
            str('telemetry.sdk.language', 'nodejs'),
            str('telemetry.sdk.version', '2.12.1'),
          ],
        },
        scopeSpans: [{ scope: { name: '@opentelemetry/instrumentation-http', version: '0.223.1' }, spans }],
      },
    ],
  };
}

export interface TraceBodies {
  /** Gzipped protobuf request bodies, all distinct (different ids, times, values). */
  bodies: Buffer[];
  spansPerRequest: number;
  /** Mean size of one body before and after gzip, in bytes. */
  rawBytes: number;
  gzipBytes: number;
}

/**
 * Pre-generates `count` distinct gzipped ExportTraceServiceRequest bodies; with `days`, body i's
 * spans are `i % days` days old (each body on one day, consecutive bodies on different days).
 */
export function traceBodies(types: TraceTypes, count: number, spansPerRequest: number, seed = 1, days = 1): TraceBodies {
  const rand = rng(seed);
  const nowMs = Date.now();
  let raw = 0;
  const bodies = Array.from({ length: count }, (_, i) => {
    const message = types.request.fromObject(traceRequest(rand, spansPerRequest, nowMs - (i % days) * 86_400_000));
    const encoded = types.request.encode(message).finish();
    raw += encoded.length;
    return gzipSync(encoded);
  });
  const gzip = bodies.reduce((sum, b) => sum + b.length, 0);
  return { bodies, spansPerRequest, rawBytes: Math.round(raw / count), gzipBytes: Math.round(gzip / count) };
}

const LEVELS = ['info', 'info', 'info', 'info', 'debug', 'debug', 'warn', 'error'];
const LOG_TEMPLATES = [
  (r: Rand) => `GET ${pick(r, ROUTES)} ${pick(r, [200, 200, 200, 404, 500])} ${int(r, 1, 900)}ms bytes=${int(r, 200, 90_000)}`,
  (r: Rand) => `order ${int(r, 100_000, 999_999)} placed for customer ${hex(r, 6)}: ${int(r, 1, 9)} items, total ${int(r, 5, 900)}.${int(r, 10, 99)} EUR`,
  (r: Rand) => `connection pool ${pick(r, ['pg', 'redis', 'http'])} at ${int(r, 1, 64)}/64, waited ${int(r, 0, 250)}ms`,
  (r: Rand) => `retrying ${pick(r, SERVICES)} call after ${pick(r, ['timeout', 'ECONNRESET', '503'])} (attempt ${int(r, 1, 5)} of 5)`,
];

export interface AgentLogPayload {
  bodies: Buffer[];
  entriesPerRequest: number;
  rawBytes: number;
  gzipBytes: number;
}

/**
 * Agent log batches as an agent ships them: one host and service per batch, entries with an
 * RFC 3339 nanosecond timestamp, a level, a message and 5 attributes; JSON, gzipped.
 */
export function agentLogBodies(count: number, entriesPerRequest: number, seed = 7): AgentLogPayload {
  const rand = rng(seed);
  const start = Date.parse('2026-11-22T10:00:00Z');
  const bodies: Buffer[] = [];
  let rawBytes = 0;
  for (let b = 0; b < count; b++) {
    const entries = Array.from({ length: entriesPerRequest }, (_, i) => ({
      timestamp: new Date(start + b * 1000 + i).toISOString().replace('Z', `${String(int(rand, 0, 999_999)).padStart(6, '0')}Z`),
      level: pick(rand, LEVELS),
      message: pick(rand, LOG_TEMPLATES)(rand),
      attributes: {
        'thread': `worker-${int(rand, 1, 16)}`,
        'trace_id': hex(rand, 16),
        'http.route': pick(rand, ROUTES),
        'duration_ms': int(rand, 1, 900),
        'retry': rand() < 0.05,
      },
    }));
    const raw = Buffer.from(JSON.stringify({ host: `node-${int(rand, 1, 40)}`, service: pick(rand, SERVICES), entries }));
    rawBytes += raw.length;
    bodies.push(gzipSync(raw));
  }
  return {
    bodies,
    entriesPerRequest,
    rawBytes: rawBytes / count,
    gzipBytes: bodies.reduce((n, body) => n + body.length, 0) / count,
  };
}
