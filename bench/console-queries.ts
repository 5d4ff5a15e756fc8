/**
 * The console's queries (console/queries/) over one hour of data: a fresh chDB data dir with the
 * real schema (migrations), `--spans` spans in traces of 10 over the last full hour for
 * `--sources` sources, with logs (a tenth as many, plus agent logs), metrics (a gauge, a
 * cumulative counter and a cumulative histogram: 20 services × 10 series every 10 s per source),
 * agent metrics, heartbeats and deploy markers. The rows are made by the engine (INSERT ...
 * SELECT from numbers()), then every table is merged (OPTIMIZE FINAL). Each query kind then
 * runs through ConsoleQueries on a ChdbReader, for a tenant of one source and for a tenant of
 * all of them: one warm-up, then the median (and range) of the wall time of `--runs` runs.
 *
 *   node --import tsx bench/console-queries.ts [--spans 1000000] [--sources 4] [--runs 5]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { ConsoleQueries as Queries } from '../console/queries/index.ts';
import { ConsoleQueries } from '../console/queries/index.ts';
import { ChdbReader } from '../storage/chdb-reader.ts';
import { chdbEngineDir, ChdbStorage } from '../storage/chdb.ts';

const { values } = parseArgs({
  options: { spans: { type: 'string', default: '1000000' }, sources: { type: 'string', default: '4' }, runs: { type: 'string', default: '5' } },
});
const spans = Number(values.spans);
const sources = Number(values.sources);
const runs = Number(values.runs);
const traces = Math.floor(spans / 10);
const logs = Math.floor(spans / 10);
/** The last full hour: [from, to). */
const to = Math.floor(Date.now() / 3_600_000) * 3_600_000;
const from = to - 3_600_000;
const range = { from, to };
const startNs = `${from}000000`;
const startS = from / 1000;

const dir = await mkdtemp(join(tmpdir(), 'sluice-console-bench-'));
const storage = new ChdbStorage(dir, 'otel');
const reader = new ChdbReader(chdbEngineDir(dir));
try {
  await storage.start();
  const loadStarted = performance.now();
  await load(storage);
  const loadSeconds = (performance.now() - loadStarted) / 1000;
  const [counts] = JSON.parse(`[${(await storage.query(
    `SELECT (SELECT count() FROM otel.otel_traces) AS spans, (SELECT count() FROM otel.otel_logs) AS logs,
       (SELECT count() FROM otel.agent_logs) AS agentLogs, (SELECT count() FROM otel.otel_metrics_histogram) AS histogramPoints`)).trim()}]`);
  console.log(`console-queries: ${JSON.stringify(counts)} over [${new Date(from).toISOString()}, ${new Date(to).toISOString()}), ${sources} sources; loaded and merged in ${loadSeconds.toFixed(0)} s; median of ${runs} runs\n`);

  const queries = new ConsoleQueries(reader, 'otel');
  const all = Array.from({ length: sources }, (_, i) => `src-${i}`);
  // A trace of src-0 from the middle of the hour.
  const traceNumber = Math.floor(traces / 2 / sources) * sources;
  const [{ id: traceId }] = JSON.parse(`[${(await storage.query(`SELECT lower(hex(MD5(toString(${traceNumber})))) AS id`)).trim()}]`);
  const firstPage = (tenant: string[]) => queries.logs(tenant, { ...range, limit: 100 });

  const cases: Array<[string, (tenant: string[]) => Promise<unknown>, (answer: any) => string]> = [
    ['services', (t) => queries.services(t, range), (a) => `${a.length} services`],
    ['logs: newest 100', firstPage, (a) => `${a.logs.length} entries`],
    ['logs: first page, then the next (cursor)', async (t) => queries.logs(t, { ...range, limit: 100, cursor: (await firstPage(t)).cursor }), (a) => `${a.logs.length} entries`],
    ['logs: text "answered 500"', (t) => queries.logs(t, { ...range, text: 'answered 500' }), (a) => `${a.logs.length} entries`],
    ['logs: text matching nothing (full scan)', (t) => queries.logs(t, { ...range, text: 'never logged' }), (a) => `${a.logs.length} entries`],
    ['logs: service + severity ≥ warn', (t) => queries.logs(t, { ...range, services: ['svc-3'], minSeverity: 13 }), (a) => `${a.logs.length} entries`],
    ['logs: attribute user.id', (t) => queries.logs(t, { ...range, attributes: [{ key: 'user.id', value: 'u40' }] }), (a) => `${a.logs.length} entries`],
    ['traces: newest 20', (t) => queries.traces(t, range), (a) => `${a.length} traces`],
    ['traces: service + operation', (t) => queries.traces(t, { ...range, services: ['svc-3'], operation: 'op-7' }), (a) => `${a.length} traces`],
    ['traces: errors ≥ 400 ms', (t) => queries.traces(t, { ...range, status: 'error', minDurationMs: 400 }), (a) => `${a.length} traces`],
    ['traces: attribute user.id', (t) => queries.traces(t, { ...range, attributes: [{ key: 'user.id', value: 'u40' }] }), (a) => `${a.length} traces`],
    ['traces: attribute matching nothing (full scan)', (t) => queries.traces(t, { ...range, attributes: [{ key: 'user.id', value: 'nobody' }] }), (a) => `${a.length} traces`],
    ['traces: status ok (none: full scan)', (t) => queries.traces(t, { ...range, status: 'ok' }), (a) => `${a.length} traces`],
    ['trace by id', (t) => queries.trace(t, traceId), (a) => `${a?.spans.length ?? 0} spans`],
    ['metric names', (t) => queries.metricNames(t, range), (a) => `${a.length} metrics`],
    ['gauge avg by service', (t) => queries.metric(t, { ...range, name: 'process.cpu.utilization', kind: 'gauge', aggregation: 'avg', groupBy: 'service.name' }), points],
    ['counter rate', (t) => queries.metric(t, { ...range, name: 'http.server.requests', kind: 'sum', aggregation: 'rate' }), points],
    ['histogram p95 by service', (t) => queries.metric(t, { ...range, name: 'http.server.duration', kind: 'histogram', aggregation: 'p95', groupBy: 'service.name' }), points],
    ['agent metric rate by host', (t) => queries.metric(t, { ...range, name: 'net.bytes', kind: 'agent', aggregation: 'rate', groupBy: 'host.name' }), points],
    // A dashboard opening: its charts asked at once (chDB runs parameterised statements one at a time).
    ['8 charts at once', (t) => Promise.all(Array.from({ length: 8 }, (_, i) => queries.metric(t, {
      ...range, name: ['process.cpu.utilization', 'http.server.requests', 'http.server.duration', 'net.bytes'][i % 4]!,
      kind: (['gauge', 'sum', 'histogram', 'agent'] as const)[i % 4]!, aggregation: (['avg', 'rate', 'p95', 'rate'] as const)[i % 4]!,
      groupBy: i < 4 ? 'service.name' : undefined,
    }))), (a) => `${a.length} charts`],
    ['deploys', (t) => queries.deploys(t, range), (a) => `${a.length} markers`],
    ['agents', (t) => queries.agents(t), (a) => `${a.length} agents`],
  ];
  const tenants: Array<[string, string[]]> = [['1 source', ['src-0']], [`${sources} sources`, all]];
  console.log('| query | tenant | ms (median) | min–max | answer |');
  console.log('|---|---|---:|---:|---|');
  for (const [name, run, describe] of cases) {
    for (const [label, tenant] of tenants) {
      await run(tenant); // warm-up: caches, connections
      const times: number[] = [];
      let answer: unknown;
      for (let i = 0; i < runs; i++) {
        const started = performance.now();
        answer = await run(tenant);
        times.push(performance.now() - started);
      }
      times.sort((a, b) => a - b);
      const median = times[Math.floor(runs / 2)]!;
      console.log(`| ${name} | ${label} | ${median.toFixed(0)} | ${times[0]!.toFixed(0)}–${times.at(-1)!.toFixed(0)} | ${describe(answer)} |`);
    }
  }
} finally {
  await reader.shutdown();
  await storage.shutdown();
  await rm(dir, { recursive: true, force: true });
}

