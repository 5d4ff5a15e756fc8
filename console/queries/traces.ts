/**
 * Traces: the search (summaries of the traces with a matching span, most recent first) and one
 * trace with all its spans.
 *
 * The search is two statements:
 *   1. candidates: the newest matching spans, `ORDER BY Timestamp DESC LIMIT n`, reading only the
 *      time and filter columns of every span in the range; the engine reads TraceId for those n
 *      rows only (lazy materialization), and the first `limit` distinct trace ids are kept;
 *   2. summaries: every span of those traces, found through otel_traces_trace_id_ts (trace id →
 *      first and last span second, the exporter's lookup) and the TraceId bloom filter.
 * Filters apply to spans: a trace is listed when one of its spans in the range matches them
 * all (as Jaeger searches). A trace whose spans are many (over n / limit each on average) can
 * leave fewer than `limit` traces in the answer, never wrong ones.
 */
import type { SpanView, TraceQuery, TraceSummary, TraceView } from '../api.ts';
import { MAX_TRACE_SPANS } from './config.ts';
import { mapEquals, nanosToMillis, Params, within, type StatementExecutor } from './statement.ts';

/** Spans read per trace asked for in step 1 (at most the engine's lazy-materialization limit, 10,000). */
const CANDIDATE_SPANS_PER_TRACE = 50;
const MAX_CANDIDATE_SPANS = 10_000;

const STATUS = { ok: 'Ok', error: 'Error', unset: 'Unset' } as const;

interface SummaryRow {
  traceId: string; startNs: string; endNs: string; rootService: string; rootName: string;
  spans: string; errors: string; services: string[];
}

export async function traces(db: StatementExecutor, sources: readonly string[], query: TraceQuery & { limit: number }): Promise<TraceSummary[]> {
  const params = new Params();
  const where = [params.sources('SourceId', sources), within('Timestamp', params.range(query))];
  if (query.services?.length) where.push(`ServiceName IN ${params.list(query.services)}`);
  if (query.operation !== undefined) where.push(`SpanName = ${params.bind(query.operation, 'String')}`);
  if (query.minDurationMs !== undefined) where.push(`Duration >= ${params.bind(Math.ceil(query.minDurationMs * 1e6), 'Int64')}`);
  if (query.maxDurationMs !== undefined) where.push(`Duration <= ${params.bind(Math.floor(query.maxDurationMs * 1e6), 'Int64')}`);
  if (query.status !== undefined) where.push(`StatusCode = ${params.bind(STATUS[query.status], 'String')}`);
  for (const { key, value } of query.attributes ?? []) {
    const k = params.bind(key, 'String');
    const v = params.bind(value, 'String');
    where.push(`(${mapEquals('SpanAttributes', k, v, value === '')} OR ${mapEquals('ResourceAttributes', k, v, value === '')})`);
  }
  const spans = Math.min(query.limit * CANDIDATE_SPANS_PER_TRACE, MAX_CANDIDATE_SPANS);
  const candidates = await db.rows<{ traceId: string }>(
    `SELECT TraceId AS traceId FROM (
       SELECT TraceId, Timestamp FROM otel_traces WHERE ${where.join(' AND ')} ORDER BY Timestamp DESC LIMIT ${spans}
     ) ORDER BY Timestamp DESC LIMIT 1 BY TraceId LIMIT ${params.bind(query.limit, 'UInt32')}`,
    params,
  );
  if (candidates.length === 0) return [];

  const summary = new Params();
  const rows = await db.rows<SummaryRow>(
    `SELECT TraceId AS traceId, toUnixTimestamp64Nano(min(Timestamp)) AS startNs,
       max(toUnixTimestamp64Nano(Timestamp) + toInt64(Duration)) AS endNs,
       if(countIf(ParentSpanId = '') > 0, argMinIf(ServiceName, Timestamp, ParentSpanId = ''), argMin(ServiceName, Timestamp)) AS rootService,
       if(countIf(ParentSpanId = '') > 0, argMinIf(SpanName, Timestamp, ParentSpanId = ''), argMin(SpanName, Timestamp)) AS rootName,
       count() AS spans, countIf(StatusCode = 'Error') AS errors, arraySort(groupUniqArray(toString(ServiceName))) AS services
     FROM otel_traces WHERE ${traceSpans(summary, sources, candidates.map((c) => c.traceId))}
     GROUP BY TraceId ORDER BY startNs DESC, traceId`,
    summary,
  );
  return rows.map((row) => ({
    traceId: row.traceId,
    start: nanosToMillis(row.startNs),
    durationMs: Number(BigInt(row.endNs) - BigInt(row.startNs)) / 1e6,
    rootService: row.rootService,
    rootName: row.rootName,
    spans: Number(row.spans),
    errors: Number(row.errors),
    services: row.services,
  }));
}

