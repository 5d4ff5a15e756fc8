/**
 * `sluice demo`: realistic sample telemetry sent through the real OTLP/HTTP path, so a new user
 * sees data before instrumenting anything. A small shop — frontend → checkout → payment,
 * inventory — over the last `minutes`: traces with errors and slow calls, logs tied to their
 * spans, request-duration histograms and order counters, and two deploy markers: the release
 * that made payment slow, and a harmless one of inventory. OTLP/JSON, as any SDK may send it;
 * nothing bypasses the front door.
 */

export interface DemoOptions {
  /** The ingest port's base URL, e.g. http://127.0.0.1:4318. */
  url: string;
  apiKey: string;
  /** How far back the sample reaches (minutes before now). */
  minutes: number;
  /** Checkout requests in all. */
  requests: number;
  now?: number;
  /** Random numbers in [0, 1): a seeded generator in tests. */
  random?: () => number;
}

export interface DemoSent {
  spans: number;
  logs: number;
  metricPoints: number;
  deploys: number;
}

const NS = 1_000_000n;
const SERVICES = ['frontend', 'checkout', 'payment', 'inventory'] as const;
type Service = (typeof SERVICES)[number];
const VERSIONS: Record<Service, string> = { frontend: '3.1.4', checkout: '2.4.0', payment: '1.9.2', inventory: '5.0.1' };
/** payment 1.9.2 went out halfway through the sample: its calls got slower and failed more. */
const SLOW_RELEASE_AT = 0.5;
/** inventory 5.0.1 went out earlier and changed nothing its users could see. */
const HARMLESS_RELEASE_AT = 0.3;

type Attr = { key: string; value: Record<string, unknown> };
const attr = (key: string, value: string | number | boolean): Attr => ({
  key,
  value: typeof value === 'string' ? { stringValue: value } : typeof value === 'boolean' ? { boolValue: value } : Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value },
});
const resource = (service: Service) => ({
  attributes: [attr('service.name', service), attr('service.version', VERSIONS[service]), attr('deployment.environment', 'demo'), attr('host.name', `${service}-7f9c`)],
});
const SCOPE = { name: 'sluice-demo', version: '1' };

interface Span {
  service: Service;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  start: bigint;
  end: bigint;
  error: boolean;
  attributes: Attr[];
}

/** A request's duration and when it ended (Unix ms). */
interface Observation {
  at: number;
  ms: number;
}

interface LogLine {
  service: Service;
  at: bigint;
  severity: 'INFO' | 'WARN' | 'ERROR';
  body: string;
  traceId: string;
  spanId: string;
  attributes: Attr[];
}

/** Duration histogram buckets (milliseconds), as OpenTelemetry's defaults for HTTP servers. */
const BOUNDS = [5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500];

