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
 * share one. A node whose ledger misses a version re-runs its idempotent statements. In
 * distributed mode the ledger is sharded too, so it is one ledger for the whole cluster, read
 * through its Distributed table: a migration run from any node is recorded once and seen from
 * every node.
 */
import {
  distributedTable, MIGRATIONS, onClusterClause, SHARDING_KEYS, storedName, tableEngine, validateSchemaOptions, type Migration, type SchemaOptions,
} from './schema.ts';
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
  const tables = async () => new Map(
    (await runner.query(`SELECT name, engine FROM system.tables WHERE database = ${quoteString(database)}`, 'JSONEachRow'))
      .split('\n')
      .filter(Boolean)
      .map((line): [string, string] => {
        const { name, engine } = JSON.parse(line) as { name: string; engine: string };
        return [name, engine];
      }),
  );
  // Before the ledger is created: a ledger of the other layout would be made beside the old one.
  const layout = layoutProblem(await tables(), options);
  if (layout) throw new Error(`the database ${database} ${layout}`);
  await runner.query(
    `CREATE TABLE IF NOT EXISTS ${db}.${quoteIdentifier(storedName('sluice_schema_migrations', options))}${onCluster} (version UInt32, name String, applied_at DateTime DEFAULT now()) ` +
      `ENGINE = ${tableEngine(options)} ORDER BY version`,
  );
  if (options.distributed) await runner.query(distributedTable(database, 'sluice_schema_migrations', options));
  const done = new Set(
    (await runner.query(`SELECT version FROM ${ledger}`, 'JSONEachRow'))
      .split('\n')
      .filter(Boolean)
      .map((line) => Number(JSON.parse(line).version)),
  );
  const applied: MigrationReport['applied'] = [];
  for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
    if (done.has(migration.version)) continue;
    for (const statement of migration.statements(database, options, await tables())) await runner.query(statement);
    const problem = migration.verify?.(await tables(), options);
    if (problem) {
      throw new Error(`migration ${migration.version} (${migration.name}) is not complete: ${problem}; was another migrate running? Run it again`);
    }
    // Through a Distributed ledger the row is stored on its shard before the INSERT returns.
    const sync = options.distributed ? ' SETTINGS insert_distributed_sync = 1' : '';
    await runner.query(
      `INSERT INTO ${ledger} (version, name)${sync} VALUES (${migration.version}, '${migration.name.replaceAll("'", '')}')`,
    );
    applied.push({ version: migration.version, name: migration.name });
  }
  const current = Math.max(0, ...done, ...applied.map((m) => m.version));
  return { applied, current };
}

/**
 * Why the tables that exist do not fit the options' layout, or undefined. CREATE ... IF NOT
 * EXISTS would silently keep a table of the other layout: a database made without distributed
 * mode keeps its rows in the plain-named tables, and a Distributed table of the same name cannot
 * be put in their place by a migration (docs/guides/cluster.md says how to move).
 */
export function layoutProblem(tables: ReadonlyMap<string, string>, options: SchemaOptions): string | undefined {
  const wrong = Object.keys(SHARDING_KEYS).filter((table) => {
    const engine = tables.get(table);
    return engine !== undefined && (engine === 'Distributed') !== (options.distributed === true);
  });
  if (wrong.length === 0) return undefined;
  return options.distributed
    ? `was made without distributed mode (${wrong.join(', ')} not Distributed): sharding it is not a migration; migrate a new database (SLUICE_CLICKHOUSE_DATABASE) and move the rows`
    : `was made in distributed mode (${wrong.join(', ')} Distributed): set SLUICE_CLICKHOUSE_DISTRIBUTED=true`;
}
