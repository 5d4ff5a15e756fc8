/**
 * The tables' definitions as the rest of Sluice sees them: their names, the columns every
 * insert carries in order, and how they are partitioned. The CREATE statements that make them
 * are in schema/ddl.ts, applied by the migrations (schema.ts).
 *
 * TABLE_COLUMNS is the insert contract with the transcoder (pipeline/otlp): each RowBinary
 * row carries exactly these columns in this order, for
 * `INSERT INTO db.table (columns...) FORMAT RowBinary`. The order is ours, not the table's:
 * the per-request, per-resource and per-scope columns come first so the transcoder can
 * encode them once and copy them into every row.
 */
export type TableName =
  | 'otel_traces'
  | 'otel_logs'
  | 'otel_metrics_gauge'
  | 'otel_metrics_sum'
  | 'otel_metrics_histogram'
  | 'otel_metrics_exp_histogram'
  | 'otel_metrics_summary'
  | AgentTableName
  | RelayTableName
  | 'ingest_counts';

/** Tables of the notification relay (relay/, delivery/): its submissions, the delivery jobs they queued and every attempt. */
export type RelayTableName = 'relay_submissions' | 'relay_delivery_jobs' | 'relay_delivery_attempts';

/** Tables of the agent API (pipeline/agent): Sluice's own layout, not the exporter's. */
export type AgentTableName = 'agent_logs' | 'agent_metrics' | 'agent_heartbeats' | 'deploy_markers';

/**
 * The tables that hold telemetry: the exporter's (with the trace-id lookup its view fills), the
 * agent API's, and the count of rows per source. Not the relay's (what people typed into forms)
 * nor the migration ledger. The query endpoint (query/scope.ts) shows these and no others.
 */
export const TELEMETRY_TABLES: readonly string[] = [
  'otel_traces', 'otel_traces_trace_id_ts', 'otel_logs', 'otel_metrics_gauge', 'otel_metrics_sum', 'otel_metrics_histogram',
  'otel_metrics_exp_histogram', 'otel_metrics_summary', 'agent_logs', 'agent_metrics', 'agent_heartbeats', 'deploy_markers', 'ingest_counts',
] satisfies ReadonlyArray<TableName | 'otel_traces_trace_id_ts'>;

const EXEMPLAR_COLUMNS = [
  'Exemplars.FilteredAttributes',
  'Exemplars.TimeUnix',
  'Exemplars.Value',
  'Exemplars.SpanId',
  'Exemplars.TraceId',
] as const;

/** Columns every metrics table starts with: request, resource, scope, then metric level. */
const METRIC_PREFIX = [
  'SourceId',
  'ServiceName',
  'ResourceAttributes',
  'ResourceSchemaUrl',
  'ScopeName',
  'ScopeVersion',
  'ScopeAttributes',
  'ScopeDroppedAttrCount',
  'ScopeSchemaUrl',
  'MetricName',
  'MetricDescription',
  'MetricUnit',
] as const;

