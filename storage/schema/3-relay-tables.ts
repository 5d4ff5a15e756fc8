/** Migration 3: relay submissions and delivery jobs. */
import type { TableName } from '../tables.ts';
import { relayDeliveryJobsTable, relaySubmissionsTable, tableSql } from './ddl.ts';
import type { Migration } from './migration.ts';

export const migration3: Migration = {
  version: 3,
  name: 'relay submissions and delivery jobs',
  statements(db, options) {
    const ttl = (table: TableName, column: string) => ({ column: `toDateTime(${column})`, days: options.ttlDays?.[table] });
    return [
      relaySubmissionsTable(tableSql(db, 'relay_submissions', options, ttl('relay_submissions', 'ReceivedAt'))),
      relayDeliveryJobsTable(tableSql(db, 'relay_delivery_jobs', options, ttl('relay_delivery_jobs', 'CreatedAt'))),
    ];
  },
};
