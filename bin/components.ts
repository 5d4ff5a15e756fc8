/**
 * Drivers chosen from the config: each part has one interface and an embedded and a cluster
 * driver (DESIGN.md, "Two modes, one code path"). Only the composition root calls these.
 */
import type { SluiceConfig } from '../core/config.ts';
import type { Logger } from '../core/log.ts';
import { ChdbStorage } from '../storage/chdb.ts';
import { ClickhouseServerStorage } from '../storage/clickhouse.ts';
import { TABLE_COLUMNS, type SchemaOptions, type TableName } from '../storage/schema.ts';
import type { Storage } from '../storage/storage.ts';

/** How `sluice migrate` (and an embedded start) creates the tables. */
export function schemaOptions(config: Readonly<SluiceConfig>): SchemaOptions {
  const options: SchemaOptions = {};
  if (config.clickhouse.cluster) options.cluster = config.clickhouse.cluster;
  if (config.clickhouse.replicated) options.replicated = true;
  if (config.storage.ttlDays > 0) {
    options.ttlDays = Object.fromEntries(Object.keys(TABLE_COLUMNS).map((table) => [table, config.storage.ttlDays])) as Record<TableName, number>;
  }
  return options;
}

export interface StorageChoice {
  /**
   * Create or upgrade the schema in start(). The embedded engine always does; a server does
   * only for `sluice serve` (one process) — cluster consumers leave it to `sluice migrate`,
   * so they do not race each other.
   */
  migrateOnStart: boolean;
}

/** chDB under the data dir, or a ClickHouse server when CLICKHOUSE_URL is set. */
export function createStorage(config: Readonly<SluiceConfig>, choice: StorageChoice): Storage {
  const schema = schemaOptions(config);
  if (!config.clickhouse.url) return new ChdbStorage(config.dataDir, config.storage.database, schema);
  return new ClickhouseServerStorage({
    url: config.clickhouse.url,
    database: config.storage.database,
    migrateOnStart: choice.migrateOnStart,
    schema,
  });
}

/** Logs which storage runs, once it started; warns where a server cannot deduplicate. */
export function announceStorage(storage: Storage, log: Logger): void {
  if (!(storage instanceof ClickhouseServerStorage)) return;
  log.info({ clickhouse: storage.safeUrl, version: storage.serverVersion }, 'storage: ClickHouse server');
  if (!storage.dedupTokens) {
    log.warn({ version: storage.serverVersion }, 'this ClickHouse server has no insert_deduplication_token: a redelivered batch may be stored twice');
  }
}
