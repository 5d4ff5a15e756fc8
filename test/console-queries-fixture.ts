/**
 * Test support for the console's queries: a chDB engine of the test file's own with the schema,
 * ConsoleQueries on a read connection to it, and rows put in the way production puts them —
 * OTLP requests (protobuf, encoded from our proto/ files) and agent payloads through the
 * pipeline's transcoders, the RowBinary inserted with ChdbStorage.
 */
import { randomBytes } from 'node:crypto';
import { transcodeAgent } from '../pipeline/agent/rows.ts';
import type { AgentKind, AgentPayloads } from '../pipeline/agent/schemas.ts';
import { transcodeOtlp, type Signal } from '../pipeline/otlp/index.ts';
import { attrs, encodeRequest } from './otlp-requests.ts';
import type { Storage } from '../storage/storage.ts';
import { openTestEngine, type TestEngine } from './chdb-engine.ts';
import type { ConsoleQueryLimits } from '../console/queries/config.ts';
import { ConsoleQueries } from '../console/queries/queries.ts';

export { attrs };

export interface QueriesFixture {
  engine: TestEngine;
  queries: ConsoleQueries;
  /** ConsoleQueries with other limits, on the same engine. */
  withLimits(limits: Partial<ConsoleQueryLimits>): ConsoleQueries;
  close(): Promise<void>;
}

export async function openQueries(): Promise<QueriesFixture> {
  const engine = await openTestEngine();
  return {
    engine,
    queries: new ConsoleQueries(engine.reader, 'otel'),
    withLimits: (limits) => new ConsoleQueries(engine.reader, 'otel', limits),
    close: () => engine.close(),
  };
}

/** Transcodes an OTLP request (a protobufjs object) for `sourceId` and inserts its rows. */
export async function ingestOtlp(storage: Storage, signal: Signal, request: object, sourceId: string): Promise<void> {
  await insertTranscoded(storage, transcodeOtlp(signal, 'protobuf', encodeRequest(signal, request), sourceId));
}

/** The same for an OTLP/JSON body, as an SDK sends it over http/json (the demo's). */
export async function ingestOtlpJson(storage: Storage, signal: Signal, body: object, sourceId: string): Promise<void> {
  await insertTranscoded(storage, transcodeOtlp(signal, 'json', Buffer.from(JSON.stringify(body)), sourceId));
}

async function insertTranscoded(storage: Storage, result: ReturnType<typeof transcodeOtlp>): Promise<void> {
  if (result.rejected > 0) throw new Error(`the transcoder refused ${result.rejected} items of the fixture`);
  for (const table of result.tables) await storage.insert({ table: table.table, columns: table.columns, chunks: [table.data] });
}

/** An agent payload received at `receivedAtMs`, through the agent transcoder, inserted. */
export async function ingestAgent<K extends AgentKind>(storage: Storage, kind: K, payload: AgentPayloads[K], sourceId: string, receivedAtMs: number): Promise<void> {
  const result = transcodeAgent(kind, Buffer.from(JSON.stringify(payload)), sourceId, Infinity, BigInt(receivedAtMs) * 1_000_000n);
  for (const table of result.tables) await storage.insert({ table: table.table, columns: table.columns, chunks: [table.data] });
}

export const hexId = (bytes: 8 | 16) => randomBytes(bytes).toString('hex');
export const ms = (n: number) => BigInt(n) * 1_000_000n;

type Values = Record<string, string | number | boolean>;

export interface SpanSpec {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** Start, Unix nanoseconds. */
  start: bigint;
  durationNs: bigint;
  status?: 'unset' | 'ok' | 'error';
  statusMessage?: string;
  attributes?: Values;
  events?: Array<{ time: bigint; name: string; attributes?: Values }>;
  links?: Array<{ traceId: string; spanId: string; attributes?: Values }>;
}

const STATUS = { unset: 0, ok: 1, error: 2 };

/** One resource (`service`, plus `resource` attributes) with the spans given. */
export function tracesRequest(service: string, spans: SpanSpec[], resource: Values = {}): object {
  const hex = (id: string | undefined) => (id ? Buffer.from(id, 'hex') : undefined);
  return {
    resourceSpans: [{
      resource: { attributes: attrs({ 'service.name': service, ...resource }) },
      scopeSpans: [{
        scope: { name: 'console-test', version: '1.0' },
        spans: spans.map((span) => ({
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          name: span.name,
          kind: 2,
          startTimeUnixNano: String(span.start),
          endTimeUnixNano: String(span.start + span.durationNs),
          attributes: attrs(span.attributes ?? {}),
          status: { code: STATUS[span.status ?? 'unset'], message: span.statusMessage ?? '' },
          events: (span.events ?? []).map((e) => ({ timeUnixNano: String(e.time), name: e.name, attributes: attrs(e.attributes ?? {}) })),
          links: (span.links ?? []).map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId), attributes: attrs(l.attributes ?? {}) })),
        })),
      }],
    }],
  };
}

export interface LogSpec {
  time: bigint;
  body: string;
  severityNumber?: number;
  severityText?: string;
  attributes?: Values;
  traceId?: string;
  spanId?: string;
}

export function logsRequest(service: string, records: LogSpec[], resource: Values = {}): object {
  return {
    resourceLogs: [{
      resource: { attributes: attrs({ 'service.name': service, ...resource }) },
      scopeLogs: [{
        scope: { name: 'console-test' },
        logRecords: records.map((r) => ({
          timeUnixNano: String(r.time),
          severityNumber: r.severityNumber ?? 9,
          severityText: r.severityText ?? 'INFO',
          body: { stringValue: r.body },
          attributes: attrs(r.attributes ?? {}),
          traceId: r.traceId ? Buffer.from(r.traceId, 'hex') : undefined,
          spanId: r.spanId ? Buffer.from(r.spanId, 'hex') : undefined,
        })),
      }],
    }],
  };
}

/** One resource with the metrics given (protobufjs objects: `{name, unit, gauge | sum | histogram: {...}}`). */
export function metricsRequest(service: string, metrics: object[], resource: Values = {}): object {
  return {
    resourceMetrics: [{
      resource: { attributes: attrs({ 'service.name': service, ...resource }) },
      scopeMetrics: [{ scope: { name: 'console-test' }, metrics }],
    }],
  };
}

/** A data point's times: `at` seconds, started at `start` seconds (Unix). */
export function pointTimes(at: number, start = 0): { startTimeUnixNano: string; timeUnixNano: string } {
  return { startTimeUnixNano: String(BigInt(start) * 1_000_000_000n), timeUnixNano: String(BigInt(at) * 1_000_000_000n) };
}
