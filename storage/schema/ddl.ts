/**
 * The CREATE statements of the schema: the OpenTelemetry Collector ClickHouse exporter's tables
 * (column names, types, codecs, indexes, partitioning, engines and sort keys as in its
 * internal/sqltemplates, bloom filter variant, no TTL), with one addition: `SourceId
 * LowCardinality(String)` on every telemetry table, first in every sort key, so each source's
 * data is stored and pruned together. The agent API's tables do the same; the relay's tables
 * put `TenantId` first. docs/reference/storage.md lists every difference from the exporter's layout.
 * Each is shaped by SchemaOptions (cluster, replication, TTL) and used by the migrations.
 */
import { quoteIdentifier, quoteString } from '../storage.ts';
import { PARTITIONS, TABLE_COLUMNS, type AgentTableName, type RelayTableName, type TableName } from '../tables.ts';

/** `PARTITION BY <key>` of a table, from PARTITIONS. */
function partitionBy(table: TableName): string {
  const { column, by } = PARTITIONS[table]!;
  return `PARTITION BY ${by === 'day' ? 'toDate' : 'toYYYYMM'}(${column})`;
}

const MAP = 'Map(LowCardinality(String), String)';

/** How the tables are created. The defaults are the embedded engine's plain MergeTree tables. */
export interface SchemaOptions {
  /** Adds `ON CLUSTER <name>` to every CREATE, so one statement reaches every node. Default: none. */
  cluster?: string;
  /** ReplicatedMergeTree (Keeper path {@link REPLICA_PATH}, replica `{replica}`) instead of MergeTree. Default false. */
  replicated?: boolean;
  /**
   * Days to keep each table's rows (a TTL on Timestamp; TimeUnix for metrics). A table left out
   * keeps its rows forever. Default {}. Applied when a table is created: `ALTER TABLE ... MODIFY
   * TTL` changes an existing one.
   */
  ttlDays?: Partial<Record<TableName, number>>;
  /**
   * Shards every table over the cluster: its rows live in `<table>_local` on every node, and
   * `<table>` is a Distributed table over them that inserts and reads go to, so every query in
   * Sluice keeps its plain name. Needs `cluster`. Default false.
   */
  distributed?: boolean;
}

/** Every table a Distributed table is made for: Sluice's tables, the trace id lookup and the migration ledger. */
export type ShardedTable = TableName | 'otel_traces_trace_id_ts' | 'sluice_schema_migrations';

/** The name a table's rows are stored under: `<table>_local` in distributed mode, else the table's own. */
export function storedName(table: ShardedTable, options: SchemaOptions): string {
  return options.distributed ? `${table}_local` : table;
}

const METRIC_SERIES = 'cityHash64(SourceId, ServiceName, MetricName, ResourceAttributes, Attributes)';

/**
 * Which shard a row goes to. Always a hash of the row's own columns, never rand(): a batch
 * inserted again after a redelivery must split into the same rows per shard, or a shard would
 * not find its first copy under the batch's dedup token. Each key keeps together what must merge
 * on one shard or what is read together, and spreads a source's rows over the shards.
 */
export const SHARDING_KEYS: Readonly<Record<ShardedTable, string>> = {
  // A trace on one shard: its lookup rows too (the view runs on each shard's own spans), so they
  // merge into one per trace and week, and a trace is read whole from one shard.
  otel_traces: 'cityHash64(TraceId)',
  otel_traces_trace_id_ts: 'cityHash64(TraceId)',
  // A log record of a trace beside the trace's spans (the same hash); the others spread over
  // the shards by time, so one busy service does not make one shard hot.
  otel_logs: "if(TraceId = '', cityHash64(SourceId, ServiceName, Timestamp), cityHash64(TraceId))",
  // One series (resource, metric, attributes) on one shard: a rate or last value is computed
  // there, and a source's many series spread.
  otel_metrics_gauge: METRIC_SERIES,
  otel_metrics_sum: METRIC_SERIES,
  otel_metrics_histogram: METRIC_SERIES,
  otel_metrics_exp_histogram: METRIC_SERIES,
  otel_metrics_summary: METRIC_SERIES,
  agent_logs: 'cityHash64(SourceId, Service, Host, Timestamp)',
  agent_metrics: 'cityHash64(SourceId, MetricName, Host, Service, Attributes)',
  // Replacing and summing tables merge rows of one key on one shard only: an agent's reports,
  // a source's counts.
  agent_heartbeats: 'cityHash64(SourceId, AgentId)',
  ingest_counts: 'cityHash64(SourceId)',
  // Few rows, read by source and time.
  deploy_markers: 'cityHash64(SourceId)',
  // A tenant's submissions, jobs and attempts on one shard: a job's history is read together.
  relay_submissions: 'cityHash64(TenantId)',
  relay_delivery_jobs: 'cityHash64(TenantId)',
  relay_delivery_attempts: 'cityHash64(TenantId)',
  sluice_schema_migrations: 'version',
};

