/**
 * What SourceId first in the sort key costs a query that does not filter on it, and what it
 * saves one that does, against the exporter's own layout (the same rows, its sort keys). chDB in
 * a temp dir, the real schema (migrations), `--spans` spans of traces of 10 spans, `--sources`
 * sources each with the same 20 services, over one day; both layouts merged to one part per
 * partition. Reports rows and bytes read (the query's statistics) and the median elapsed time
 * of `--runs` runs:
 *
 *   node --import tsx bench/source-id-cost.ts [--spans 2000000] [--sources 8] [--runs 5]
 *
 * Queries: the exporter README's trace lookup (trace id → first/last span in
 * otel_traces_trace_id_ts → the spans in that window) and one service over one hour.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { migrate } from '../storage/migrate.ts';

const { values } = parseArgs({
  options: { spans: { type: 'string', default: '2000000' }, sources: { type: 'string', default: '8' }, runs: { type: 'string', default: '5' } },
});
const spans = Number(values.spans);
const sources = Number(values.sources);
const runs = Number(values.runs);
const traces = Math.floor(spans / 10);

const dir = await mkdtemp(join(tmpdir(), 'sluice-source-id-cost-'));
const { Session } = await import('chdb');
const session = new Session(dir);
try {
  await migrate({ query: async (sql, format = 'CSV') => session.query(sql, format) }, 'otel');
  // The exporter's layout (internal/sqltemplates: traces_table.sql, traces_id_ts_lookup_table.sql): no SourceId in the keys.
  session.query(`CREATE TABLE otel.exporter_traces AS otel.otel_traces ENGINE = MergeTree PARTITION BY toDate(Timestamp)
    PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp)) ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
    SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1`);
  session.query('ALTER TABLE otel.exporter_traces DROP COLUMN SourceId');
  session.query(`CREATE TABLE otel.exporter_traces_trace_id_ts (
      TraceId String CODEC(ZSTD(1)),
      Start SimpleAggregateFunction(min, DateTime) CODEC(ZSTD(1)),
      End SimpleAggregateFunction(max, DateTime) CODEC(ZSTD(1))
    ) ENGINE = AggregatingMergeTree PARTITION BY toStartOfWeek(Start) ORDER BY (TraceId) SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1`);

  // Span n belongs to trace t = n / 10; a trace's source is t % sources, its spans' services vary.
  const batch = 250_000;
  for (let first = 0; first < spans; first += batch) {
    session.query(`INSERT INTO otel.otel_traces (SourceId, Timestamp, TraceId, SpanId, SpanName, SpanKind, ServiceName, SpanAttributes, Duration, StatusCode)
      SELECT concat('src-', toString(t % ${sources})),
             toDateTime64('2026-08-03 00:00:00', 9) + toIntervalMillisecond(intDiv(t * 86400000, ${traces}) + (number % 10) * 7),
             lower(hex(MD5(toString(t)))), lower(hex(substring(MD5(toString(number)), 1, 8))),
             concat('op-', toString((t + number) % 50)), 'SPAN_KIND_SERVER', concat('svc-', toString((intDiv(t, ${sources}) + number % 10) % 20)),
             map('http.route', concat('/r/', toString(number % 100))), 1000000 + (number % 1000) * 1000, 'STATUS_CODE_UNSET'
      FROM (SELECT number, intDiv(number, 10) AS t FROM numbers(${first}, ${Math.min(batch, spans - first)}))`);
  }
  session.query('INSERT INTO otel.exporter_traces SELECT * EXCEPT SourceId FROM otel.otel_traces');
  session.query('INSERT INTO otel.exporter_traces_trace_id_ts SELECT TraceId, Start, End FROM otel.otel_traces_trace_id_ts');
  for (const table of ['otel_traces', 'otel_traces_trace_id_ts', 'exporter_traces', 'exporter_traces_trace_id_ts']) {
    session.query(`OPTIMIZE TABLE otel.${table} FINAL`);
  }

  const t = Math.floor(traces / 2);
  const [{ TraceId: traceId, SourceId: sourceId }] = JSON.parse(session.query(
    `SELECT TraceId, SourceId FROM otel.otel_traces WHERE TraceId = lower(hex(MD5('${t}'))) LIMIT 1`, 'JSON')).data;
  const traceLookup = (traces: string, lookup: string, source: string) => `WITH '${traceId}' AS trace_id,
      (SELECT min(Start) FROM otel.${lookup} WHERE TraceId = trace_id${source}) AS start,
      (SELECT max(End) + 1 FROM otel.${lookup} WHERE TraceId = trace_id${source}) AS end
    SELECT count() FROM otel.${traces} WHERE TraceId = trace_id${source} AND Timestamp >= start AND Timestamp <= end`;
  const serviceHour = (traces: string, source: string) => `SELECT count(), quantile(0.99)(Duration) FROM otel.${traces}
    WHERE ServiceName = 'svc-3' AND Timestamp >= '2026-08-03 12:00:00' AND Timestamp < '2026-08-03 13:00:00'${source}`;
  const bySource = ` AND SourceId = '${sourceId}'`;
  const cases: Array<[string, string]> = [
    ['trace by id, exporter layout', traceLookup('exporter_traces', 'exporter_traces_trace_id_ts', '')],
    ['trace by id, Sluice, no SourceId', traceLookup('otel_traces', 'otel_traces_trace_id_ts', '')],
    ['trace by id, Sluice, SourceId', traceLookup('otel_traces', 'otel_traces_trace_id_ts', bySource)],
    ['service + 1 h, exporter layout', serviceHour('exporter_traces', '')],
    ['service + 1 h, Sluice, no SourceId', serviceHour('otel_traces', '')],
    ['service + 1 h, Sluice, SourceId', serviceHour('otel_traces', bySource)],
  ];

  console.log(`${spans} spans, ${traces} traces, ${sources} sources; median of ${runs} runs\n`);
  console.log('| query | rows read | MB read | ms (median) | result |');
  console.log('|---|---:|---:|---:|---|');
  for (const [name, sql] of cases) {
    const measured = Array.from({ length: runs }, () => JSON.parse(session.query(sql, 'JSON')));
    const elapsed = measured.map((m) => m.statistics.elapsed * 1000).sort((a, b) => a - b)[Math.floor(runs / 2)]!;
    const { rows_read: rows, bytes_read: bytes } = measured[0].statistics;
    console.log(`| ${name} | ${rows} | ${(bytes / 1e6).toFixed(1)} | ${elapsed.toFixed(1)} | ${Object.values(measured[0].data[0]).join(', ')} |`);
  }
} finally {
  session.close();
  await rm(dir, { recursive: true, force: true });
}
