/**
 * Schema migrations: an ordered list of versioned steps (storage/schema.ts), applied once each
 * and recorded in <db>.sluice_schema_migrations. Every statement is idempotent
 * (IF NOT EXISTS), so a step interrupted half way is simply run again.
 *
 * Two processes running migrate at once (two `sluice migrate`, or consumers started with
 * migrateOnStart) is safe without a lock: the server serialises DDL on one table name, so the
 * second CREATE ... IF NOT EXISTS finds the table and does nothing, and the ledger is read as a
 * set, so a version both runs recorded is harmless. (ClickHouse has no advisory lock that
 * spans a cluster, and a lock table would need the cleanup a crashed holder never does.)
 *
 * On a cluster the ledger follows the tables (ON CLUSTER, Replicated): each shard's replicas
 * share one. A node whose ledger misses a version re-runs its idempotent statements.
 */
import { MIGRATIONS, onClusterClause, tableEngine, validateSchemaOptions, type SchemaOptions } from './schema.ts';
import { quoteIdentifier } from './storage.ts';

export interface SqlRunner {
  query(sql: string, format?: string): Promise<string>;
}

export interface MigrationReport {
  applied: Array<{ version: number; name: string }>;
  current: number;
}

/** Brings `database` up to the newest migration; `options` shape every CREATE (default: embedded DDL). */
export async function migrate(runner: SqlRunner, database: string, options: SchemaOptions = {}): Promise<MigrationReport> {
  validateSchemaOptions(options);
  const db = quoteIdentifier(database);
  const ledger = `${db}.${quoteIdentifier('sluice_schema_migrations')}`;
  const onCluster = onClusterClause(options);
  await runner.query(`CREATE DATABASE IF NOT EXISTS ${db}${onCluster}`);
  await runner.query(
    `CREATE TABLE IF NOT EXISTS ${ledger}${onCluster} (version UInt32, name String, applied_at DateTime DEFAULT now()) ` +
      `ENGINE = ${tableEngine(options)} ORDER BY version`,
  );
  const done = new Set(
    (await runner.query(`SELECT version FROM ${ledger}`, 'JSONEachRow'))
      .split('\n')
      .filter(Boolean)
      .map((line) => Number(JSON.parse(line).version)),
  );
  const applied: MigrationReport['applied'] = [];
  for (const migration of [...MIGRATIONS].sort((a, b) => a.version - b.version)) {
    if (done.has(migration.version)) continue;
    for (const statement of migration.statements(database, options)) await runner.query(statement);
    await runner.query(
      `INSERT INTO ${ledger} (version, name) VALUES (${migration.version}, '${migration.name.replaceAll("'", '')}')`,
    );
    applied.push({ version: migration.version, name: migration.name });
  }
  const current = Math.max(0, ...done, ...applied.map((m) => m.version));
  return { applied, current };
}