/** The Keeper path of a replicated table; the server fills in the macros per node and table. */
export const REPLICA_PATH = '/clickhouse/tables/{shard}/{database}/{table}';

/** Refuses options that would produce invalid or injected SQL, naming every problem. */
export function validateSchemaOptions(options: SchemaOptions): void {
  const problems: string[] = [];
  if (options.cluster !== undefined && !/^[A-Za-z0-9_.{}-]+$/.test(options.cluster)) {
    problems.push('cluster: must be a cluster name (letters, digits, _ . - and {macros})');
  }
  if (options.distributed && options.cluster === undefined) problems.push('distributed: needs a cluster (the Distributed tables name it)');
  for (const [table, days] of Object.entries(options.ttlDays ?? {})) {
    if (!(table in TABLE_COLUMNS)) problems.push(`ttlDays.${table}: not a Sluice table`);
    else if (!Number.isSafeInteger(days) || days! < 1) problems.push(`ttlDays.${table}: must be a whole number of days >= 1`);
  }
  if (problems.length > 0) throw new Error(`invalid schema options: ${problems.join('; ')}`);
}

/** ` ON CLUSTER <name>` for every CREATE when a cluster is set, else nothing. */
export function onClusterClause(options: SchemaOptions): string {
  return options.cluster === undefined ? '' : ` ON CLUSTER ${quoteIdentifier(options.cluster)}`;
}

/**
 * The table engine for the options: one replica set per shard when replicated. `family` picks
 * a MergeTree variant (Replacing...) and `args` its own parameters.
 */
export function tableEngine(options: SchemaOptions, family = 'MergeTree', args = ''): string {
  if (options.replicated) return `Replicated${family}('${REPLICA_PATH}', '{replica}'${args ? `, ${args}` : ''})`;
  return args ? `${family}(${args})` : family;
}

/**
 * non_replicated_deduplication_window: a plain MergeTree remembers the dedup tokens of its
 * last 1000 inserts, so a bus batch inserted again after a redelivery is dropped, not doubled.
 * Replicated tables keep their tokens in Keeper (replicated_deduplication_window) by default.
 */
const SETTINGS = 'SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, non_replicated_deduplication_window = 1000';
const REPLICATED_SETTINGS = 'SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1';

/**
 * The Distributed table of the plain name over `<table>_local` (created just before it, ON
 * CLUSTER like it: every node has both). Its columns are the local table's.
 */
export function distributedTable(db: string, table: ShardedTable, options: SchemaOptions): string {
  const local = storedName(table, options);
  return `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(db)}.${quoteIdentifier(table)}${onClusterClause(options)} AS ${quoteIdentifier(db)}.${quoteIdentifier(local)}
ENGINE = Distributed(${quoteString(options.cluster!)}, ${quoteString(db)}, ${quoteString(local)}, ${SHARDING_KEYS[table]})`;
}

/**
 * A table's CREATE statements: the table (`<table>_local` in distributed mode, with its
 * Distributed table after it). `build` is the table's DDL from ddl.ts, given its TableSql.
 */
export function createTable(
  db: string,
  table: ShardedTable,
  options: SchemaOptions,
  build: (t: TableSql) => string,
  ttl?: TtlColumn,
  engine?: string,
): string[] {
  const created = build(tableSql(db, storedName(table, options), options, ttl, engine));
  return options.distributed ? [created, distributedTable(db, table, options)] : [created];
}

/** A TTL on `column` of `days`, or none when days is undefined. */
export interface TtlColumn {
  column: string;
  days: number | undefined;
}

