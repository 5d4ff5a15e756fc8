/** Migration 3: relay submissions and delivery jobs. */
import type { TableName } from '../tables.ts';
import { createTable, relayDeliveryJobsTable, relaySubmissionsTable } from './ddl.ts';
import type { Migration } from './migration.ts';

export const migration3: Migration = {
  version: 3,
  name: 'relay submissions and delivery jobs',
  statements(db, options) {
    const ttl = (table: TableName, column: string) => ({ column: `toDateTime(${column})`, days: options.ttlDays?.[table] });
    return [
      ...createTable(db, 'relay_submissions', options, relaySubmissionsTable, ttl('relay_submissions', 'ReceivedAt')),
      ...createTable(db, 'relay_delivery_jobs', options, relayDeliveryJobsTable, ttl('relay_delivery_jobs', 'CreatedAt')),
    ];
  },
};
