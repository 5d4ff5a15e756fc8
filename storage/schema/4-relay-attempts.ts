/** Migration 4: relay delivery attempts. */
import { createTable, relayDeliveryAttemptsTable } from './ddl.ts';
import type { Migration } from './migration.ts';

export const migration4: Migration = {
  version: 4,
  name: 'relay delivery attempts',
  statements(db, options) {
    return createTable(db, 'relay_delivery_attempts', options, relayDeliveryAttemptsTable, { column: 'toDateTime(At)', days: options.ttlDays?.relay_delivery_attempts });
  },
};