/** The parts of one CREATE TABLE that depend on SchemaOptions. */
interface TableSql {
  /** `CREATE TABLE IF NOT EXISTS db.table [ON CLUSTER c]` */
  create: string;
  engine: string;
  /** `TTL <expr> + toIntervalDay(N)` and a newline, or nothing. */
  ttl: string;
  settings: string;
}

export function tableSql(
  db: string,
  table: string,
  options: SchemaOptions,
  ttl?: TtlColumn,
  engine = tableEngine(options),
): TableSql {
  return {
    create: `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(db)}.${quoteIdentifier(table)}${onClusterClause(options)}`,
    engine,
    ttl: ttl?.days === undefined ? '' : `TTL ${ttl.column} + toIntervalDay(${ttl.days})\n`,
    settings: options.replicated ? REPLICATED_SETTINGS : SETTINGS,
  };
}

export function tracesTable(t: TableSql): string {
  return `${t.create} (
    SourceId LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes ${MAP} CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes ${MAP} CODEC(ZSTD(1)),
    Duration UInt64 CODEC(T64, ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes ${MAP}
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes ${MAP}
    ) CODEC(ZSTD(1)),
    ResourceAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(ResourceAttributes, 'Array(Tuple(String, String))')),
    SpanAttributeItems Array(String) ALIAS arrayMap(kv -> concat(kv.1, '=', kv.2), CAST(SpanAttributes, 'Array(Tuple(String, String))')),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = ${t.engine}
${partitionBy('otel_traces')}
PRIMARY KEY (SourceId, ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (SourceId, ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
${t.ttl}${t.settings}`;
}

/**
 * Trace id → first and last span start, so a trace can be found without a full scan. Start and
 * End are SimpleAggregateFunction(min/max): on AggregatingMergeTree (migration 5, as the exporter
 * has it) a trace's rows of one week merge into one; on the MergeTree of migration 1 every
 * insert added one. Readers take min(Start) and max(End) either way.
 */
export function traceIdTsTable(t: TableSql): string {
  return `${t.create} (
    SourceId LowCardinality(String) CODEC(ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime) CODEC(ZSTD(1)),
    End SimpleAggregateFunction(max, DateTime) CODEC(ZSTD(1))
) ENGINE = ${t.engine}
PARTITION BY toStartOfWeek(Start)
ORDER BY (SourceId, TraceId)
${t.ttl}${t.settings}`;
}

/** Fills the trace id lookup from every insert into otel_traces. */
export function traceIdTsView(view: string, onCluster: string, target: string, source: string): string {
  return `CREATE MATERIALIZED VIEW IF NOT EXISTS ${view}${onCluster} TO ${target}
AS SELECT SourceId, TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM ${source}
WHERE TraceId != ''
GROUP BY SourceId, TraceId`;
}

/** The Kubernetes and deployment keys the exporter materialises out of ResourceAttributes. */
const MATERIALIZED_RESOURCE_KEYS = [
  'k8s.cluster.name', 'k8s.container.name', 'k8s.deployment.name', 'k8s.namespace.name',
  'k8s.node.name', 'k8s.pod.name', 'k8s.pod.uid', 'deployment.environment.name',
];

export function logsTable(t: TableSql): string {
  const materialized = MATERIALIZED_RESOURCE_KEYS.map(
    (key) => `    \`__otel_materialized_${key}\` LowCardinality(String) MATERIALIZED ResourceAttributes['${key}'] CODEC(ZSTD(1)),`,
  ).join('\n');
  return `${t.create} (
    SourceId LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    TraceFlags UInt8,
    SeverityText LowCardinality(String) CODEC(ZSTD(1)),
    SeverityNumber UInt8,
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    Body String CODEC(ZSTD(1)),
    ResourceSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes ${MAP} CODEC(ZSTD(1)),
    ScopeSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion LowCardinality(String) CODEC(ZSTD(1)),
    ScopeAttributes ${MAP} CODEC(ZSTD(1)),
    LogAttributes ${MAP} CODEC(ZSTD(1)),
    EventName String CODEC(ZSTD(1)),
${materialized}
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_key mapKeys(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_value mapValues(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_log_attr_key mapKeys(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_log_attr_value mapValues(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_lower_body lower(Body) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = ${t.engine}
${partitionBy('otel_logs')}
ORDER BY (SourceId, toStartOfFiveMinutes(Timestamp), ServiceName, Timestamp)
${t.ttl}${t.settings}`;
}

