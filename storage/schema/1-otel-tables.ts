/** Migration 1: otel exporter tables with SourceId. */
import { quoteIdentifier } from '../storage.ts';
import type { TableName } from '../tables.ts';
import { logsTable, METRIC_TYPE_COLUMNS, metricsTable, onClusterClause, tableSql, traceIdTsTable, traceIdTsView, tracesTable } from './ddl.ts';
import type { Migration } from './migration.ts';

export const migration1: Migration = {
  version: 1,
  name: 'otel exporter tables with SourceId',
  statements(db, options) {
    const q = (table: string) => `${quoteIdentifier(db)}.${quoteIdentifier(table)}`;
    const days = (table: TableName) => options.ttlDays?.[table];
    const metrics = Object.entries(METRIC_TYPE_COLUMNS).map(([table, columns]) =>
      metricsTable(tableSql(db, table, options, { column: 'TimeUnix', days: days(table as TableName) }), table as TableName, columns),
    );
    return [
      tracesTable(tableSql(db, 'otel_traces', options, { column: 'toDateTime(Timestamp)', days: days('otel_traces') })),
      // The trace id lookup lives as long as the spans it points to.
      traceIdTsTable(tableSql(db, 'otel_traces_trace_id_ts', options, { column: 'toDateTime(Start)', days: days('otel_traces') })),
      traceIdTsView(q('otel_traces_trace_id_ts_mv'), onClusterClause(options), q('otel_traces_trace_id_ts'), q('otel_traces')),
      logsTable(tableSql(db, 'otel_logs', options, { column: 'toDateTime(Timestamp)', days: days('otel_logs') })),
      ...metrics,
    ];
  },
};