/**
 * Spans of the given traces of the tenant: by trace id, within the seconds the trace id lookup
 * gives for them (so partitions and granules outside are skipped). No lookup row, no spans: the
 * lookup is filled by a materialized view on every insert into otel_traces.
 */
function traceSpans(params: Params, sources: readonly string[], traceIds: readonly string[]): string {
  const source = params.sources('SourceId', sources);
  const ids = params.list(traceIds);
  const lookup = `FROM otel_traces_trace_id_ts WHERE ${source} AND TraceId IN ${ids}`;
  // As DateTime64(9): chDB 26.7 turns `Timestamp < <DateTime scalar>` into `<= scalar - 1 s` when it
  // prunes parts by the partition key's min-max index, skipping the trace's last second (tried here).
  return `${source} AND TraceId IN ${ids} AND Timestamp >= (SELECT toDateTime64(min(Start), 9) ${lookup})`
    + ` AND Timestamp < (SELECT toDateTime64(max(End) + 1, 9) ${lookup})`;
}

interface SpanRow extends Omit<SpanView, 'events' | 'links'> {
  eventTimes: string[]; eventNames: string[]; eventAttributes: Array<Record<string, string>>;
  linkTraceIds: string[]; linkSpanIds: string[]; linkAttributes: Array<Record<string, string>>;
}

/** Every span of one trace of the tenant, by start time; undefined when it has none. */
export async function trace(db: StatementExecutor, sources: readonly string[], traceId: string): Promise<TraceView | undefined> {
  const params = new Params();
  const rows = await db.rows<SpanRow>(
    `SELECT TraceId AS traceId, SpanId AS spanId, ParentSpanId AS parentSpanId, toString(SpanName) AS name, toString(SpanKind) AS kind,
       toString(ServiceName) AS service, toString(toUnixTimestamp64Nano(Timestamp)) AS startNs, toString(Duration) AS durationNs,
       toString(StatusCode) AS statusCode, StatusMessage AS statusMessage, SpanAttributes AS attributes, ResourceAttributes AS resource,
       ScopeName AS scope,
       arrayMap(t -> toString(toUnixTimestamp64Nano(t)), \`Events.Timestamp\`) AS eventTimes, \`Events.Name\` AS eventNames,
       \`Events.Attributes\` AS eventAttributes,
       \`Links.TraceId\` AS linkTraceIds, \`Links.SpanId\` AS linkSpanIds, \`Links.Attributes\` AS linkAttributes
     FROM otel_traces WHERE ${traceSpans(params, sources, [traceId])}
     ORDER BY Timestamp, SpanId LIMIT ${MAX_TRACE_SPANS + 1}`,
    params,
  );
  if (rows.length === 0) return undefined;
  const spans = rows.slice(0, MAX_TRACE_SPANS).map(({ eventTimes, eventNames, eventAttributes, linkTraceIds, linkSpanIds, linkAttributes, ...span }): SpanView => ({
    ...span,
    events: eventTimes.map((timeNs, i) => ({ timeNs, name: eventNames[i]!, attributes: eventAttributes[i]! })),
    links: linkTraceIds.map((linkTraceId, i) => ({ traceId: linkTraceId, spanId: linkSpanIds[i]!, attributes: linkAttributes[i]! })),
  }));
  return rows.length > MAX_TRACE_SPANS ? { traceId, spans, truncated: true } : { traceId, spans };
}