const EXEMPLARS_NESTED = `Exemplars Nested (
        FilteredAttributes ${MAP},
        TimeUnix DateTime,
        Value Float64,
        SpanId String,
        TraceId String
    ) CODEC(ZSTD(1)),`;

/** One metrics table: the shared columns around the point type's own `columns`. */
export function metricsTable(t: TableSql, table: TableName, columns: string): string {
  return `${t.create} (
    SourceId LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes ${MAP} CODEC(ZSTD(1)),
    ResourceSchemaUrl String CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    ScopeAttributes ${MAP} CODEC(ZSTD(1)),
    ScopeDroppedAttrCount UInt32 CODEC(ZSTD(1)),
    ScopeSchemaUrl String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    MetricName LowCardinality(String) CODEC(ZSTD(1)),
    MetricDescription String CODEC(ZSTD(1)),
    MetricUnit String CODEC(ZSTD(1)),
    Attributes ${MAP} CODEC(ZSTD(1)),
    StartTimeUnix DateTime CODEC(Delta, ZSTD(1)),
    TimeUnix DateTime CODEC(Delta, ZSTD(1)),
${columns}
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_key mapKeys(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_value mapValues(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_attr_key mapKeys(Attributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_attr_value mapValues(Attributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_time_minmax TimeUnix TYPE minmax GRANULARITY 1
) ENGINE = ${t.engine}
${partitionBy(table)}
ORDER BY (SourceId, ServiceName, MetricName, toStartOfHour(TimeUnix), cityHash64(Attributes), TimeUnix)
${t.ttl}${t.settings}`;
}

export const METRIC_TYPE_COLUMNS: Record<Exclude<TableName, 'otel_traces' | 'otel_logs' | 'ingest_counts' | AgentTableName | RelayTableName>, string> = {
  otel_metrics_gauge: `    Value Float64 CODEC(ZSTD(1)),
    Flags UInt32 CODEC(ZSTD(1)),
    ${EXEMPLARS_NESTED}`,
  otel_metrics_sum: `    Value Float64 CODEC(ZSTD(1)),
    Flags UInt32 CODEC(ZSTD(1)),
    ${EXEMPLARS_NESTED}
    AggregationTemporality Int32 CODEC(ZSTD(1)),
    IsMonotonic Boolean CODEC(Delta, ZSTD(1)),`,
  otel_metrics_histogram: `    Count UInt64 CODEC(Delta, ZSTD(1)),
    Sum Float64 CODEC(ZSTD(1)),
    BucketCounts Array(UInt64) CODEC(ZSTD(1)),
    ExplicitBounds Array(Float64) CODEC(ZSTD(1)),
    ${EXEMPLARS_NESTED}
    Flags UInt32 CODEC(ZSTD(1)),
    Min Float64 CODEC(ZSTD(1)),
    Max Float64 CODEC(ZSTD(1)),
    AggregationTemporality Int32 CODEC(ZSTD(1)),`,
  otel_metrics_exp_histogram: `    Count UInt64 CODEC(Delta, ZSTD(1)),
    Sum Float64 CODEC(ZSTD(1)),
    Scale Int32 CODEC(ZSTD(1)),
    ZeroCount UInt64 CODEC(ZSTD(1)),
    PositiveOffset Int32 CODEC(ZSTD(1)),
    PositiveBucketCounts Array(UInt64) CODEC(ZSTD(1)),
    NegativeOffset Int32 CODEC(ZSTD(1)),
    NegativeBucketCounts Array(UInt64) CODEC(ZSTD(1)),
    ${EXEMPLARS_NESTED}
    Flags UInt32 CODEC(ZSTD(1)),
    Min Float64 CODEC(ZSTD(1)),
    Max Float64 CODEC(ZSTD(1)),
    AggregationTemporality Int32 CODEC(ZSTD(1)),`,
  otel_metrics_summary: `    Count UInt64 CODEC(Delta, ZSTD(1)),
    Sum Float64 CODEC(ZSTD(1)),
    ValueAtQuantiles Nested (
        Quantile Float64,
        Value Float64
    ) CODEC(ZSTD(1)),
    Flags UInt32 CODEC(ZSTD(1)),`,
};

