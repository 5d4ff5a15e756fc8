/**
 * Schema migrations: an ordered list of versioned steps (storage/schema.ts), applied once each
 * and recorded in <db>.sluice_schema_migrations. Every statement is idempotent
 * (IF NOT EXISTS), or a step that converts existing tables is given the tables as they are and
 * emits only what is left, so a step interrupted half way is simply run again.
 *
 * Two processes running migrate at once (two `sluice migrate`, or consumers started with
 * migrateOnStart) is safe without a lock: the server serialises DDL on one table name, so the
 * second CREATE ... IF NOT EXISTS finds the table and does nothing, and the ledger is read as a
 * set, so a version both runs recorded is harmless. (ClickHouse has no advisory lock that
 * spans a cluster, and a lock table would need the cleanup a crashed holder never does.) A step
 * that swaps tables (5) checks the result before it is recorded: two runs that interleave fail
 * rather than record a half-done step, and the next run finishes it.
 *
 * On a cluster the ledger follows the tables (ON CLUSTER, Replicated): each shard's replicas
 * share one. A node whose ledger misses a version re-runs its idempotent statements.
 */
import { MIGRATIONS, onClusterClause, tableEngine, validateSchemaOptions, type Migration, type SchemaOptions } from './schema.ts';
import { quoteIdentifier, quoteString } from './storage.ts';

export interface SqlRunner {
  query(sql: string, format?: string): Promise<string>;
}

export interface MigrationReport {
  applied: Array<{ version: number; name: string }>;
  current: number;
}

/**
 * Brings `database` up to the newest of `migrations` (default: all of Sluice's); `options` shape
 * every CREATE (default: embedded DDL).
 */
export async function migrate(
  runner: SqlRunner,
  database: string,
  options: SchemaOptions = {},
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<MigrationReport> {
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
  const tables = async () => new Map(
    (await runner.query(`SELECT name, engine FROM system.tables WHERE database = ${quoteString(database)}`, 'JSONEachRow'))
      .split('\n')
      .filter(Boolean)
      .map((line): [string, string] => {
        const { name, engine } = JSON.parse(line) as { name: string; engine: string };
        return [name, engine];
      }),
  );
  const applied: MigrationReport['applied'] = [];
  for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
    if (done.has(migration.version)) continue;
    for (const statement of migration.statements(database, options, await tables())) await runner.query(statement);
    const problem = migration.verify?.(await tables());
    if (problem) {
      throw new Error(`migration ${migration.version} (${migration.name}) is not complete: ${problem}; was another migrate running? Run it again`);
    }
    await runner.query(
      `INSERT INTO ${ledger} (version, name) VALUES (${migration.version}, '${migration.name.replaceAll("'", '')}')`,
    );
    applied.push({ version: migration.version, name: migration.name });
  }
  const current = Math.max(0, ...done, ...applied.map((m) => m.version));
  return { applied, current };
}