/** The sample: spans, logs and per-service durations, from one pass over the requests. */
export function demoTelemetry({ minutes, requests, now = Date.now(), random = Math.random }: Omit<DemoOptions, 'url' | 'apiKey'>) {
  const hex = (bytes: number) => Array.from({ length: bytes }, () => Math.floor(random() * 256).toString(16).padStart(2, '0')).join('');
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  const spans: Span[] = [];
  const logs: LogLine[] = [];
  /** Each service's request durations (ms) and when each request ended, for the metrics. */
  const durations = new Map<Service, Observation[]>(SERVICES.map((s) => [s, []]));
  const from = now - minutes * 60_000;
  const orders: number[] = [];

  for (let i = 0; i < requests; i++) {
    const share = (i + random()) / requests;
    const startMs = from + share * minutes * 60_000;
    const afterRelease = share >= SLOW_RELEASE_AT;
    const traceId = hex(16);
    const start = BigInt(Math.floor(startMs)) * NS;
    const items = 1 + Math.floor(random() * 4);
    const child = (service: Service, parent: Span, name: string, kind: number, offsetMs: number, ms: number, error: boolean, attributes: Attr[]): Span => {
      const span: Span = { service, traceId, spanId: hex(8), parentSpanId: parent.spanId, name, kind, start: parent.start + BigInt(Math.round(offsetMs * 1e6)), end: 0n, error, attributes };
      span.end = span.start + BigInt(Math.round(ms * 1e6));
      spans.push(span);
      durations.get(service)!.push({ at: Number(span.end / 1_000_000n), ms });
      return span;
    };

    const inventoryMs = 4 + random() * 20;
    const paymentMs = afterRelease ? 180 + random() * 420 : 40 + random() * 90;
    const paymentFails = random() < (afterRelease ? 0.12 : 0.02);
    const outOfStock = random() < 0.03;
    const checkoutMs = 3 + inventoryMs + (outOfStock ? 0 : paymentMs) + random() * 10;
    const totalMs = checkoutMs + 5 + random() * 15;
    const root: Span = {
      service: 'frontend', traceId, spanId: hex(8), parentSpanId: '', name: 'POST /api/checkout', kind: 2, start, end: start + BigInt(Math.round(totalMs * 1e6)),
      error: paymentFails, attributes: [attr('http.request.method', 'POST'), attr('http.route', '/api/checkout'), attr('http.response.status_code', paymentFails ? 502 : outOfStock ? 409 : 200), attr('user_agent.original', pick(['Mozilla/5.0 (Macintosh)', 'Mozilla/5.0 (iPhone)', 'Mozilla/5.0 (Windows NT 10.0)']))],
    };
    spans.push(root);
    durations.get('frontend')!.push({ at: Number(root.end / 1_000_000n), ms: totalMs });
    const checkout = child('checkout', root, 'PlaceOrder', 2, 2, checkoutMs, paymentFails, [attr('app.cart.items', items), attr('rpc.system', 'grpc')]);
    const inventory = child('inventory', checkout, 'ReserveItems', 2, 1, inventoryMs, false, [attr('app.cart.items', items), attr('db.system', 'postgresql')]);
    child('inventory', inventory, 'SELECT stock', 3, 1, inventoryMs * 0.6, false, [attr('db.system', 'postgresql'), attr('db.operation.name', 'SELECT')]);
    if (outOfStock) {
      logs.push({ service: 'inventory', at: inventory.end, severity: 'WARN', body: `item out of stock, order refused (${items} items)`, traceId, spanId: inventory.spanId, attributes: [attr('app.cart.items', items)] });
      continue;
    }
    const amount = Math.round((10 + random() * 240) * 100) / 100;
    const payment = child('payment', checkout, 'Charge', 2, 2 + inventoryMs, paymentMs, paymentFails, [attr('app.payment.amount', amount), attr('app.payment.currency', 'EUR'), attr('app.payment.provider', pick(['cards', 'wallet']))]);
    if (paymentFails) {
      logs.push({ service: 'payment', at: payment.end, severity: 'ERROR', body: 'charge failed: card processor timed out after 3 retries', traceId, spanId: payment.spanId, attributes: [attr('app.payment.amount', amount), attr('exception.type', 'ProcessorTimeout')] });
      logs.push({ service: 'frontend', at: root.end, severity: 'ERROR', body: 'checkout failed: upstream payment error (502)', traceId, spanId: root.spanId, attributes: [attr('http.response.status_code', 502)] });
    } else {
      orders.push(Number(checkout.end / 1_000_000n));
      if (paymentMs > 400) logs.push({ service: 'payment', at: payment.end, severity: 'WARN', body: `slow charge: ${Math.round(paymentMs)} ms`, traceId, spanId: payment.spanId, attributes: [attr('app.payment.amount', amount)] });
      logs.push({ service: 'checkout', at: checkout.end, severity: 'INFO', body: `order placed: ${items} items, ${amount.toFixed(2)} EUR`, traceId, spanId: checkout.spanId, attributes: [attr('app.cart.items', items), attr('app.payment.amount', amount)] });
    }
  }
  const at = (share: number) => from + share * minutes * 60_000;
  return { spans, logs, durations, orders, from, now, releaseAt: at(SLOW_RELEASE_AT), harmlessReleaseAt: at(HARMLESS_RELEASE_AT) };
}

function tracesBody(spans: Span[]) {
  return {
    resourceSpans: SERVICES.map((service) => ({
      resource: resource(service),
      scopeSpans: [{
        scope: SCOPE,
        spans: spans.filter((s) => s.service === service).map((s) => ({
          traceId: s.traceId, spanId: s.spanId, ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}), name: s.name, kind: s.kind,
          startTimeUnixNano: String(s.start), endTimeUnixNano: String(s.end), attributes: s.attributes,
          status: s.error ? { code: 2, message: 'upstream error' } : { code: 0 },
        })),
      }],
    })).filter((r) => r.scopeSpans[0]!.spans.length > 0),
  };
}

const SEVERITY_NUMBER = { INFO: 9, WARN: 13, ERROR: 17 } as const;

function logsBody(logs: LogLine[]) {
  return {
    resourceLogs: SERVICES.map((service) => ({
      resource: resource(service),
      scopeLogs: [{
        scope: SCOPE,
        logRecords: logs.filter((l) => l.service === service).map((l) => ({
          timeUnixNano: String(l.at), observedTimeUnixNano: String(l.at), severityNumber: SEVERITY_NUMBER[l.severity], severityText: l.severity,
          body: { stringValue: l.body }, attributes: l.attributes, traceId: l.traceId, spanId: l.spanId,
        })),
      }],
    })).filter((r) => r.scopeLogs[0]!.logRecords.length > 0),
  };
}

/**
 * Cumulative points every minute (the last one at `now`), as an SDK exporting every minute since
 * `from` sends them: each service's request durations as a histogram, and a counter of orders.
 */