/** Agent log entries (POST /api/v1/ingest): one row per entry. */
export function agentLogsTable(t: TableSql): string {
  return `${t.create} (
    SourceId LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    ObservedTimestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    Host LowCardinality(String) CODEC(ZSTD(1)),
    Service LowCardinality(String) CODEC(ZSTD(1)),
    Level LowCardinality(String) CODEC(ZSTD(1)),
    SeverityNumber UInt8,
    Message String CODEC(ZSTD(1)),
    Attributes ${MAP} CODEC(ZSTD(1)),
    INDEX idx_attr_key mapKeys(Attributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_attr_value mapValues(Attributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_lower_message lower(Message) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = ${t.engine}
${partitionBy('agent_logs')}
ORDER BY (SourceId, Service, Host, Timestamp)
${t.ttl}${t.settings}`;
}

/** Agent metric points (POST /api/v1/metrics/ingest). */
export function agentMetricsTable(t: TableSql): string {
  return `${t.create} (
    SourceId LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    Host LowCardinality(String) CODEC(ZSTD(1)),
    Service LowCardinality(String) CODEC(ZSTD(1)),
    MetricName LowCardinality(String) CODEC(ZSTD(1)),
    MetricType LowCardinality(String) CODEC(ZSTD(1)),
    Unit LowCardinality(String) CODEC(ZSTD(1)),
    Value Float64 CODEC(ZSTD(1)),
    Attributes ${MAP} CODEC(ZSTD(1)),
    INDEX idx_attr_key mapKeys(Attributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_attr_value mapValues(Attributes) TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = ${t.engine}
${partitionBy('agent_metrics')}
ORDER BY (SourceId, MetricName, Host, Timestamp)
${t.ttl}${t.settings}`;
}

/**
 * Agent heartbeats: every report is a row; ReplacingMergeTree keeps, per agent, the one with
 * the latest LastSeen when parts merge (read the latest state with FINAL or argMax).
 */
export function agentHeartbeatsTable(t: TableSql): string {
  return `${t.create} (
    SourceId LowCardinality(String) CODEC(ZSTD(1)),
    AgentId String CODEC(ZSTD(1)),
    LastSeen DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    Host LowCardinality(String) CODEC(ZSTD(1)),
    Version LowCardinality(String) CODEC(ZSTD(1)),
    Os LowCardinality(String) CODEC(ZSTD(1)),
    Arch LowCardinality(String) CODEC(ZSTD(1)),
    Status LowCardinality(String) CODEC(ZSTD(1)),
    StartedAt Nullable(DateTime64(9)),
    Attributes ${MAP} CODEC(ZSTD(1))
) ENGINE = ${t.engine}
ORDER BY (SourceId, AgentId)
${t.ttl}${t.settings}`;
}

/** Deployment markers (POST /api/v1/webhooks/deploy), read by time range to overlay charts. */
export function deployMarkersTable(t: TableSql): string {
  return `${t.create} (
    SourceId LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    Service LowCardinality(String) CODEC(ZSTD(1)),
    Version String CODEC(ZSTD(1)),
    Environment LowCardinality(String) CODEC(ZSTD(1)),
    Commit String CODEC(ZSTD(1)),
    DeployedBy String CODEC(ZSTD(1)),
    Description String CODEC(ZSTD(1)),
    Url String CODEC(ZSTD(1)),
    Attributes ${MAP} CODEC(ZSTD(1))
) ENGINE = ${t.engine}
${partitionBy('deploy_markers')}
ORDER BY (SourceId, Timestamp, Service)
${t.ttl}${t.settings}`;
}

/**
 * Relay submissions (POST /api/v1/submissions and /notifications): one row each, listed per
 * form newest first. Data is the submitted object as JSON; Subject and Body are a notification's
 * sanitised own text (empty for a form submission, whose messages come from the form's template).
 */
