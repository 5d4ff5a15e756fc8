/** Migration 2: agent api tables. */
import type { TableName } from '../tables.ts';
import { agentHeartbeatsTable, agentLogsTable, agentMetricsTable, deployMarkersTable, tableEngine, tableSql } from './ddl.ts';
import type { Migration } from './migration.ts';

export const migration2: Migration = {
  version: 2,
  name: 'agent api tables',
  statements(db, options) {
    const days = (table: TableName) => options.ttlDays?.[table];
    const timeTtl = (table: TableName, column = 'Timestamp') => ({ column: `toDateTime(${column})`, days: days(table) });
    return [
      agentLogsTable(tableSql(db, 'agent_logs', options, timeTtl('agent_logs'))),
      agentMetricsTable(tableSql(db, 'agent_metrics', options, timeTtl('agent_metrics'))),
      agentHeartbeatsTable(tableSql(db, 'agent_heartbeats', options, timeTtl('agent_heartbeats', 'LastSeen'), tableEngine(options, 'ReplacingMergeTree', 'LastSeen'))),
      deployMarkersTable(tableSql(db, 'deploy_markers', options, timeTtl('deploy_markers'))),
    ];
  },
};
