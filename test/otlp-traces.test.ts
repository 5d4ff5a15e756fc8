/**
 * Traces sent by the official OpenTelemetry exporters over http/protobuf, http/json and grpc
 * land in otel_traces, every field checked against the span the SDK produced.
 */
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';
import { exportOnce, exporterFor, nanos, PROTOCOLS } from './otel-clients.ts';

let sluice: TestSluice;
beforeAll(async () => {
  sluice = await startTestSluice();
});
afterAll(async () => sluice?.stop());

const KIND: Record<SpanKind, string> = {
  [SpanKind.INTERNAL]: 'Internal',
  [SpanKind.SERVER]: 'Server',
  [SpanKind.CLIENT]: 'Client',
  [SpanKind.PRODUCER]: 'Producer',
  [SpanKind.CONSUMER]: 'Consumer',
};
const STATUS: Record<SpanStatusCode, string> = { [SpanStatusCode.UNSET]: 'Unset', [SpanStatusCode.OK]: 'Ok', [SpanStatusCode.ERROR]: 'Error' };

/** Attribute values as the Collector exporter stores them: strings, arrays as JSON. */
function stringify(attributes: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(attributes).map(([k, v]) => [k, typeof v === 'string' ? v : Array.isArray(v) ? JSON.stringify(v) : String(v)]));
}

/** Produces a small trace with every span feature, for one service. */
function produceSpans(service: string): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': service, 'host.name': 'test-host', 'process.pid': 4242 }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer('checkout-scope', '1.2.3');
  const other = tracer.startSpan('linked-root');
  other.end();
  const root = tracer.startSpan('GET /cart', {
    kind: SpanKind.SERVER,
    attributes: { 'http.method': 'GET', 'http.status_code': 500, ratio: 0.25, cached: false, tags: ['a', 'b'], 'unicode.ü': 'naïve ✓' },
    links: [{ context: other.spanContext(), attributes: { 'link.reason': 'retry-of', attempt: 2 } }],
  });
  root.addEvent('cache.miss', { key: 'cart:42', size: 3 });
  root.addEvent('exception', { 'exception.message': 'boom' });
  const child = tracer.startSpan('SELECT carts', { kind: SpanKind.CLIENT, attributes: { 'db.system': 'postgresql' } }, trace.setSpan(context.active(), root));
  child.setStatus({ code: SpanStatusCode.OK });
  child.end();
  root.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream failed' });
  root.end();
  return memory.getFinishedSpans();
}

interface TraceRow {
  ts: string;
  TraceId: string;
  SpanId: string;
  ParentSpanId: string;
  TraceState: string;
  SpanName: string;
  SpanKind: string;
  ServiceName: string;
  ResourceAttributes: Record<string, string>;
  ScopeName: string;
  ScopeVersion: string;
  SpanAttributes: Record<string, string>;
  Duration: number | string;
  StatusCode: string;
  StatusMessage: string;
  eventTs: string[];
  'Events.Name': string[];
  'Events.Attributes': Array<Record<string, string>>;
  'Links.TraceId': string[];
  'Links.SpanId': string[];
  'Links.TraceState': string[];
  'Links.Attributes': Array<Record<string, string>>;
  SourceId: string;
}

describe.each(PROTOCOLS)('traces over %s', (protocol) => {
  it('stores every span with every field', async () => {
    const service = `svc-${protocol.replace(/\W/g, '-')}`;
    const spans = produceSpans(service);
    const result = await exportOnce(exporterFor<ReadableSpan[]>('traces', protocol, sluice), spans);
    expect(result.code, String(result.error)).toBe(0);

    const rows = await sluice.rows<TraceRow>(
      `SELECT *, toString(toUnixTimestamp64Nano(Timestamp)) AS ts, arrayMap(t -> toString(toUnixTimestamp64Nano(t)), Events.Timestamp) AS eventTs
       FROM otel.otel_traces WHERE ServiceName = '${service}' ORDER BY SpanName`,
    );
    expect(rows).toHaveLength(spans.length);
    for (const span of spans) {
      const row = rows.find((r) => r.SpanId === span.spanContext().spanId)!;
      expect(row, span.name).toBeDefined();
      expect(row).toMatchObject({
        SourceId: sluice.sourceId,
        ts: nanos(span.startTime),
        TraceId: span.spanContext().traceId,
        ParentSpanId: span.parentSpanContext?.spanId ?? '',
        TraceState: '',
        SpanName: span.name,
        SpanKind: KIND[span.kind],
        ServiceName: service,
        ResourceAttributes: stringify(span.resource.attributes),
        ScopeName: 'checkout-scope',
        ScopeVersion: '1.2.3',
        SpanAttributes: stringify(span.attributes),
        StatusCode: STATUS[span.status.code],
        StatusMessage: span.status.message ?? '',
        'Events.Name': span.events.map((e) => e.name),
        'Events.Attributes': span.events.map((e) => stringify(e.attributes ?? {})),
        'Links.TraceId': span.links.map((l) => l.context.traceId),
        'Links.SpanId': span.links.map((l) => l.context.spanId),
        'Links.Attributes': span.links.map((l) => stringify(l.attributes ?? {})),
      });
      expect(String(row.Duration)).toBe(nanos(span.duration));
      expect(row.eventTs).toEqual(span.events.map((e) => nanos(e.time)));
      expect(row.ResourceAttributes).toMatchObject({ 'service.name': service, 'host.name': 'test-host', 'process.pid': '4242' });
    }
    // The root span carried a double, a bool and an array: check their exact text.
    const root = rows.find((r) => r.SpanName === 'GET /cart')!;
    expect(root.SpanAttributes).toMatchObject({ ratio: '0.25', cached: 'false', tags: '["a","b"]', 'http.status_code': '500', 'unicode.ü': 'naïve ✓' });

    // The materialized view indexes every trace by id.
    const ids = await sluice.rows<{ TraceId: string }>(`SELECT DISTINCT TraceId FROM otel.otel_traces_trace_id_ts WHERE TraceId IN (${[...new Set(spans.map((s) => `'${s.spanContext().traceId}'`))].join(',')})`);
    expect(ids.length).toBe(new Set(spans.map((s) => s.spanContext().traceId)).size);
  });
});
