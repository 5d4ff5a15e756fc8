/** Migration 6: ingest counts per source. */
import { createTable, ingestCountsTable, tableEngine } from './ddl.ts';
import type { Migration } from './migration.ts';

export const migration6: Migration = {
  version: 6,
  name: 'ingest counts per source',
  statements(db, options) {
    const ttl = { column: 'Timestamp', days: options.ttlDays?.ingest_counts };
    return createTable(db, 'ingest_counts', options, ingestCountsTable, ttl, tableEngine(options, 'SummingMergeTree', '(Requests, Items)'));
  },
};