function metricsBody(durations: Map<Service, Observation[]>, orders: number[], from: number, now: number) {
  const start = String(BigInt(Math.floor(from)) * NS);
  // The last point takes every request, those that ended a moment after `now` too.
  let last = now;
  for (const observations of durations.values()) for (const { at } of observations) last = Math.max(last, at);
  const times: number[] = [];
  for (let t = from + 60_000; t < now; t += 60_000) times.push(t);
  times.push(last);
  const nanos = (ms: number) => String(BigInt(Math.floor(ms)) * NS);
  const histogram = (observations: Observation[], until: number) => {
    const values = observations.filter((o) => o.at <= until).map((o) => o.ms);
    const counts = new Array<number>(BOUNDS.length + 1).fill(0);
    for (const v of values) {
      const bucket = BOUNDS.findIndex((bound) => v <= bound);
      counts[bucket === -1 ? BOUNDS.length : bucket]!++;
    }
    return {
      startTimeUnixNano: start, timeUnixNano: nanos(until), count: String(values.length), sum: values.reduce((a, b) => a + b, 0),
      ...(values.length > 0 ? { min: Math.min(...values), max: Math.max(...values) } : {}), bucketCounts: counts.map(String), explicitBounds: BOUNDS,
    };
  };
  return {
    resourceMetrics: SERVICES.filter((s) => durations.get(s)!.length > 0).map((service) => ({
      resource: resource(service),
      scopeMetrics: [{
        scope: SCOPE,
        metrics: [
          { name: 'http.server.request.duration', unit: 'ms', description: 'Duration of server requests', histogram: { aggregationTemporality: 2, dataPoints: times.map((t) => histogram(durations.get(service)!, t)) } },
          ...(service === 'checkout'
            ? [{ name: 'app.orders.placed', unit: '{order}', description: 'Orders placed', sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: times.map((t) => ({ startTimeUnixNano: start, timeUnixNano: nanos(t), asInt: String(orders.filter((at) => at <= t).length) })) } }]
            : []),
        ],
      }],
    })),
  };
}

/** What the demo sends, request by request: the OTLP/JSON bodies and the deploy markers. */
export interface DemoRequests {
  traces: object[];
  logs: object[];
  metrics: ReturnType<typeof metricsBody>;
  deploys: Array<{ service: Service; version: string; environment: string; commit: string; deployedBy: string; description: string; timestamp: string }>;
}

export function demoRequests(options: Omit<DemoOptions, 'url' | 'apiKey'>): DemoRequests {
  const sample = demoTelemetry(options);
  const random = options.random ?? Math.random;
  const commit = () => Math.floor(random() * 2 ** 32).toString(16).padStart(8, '0');
  const batches = <T>(items: T[]) => Array.from({ length: Math.ceil(items.length / 500) }, (_, i) => items.slice(i * 500, i * 500 + 500));
  return {
    // A few hundred spans per request, as an SDK's batch processor sends them.
    traces: batches(sample.spans).map(tracesBody),
    logs: batches(sample.logs).map(logsBody),
    metrics: metricsBody(sample.durations, sample.orders, sample.from, sample.now),
    deploys: [
      { service: 'inventory', version: VERSIONS.inventory, environment: 'demo', commit: commit(), deployedBy: 'sluice demo', description: 'inventory 5.0.1: dependency updates', timestamp: new Date(sample.harmlessReleaseAt).toISOString() },
      { service: 'payment', version: VERSIONS.payment, environment: 'demo', commit: commit(), deployedBy: 'sluice demo', description: 'payment 1.9.2: new card processor client', timestamp: new Date(sample.releaseAt).toISOString() },
    ],
  };
}

/** Sends the sample; throws with the gateway's answer when a request is refused. */
export async function sendDemo(options: DemoOptions): Promise<DemoSent> {
  const requests = demoRequests(options);
  const post = async (path: string, body: unknown) => {
    const response = await fetch(new URL(path, options.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': options.apiKey },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    if (!response.ok) throw new Error(`POST ${path}: ${response.status} ${(await response.text()).slice(0, 300)}`);
  };
  for (const body of requests.traces) await post('/v1/traces', body);
  for (const body of requests.logs) await post('/v1/logs', body);
  await post('/v1/metrics', requests.metrics);
  for (const deploy of requests.deploys) await post('/api/v1/webhooks/deploy', deploy);
  const count = <T>(bodies: T[], items: (body: T) => number) => bodies.reduce((n, body) => n + items(body), 0);
  return {
    spans: count(requests.traces as Array<ReturnType<typeof tracesBody>>, (b) => count(b.resourceSpans, (r) => r.scopeSpans[0]!.spans.length)),
    logs: count(requests.logs as Array<ReturnType<typeof logsBody>>, (b) => count(b.resourceLogs, (r) => r.scopeLogs[0]!.logRecords.length)),
    metricPoints: requests.metrics.resourceMetrics.reduce((n, r) => n + r.scopeMetrics[0]!.metrics.reduce((m, metric) => m + (metric.histogram ?? metric.sum)!.dataPoints.length, 0), 0),
    deploys: requests.deploys.length,
  };
}
