/** Migration 2: agent api tables. */
import type { TableName } from '../tables.ts';
import { agentHeartbeatsTable, agentLogsTable, agentMetricsTable, createTable, deployMarkersTable, tableEngine } from './ddl.ts';
import type { Migration } from './migration.ts';

export const migration2: Migration = {
  version: 2,
  name: 'agent api tables',
  statements(db, options) {
    const days = (table: TableName) => options.ttlDays?.[table];
    const timeTtl = (table: TableName, column = 'Timestamp') => ({ column: `toDateTime(${column})`, days: days(table) });
    return [
      ...createTable(db, 'agent_logs', options, agentLogsTable, timeTtl('agent_logs')),
      ...createTable(db, 'agent_metrics', options, agentMetricsTable, timeTtl('agent_metrics')),
      ...createTable(db, 'agent_heartbeats', options, agentHeartbeatsTable, timeTtl('agent_heartbeats', 'LastSeen'), tableEngine(options, 'ReplacingMergeTree', 'LastSeen')),
      ...createTable(db, 'deploy_markers', options, deployMarkersTable, timeTtl('deploy_markers')),
    ];
  },
};