export const TABLE_COLUMNS: Readonly<Record<TableName, readonly string[]>> = {
  otel_traces: [
    'SourceId', 'ServiceName', 'ResourceAttributes', 'ScopeName', 'ScopeVersion',
    'Timestamp', 'TraceId', 'SpanId', 'ParentSpanId', 'TraceState', 'SpanName', 'SpanKind',
    'SpanAttributes', 'Duration', 'StatusCode', 'StatusMessage',
    'Events.Timestamp', 'Events.Name', 'Events.Attributes',
    'Links.TraceId', 'Links.SpanId', 'Links.TraceState', 'Links.Attributes',
  ],
  otel_logs: [
    'SourceId', 'ServiceName', 'ResourceAttributes', 'ResourceSchemaUrl',
    'ScopeName', 'ScopeVersion', 'ScopeAttributes', 'ScopeSchemaUrl',
    'Timestamp', 'TraceId', 'SpanId', 'TraceFlags', 'SeverityText', 'SeverityNumber',
    'Body', 'LogAttributes', 'EventName',
  ],
  otel_metrics_gauge: [
    ...METRIC_PREFIX,
    'Attributes', 'StartTimeUnix', 'TimeUnix', 'Value', 'Flags', ...EXEMPLAR_COLUMNS,
  ],
  otel_metrics_sum: [
    ...METRIC_PREFIX, 'AggregationTemporality', 'IsMonotonic',
    'Attributes', 'StartTimeUnix', 'TimeUnix', 'Value', 'Flags', ...EXEMPLAR_COLUMNS,
  ],
  otel_metrics_histogram: [
    ...METRIC_PREFIX, 'AggregationTemporality',
    'Attributes', 'StartTimeUnix', 'TimeUnix', 'Count', 'Sum', 'BucketCounts', 'ExplicitBounds',
    ...EXEMPLAR_COLUMNS, 'Flags', 'Min', 'Max',
  ],
  otel_metrics_exp_histogram: [
    ...METRIC_PREFIX, 'AggregationTemporality',
    'Attributes', 'StartTimeUnix', 'TimeUnix', 'Count', 'Sum', 'Scale', 'ZeroCount',
    'PositiveOffset', 'PositiveBucketCounts', 'NegativeOffset', 'NegativeBucketCounts',
    ...EXEMPLAR_COLUMNS, 'Flags', 'Min', 'Max',
  ],
  otel_metrics_summary: [
    ...METRIC_PREFIX,
    'Attributes', 'StartTimeUnix', 'TimeUnix', 'Count', 'Sum',
    'ValueAtQuantiles.Quantile', 'ValueAtQuantiles.Value', 'Flags',
  ],
  agent_logs: ['SourceId', 'Timestamp', 'ObservedTimestamp', 'Host', 'Service', 'Level', 'SeverityNumber', 'Message', 'Attributes'],
  agent_metrics: ['SourceId', 'Timestamp', 'Host', 'Service', 'MetricName', 'MetricType', 'Unit', 'Value', 'Attributes'],
  agent_heartbeats: ['SourceId', 'AgentId', 'LastSeen', 'Host', 'Version', 'Os', 'Arch', 'Status', 'StartedAt', 'Attributes'],
  deploy_markers: [
    'SourceId', 'Timestamp', 'Service', 'Version', 'Environment', 'Commit', 'DeployedBy', 'Description', 'Url', 'Attributes',
  ],
  relay_submissions: [
    'TenantId', 'SiteId', 'FormId', 'SubmissionId', 'Kind', 'ReceivedAt', 'Data', 'Subject', 'Body',
    'Ip', 'Origin', 'UserAgent', 'ApiKeyId', 'Jobs',
  ],
  relay_delivery_jobs: ['TenantId', 'JobId', 'SubmissionId', 'Kind', 'Channel', 'Destination', 'Subject', 'Body', 'CreatedAt'],
  relay_delivery_attempts: [
    'TenantId', 'JobId', 'SubmissionId', 'FormId', 'Channel', 'Destination', 'Series', 'Attempt', 'State',
    'At', 'DurationMs', 'Error', 'ProviderStatus', 'NextAttemptAt',
  ],
  ingest_counts: ['SourceId', 'Timestamp', 'Signal', 'Outcome', 'Reason', 'Requests', 'Items'],
};

/** How a table is partitioned: by the UTC day (`toDate`) or month (`toYYYYMM`) of a time column. */
export interface Partitioning {
  column: string;
  by: 'day' | 'month';
}

/**
 * Each table's partition key. The CREATE statements below are written from it, and the pipeline
 * counts the partitions of a request's rows by it (MAX_REQUEST_PARTITIONS); a table left out is
 * not partitioned. (otel_traces_trace_id_ts, filled by a view from otel_traces, is partitioned by
 * week: never more partitions than its spans have days.)
 */
export const PARTITIONS: Partial<Record<TableName, Partitioning>> = {
  otel_traces: { column: 'Timestamp', by: 'day' },
  otel_logs: { column: 'Timestamp', by: 'day' },
  otel_metrics_gauge: { column: 'TimeUnix', by: 'day' },
  otel_metrics_sum: { column: 'TimeUnix', by: 'day' },
  otel_metrics_histogram: { column: 'TimeUnix', by: 'day' },
  otel_metrics_exp_histogram: { column: 'TimeUnix', by: 'day' },
  otel_metrics_summary: { column: 'TimeUnix', by: 'day' },
  agent_logs: { column: 'Timestamp', by: 'day' },
  agent_metrics: { column: 'Timestamp', by: 'day' },
  deploy_markers: { column: 'Timestamp', by: 'month' },
  relay_submissions: { column: 'ReceivedAt', by: 'month' },
  relay_delivery_jobs: { column: 'CreatedAt', by: 'month' },
  relay_delivery_attempts: { column: 'At', by: 'month' },
  ingest_counts: { column: 'Timestamp', by: 'month' },
};

/**
 * The most partitions the rows of one request may fall into, per table: ClickHouse's default
 * max_partitions_per_insert_block, so what one request holds is what a stock ClickHouse takes in
 * one insert. A request over it is refused at the door (400); our own inserts, which combine
 * many requests, lift ClickHouse's limit (storage/chdb.ts, storage/clickhouse.ts).
 */
export const MAX_REQUEST_PARTITIONS = 100;
