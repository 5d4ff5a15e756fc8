/** Migration 1: otel exporter tables with SourceId. */
import { quoteIdentifier } from '../storage.ts';
import type { TableName } from '../tables.ts';
import { createTable, logsTable, METRIC_TYPE_COLUMNS, metricsTable, onClusterClause, storedName, traceIdTsTable, traceIdTsView, tracesTable } from './ddl.ts';
import type { Migration } from './migration.ts';

export const migration1: Migration = {
  version: 1,
  name: 'otel exporter tables with SourceId',
  statements(db, options) {
    const q = (table: string) => `${quoteIdentifier(db)}.${quoteIdentifier(table)}`;
    const days = (table: TableName) => options.ttlDays?.[table];
    const metrics = Object.entries(METRIC_TYPE_COLUMNS).flatMap(([table, columns]) =>
      createTable(db, table as TableName, options, (t) => metricsTable(t, table as TableName, columns), { column: 'TimeUnix', days: days(table as TableName) }),
    );
    return [
      ...createTable(db, 'otel_traces', options, tracesTable, { column: 'toDateTime(Timestamp)', days: days('otel_traces') }),
      // The trace id lookup lives as long as the spans it points to.
      ...createTable(db, 'otel_traces_trace_id_ts', options, traceIdTsTable, { column: 'toDateTime(Start)', days: days('otel_traces') }),
      // Distributed: the view runs on every node, from the spans stored there into the lookup stored there.
      traceIdTsView(q('otel_traces_trace_id_ts_mv'), onClusterClause(options), q(storedName('otel_traces_trace_id_ts', options)), q(storedName('otel_traces', options))),
      ...createTable(db, 'otel_logs', options, logsTable, { column: 'toDateTime(Timestamp)', days: days('otel_logs') }),
      ...metrics,
    ];
  },
};