function points(result: Awaited<ReturnType<Queries['metric']>>): string {
  return `${result.series.length} series × ${result.series[0]?.points.length ?? 0} points`;
}

/** Every table's rows, made by the engine; then merged. */
async function load(storage: ChdbStorage): Promise<void> {
  const batch = 1_000_000;
  const src = (n: string) => `concat('src-', toString(${n} % ${sources}))`;
  for (let first = 0; first < spans; first += batch) {
    // Span s of trace t: the root (s = 0) is a server span, its children point to it; 2 % of traces fail.
    await storage.query(`INSERT INTO otel.otel_traces (SourceId, Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind, ServiceName,
        ResourceAttributes, ScopeName, SpanAttributes, Duration, StatusCode)
      SELECT ${src('t')}, fromUnixTimestamp64Nano(toInt64(${startNs} + t * ${3600e9 / traces} + s * 1000000)),
        lower(hex(MD5(toString(t)))), lower(hex(substring(MD5(toString(number)), 1, 8))),
        if(s = 0, '', lower(hex(substring(MD5(toString(t * 10)), 1, 8)))),
        if(s = 0, concat('GET /api/', toString(t % 30)), concat('op-', toString((t + s) % 50))), if(s = 0, 'Server', 'Internal'), svc,
        map('service.name', svc, 'host.name', concat('host-', toString(number % 50))), 'bench',
        map('http.route', concat('/api/', toString(t % 30)), 'user.id', concat('u', toString(t % 10000)), 'http.status_code', if(t % 50 = 0, '500', '200')),
        (1 + cityHash64(number) % 500) * 1000000, if(t % 50 = 0, 'Error', 'Unset')
      FROM (SELECT number, intDiv(number, 10) AS t, number % 10 AS s, concat('svc-', toString((intDiv(t, ${sources}) + s) % 20)) AS svc
            FROM numbers(${first}, ${Math.min(batch, spans - first)}))`);
  }
  for (let first = 0; first < logs; first += batch) {
    await storage.query(`INSERT INTO otel.otel_logs (SourceId, Timestamp, TraceId, SeverityText, SeverityNumber, ServiceName, Body, ResourceAttributes, LogAttributes)
      SELECT ${src('number')}, fromUnixTimestamp64Nano(toInt64(${startNs} + number * ${3600e9 / logs})), lower(hex(MD5(toString(number)))),
        multiIf(number % 50 = 0, 'ERROR', number % 7 = 0, 'WARN', 'INFO'), multiIf(number % 50 = 0, 17, number % 7 = 0, 13, 9), svc,
        concat('GET /api/items/', toString(number % 1000), ' answered ', if(number % 50 = 0, '500', '200'), ' in ', toString(number % 300), ' ms'),
        map('service.name', svc, 'host.name', concat('host-', toString(number % 50))), map('user.id', concat('u', toString(number % 10000)))
      FROM (SELECT number, concat('svc-', toString(intDiv(number, ${sources}) % 20)) AS svc FROM numbers(${first}, ${Math.min(batch, logs - first)}))`);
  }
  const agentLogs = Math.floor(logs / 10);
  await storage.query(`INSERT INTO otel.agent_logs (SourceId, Timestamp, ObservedTimestamp, Host, Service, Level, SeverityNumber, Message, Attributes)
    SELECT ${src('number')}, fromUnixTimestamp64Nano(toInt64(${startNs} + number * ${3600e9 / agentLogs})), now64(9), concat('node-', toString(number % 100)),
      'kubelet', if(number % 20 = 0, 'warn', 'info'), if(number % 20 = 0, 13, 9), concat('pod sync ', toString(number)), map('region', 'eu')
    FROM numbers(${agentLogs})`);
  // Metric series: source, 20 services, 10 series each, a point every 10 s for the hour (k = 0..359).
  const series = `FROM (SELECT number % 360 AS k, intDiv(number, 360) % 10 AS serie, concat('svc-', toString(intDiv(number, 3600) % 20)) AS svc,
      intDiv(number, 72000) AS source FROM numbers(${72000 * sources}))`;
  const common = `concat('src-', toString(source)), svc, map('service.name', svc), map('http.route', concat('/api/', toString(serie))), toDateTime(${startS - 3600}), toDateTime(${startS} + k * 10)`;
  const columns = 'SourceId, ServiceName, ResourceAttributes, Attributes, StartTimeUnix, TimeUnix, MetricName';
  await storage.query(`INSERT INTO otel.otel_metrics_gauge (${columns}, Value) SELECT ${common}, 'process.cpu.utilization', (cityHash64(k, serie, svc) % 100) / 100 ${series}`);
  await storage.query(`INSERT INTO otel.otel_metrics_sum (${columns}, Value, AggregationTemporality, IsMonotonic)
    SELECT ${common}, 'http.server.requests', k * (10 + serie), 2, true ${series}`);
  await storage.query(`INSERT INTO otel.otel_metrics_histogram (${columns}, Count, Sum, BucketCounts, ExplicitBounds, AggregationTemporality)
    SELECT ${common}, 'http.server.duration', k * 100, k * 4200, arrayMap(w -> k * w, [5, 20, 30, 25, 10, 6, 3, 1, 0]), [5, 10, 25, 50, 100, 250, 500, 1000], 2 ${series}`);
  await storage.query(`INSERT INTO otel.agent_metrics (SourceId, Timestamp, Host, Service, MetricName, MetricType, Unit, Value)
    SELECT ${src('h')}, fromUnixTimestamp64Nano(toInt64(${startNs} + k * 10000000000)), concat('node-', toString(h)), 'node-agent', 'net.bytes', 'counter', 'By', k * 1000
    FROM (SELECT number % 360 AS k, intDiv(number, 360) AS h FROM numbers(${360 * 100}))`);
  await storage.query(`INSERT INTO otel.agent_heartbeats (SourceId, AgentId, LastSeen, Host, Version, Os, Arch, Status)
    SELECT ${src('a')}, concat('agent-', toString(a)), fromUnixTimestamp64Milli(toInt64(${to} - k * 60000)), concat('node-', toString(a)), '1.4.2', 'linux', 'amd64', 'ok'
    FROM (SELECT number % 60 AS k, intDiv(number, 60) AS a FROM numbers(${60 * 200}))`);
  await storage.query(`INSERT INTO otel.deploy_markers (SourceId, Timestamp, Service, Version, Environment)
    SELECT ${src('number')}, fromUnixTimestamp64Milli(toInt64(${from} + number * 90000)), concat('svc-', toString(number % 20)), concat('1.', toString(number)), 'prod'
    FROM numbers(40)`);
  for (const table of ['otel_traces', 'otel_traces_trace_id_ts', 'otel_logs', 'agent_logs', 'otel_metrics_gauge', 'otel_metrics_sum', 'otel_metrics_histogram', 'agent_metrics', 'agent_heartbeats']) {
    await storage.query(`OPTIMIZE TABLE otel.${table} FINAL`);
  }
}
