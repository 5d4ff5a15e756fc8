/**
 * The storage schema's face: the tables (tables.ts: names, columns, partitions), the options
 * that shape their CREATE statements (schema/ddl.ts), and the migrations, one file each under
 * schema/, applied in order by storage/migrate.ts. Every statement is idempotent (IF [NOT]
 * EXISTS), or emitted only while the state it changes is still there (migration 5).
 */
import { migration1 } from './schema/1-otel-tables.ts';
import { migration2 } from './schema/2-agent-tables.ts';
import { migration3 } from './schema/3-relay-tables.ts';
import { migration4 } from './schema/4-relay-attempts.ts';
import { migration5 } from './schema/5-trace-id-lookup-aggregating.ts';
import { migration6 } from './schema/6-ingest-counts.ts';
import type { Migration } from './schema/migration.ts';

export * from './tables.ts';
export {
  distributedTable, onClusterClause, REPLICA_PATH, SHARDING_KEYS, storedName, tableEngine, validateSchemaOptions, type SchemaOptions, type ShardedTable,
} from './schema/ddl.ts';
export type { Migration } from './schema/migration.ts';

export const MIGRATIONS: readonly Migration[] = [migration1, migration2, migration3, migration4, migration5, migration6];