export function relaySubmissionsTable(t: TableSql): string {
  return `${t.create} (
    TenantId LowCardinality(String) CODEC(ZSTD(1)),
    SiteId LowCardinality(String) CODEC(ZSTD(1)),
    FormId LowCardinality(String) CODEC(ZSTD(1)),
    SubmissionId UUID,
    Kind LowCardinality(String) CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    Data String CODEC(ZSTD(1)),
    Subject String CODEC(ZSTD(1)),
    Body String CODEC(ZSTD(1)),
    Ip String CODEC(ZSTD(1)),
    Origin String CODEC(ZSTD(1)),
    UserAgent String CODEC(ZSTD(1)),
    ApiKeyId String CODEC(ZSTD(1)),
    Jobs UInt32
) ENGINE = ${t.engine}
${partitionBy('relay_submissions')}
ORDER BY (TenantId, SiteId, FormId, ReceivedAt)
${t.ttl}${t.settings}`;
}

/**
 * Delivery jobs, one per (submission, channel, destination), written with their submission: a
 * job is queued once its row is durable. Destination is an address, or a webhook's id. Subject
 * and Body are set for jobs that carry their own message (tenant discovery).
 */
export function relayDeliveryJobsTable(t: TableSql): string {
  return `${t.create} (
    TenantId LowCardinality(String) CODEC(ZSTD(1)),
    JobId UUID,
    SubmissionId String CODEC(ZSTD(1)),
    Kind LowCardinality(String) CODEC(ZSTD(1)),
    Channel LowCardinality(String) CODEC(ZSTD(1)),
    Destination String CODEC(ZSTD(1)),
    Subject String CODEC(ZSTD(1)),
    Body String CODEC(ZSTD(1)),
    CreatedAt DateTime64(9) CODEC(Delta(8), ZSTD(1))
) ENGINE = ${t.engine}
${partitionBy('relay_delivery_jobs')}
ORDER BY (TenantId, CreatedAt, JobId)
${t.ttl}${t.settings}`;
}

/**
 * The history of delivery (delivery/worker.ts): one row when an attempt starts (`sending`) and
 * one when it ends (`delivered`, `failed` with its NextAttemptAt, or `dead`), and a `queued` row
 * (Attempt 0) when a manual retry starts a new series. A job's state is its latest row's; a job
 * without rows is queued. The work itself is on the delivery queue, not here.
 */
export function relayDeliveryAttemptsTable(t: TableSql): string {
  return `${t.create} (
    TenantId LowCardinality(String) CODEC(ZSTD(1)),
    JobId UUID,
    SubmissionId String CODEC(ZSTD(1)),
    FormId LowCardinality(String) CODEC(ZSTD(1)),
    Channel LowCardinality(String) CODEC(ZSTD(1)),
    Destination String CODEC(ZSTD(1)),
    Series UInt32,
    Attempt UInt32,
    State LowCardinality(String),
    At DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    DurationMs UInt32,
    Error String CODEC(ZSTD(1)),
    ProviderStatus String CODEC(ZSTD(1)),
    NextAttemptAt DateTime64(9) CODEC(Delta(8), ZSTD(1))
) ENGINE = ${t.engine}
${partitionBy('relay_delivery_attempts')}
ORDER BY (TenantId, JobId, Series, Attempt, At)
${t.ttl}${t.settings}`;
}

/**
 * What the front ends took in (pipeline/ingest-tally.ts): requests and items per source, signal,
 * outcome and refusal reason, in 10-second buckets. Every gateway adds its own rows for the same
 * bucket; SummingMergeTree adds them up as parts merge (readers still sum: merging is eventual).
 * SourceId is empty for requests refused before their source was known (no key, a bad key, rate
 * limited).
 */
export function ingestCountsTable(t: TableSql): string {
  return `${t.create} (
    SourceId LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime CODEC(Delta(4), ZSTD(1)),
    Signal LowCardinality(String) CODEC(ZSTD(1)),
    Outcome LowCardinality(String) CODEC(ZSTD(1)),
    Reason LowCardinality(String) CODEC(ZSTD(1)),
    Requests UInt64 CODEC(ZSTD(1)),
    Items UInt64 CODEC(ZSTD(1))
) ENGINE = ${t.engine}
${partitionBy('ingest_counts')}
ORDER BY (SourceId, Signal, Outcome, Reason, Timestamp)
${t.ttl}${t.settings}`;
}
