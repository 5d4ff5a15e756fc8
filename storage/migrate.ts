/**
 * Schema migrations: an ordered list of versioned steps (storage/schema.ts), applied once each
 * and recorded in <db>.sluice_schema_migrations. Every statement is idempotent
 * (IF NOT EXISTS), so a step interrupted half way is simply run again.
 */
import { MIGRATIONS } from './schema.ts';
import { quoteIdentifier } from './storage.ts';

export interface SqlRunner {
  query(sql: string, format?: string): Promise<string>;
}

export interface MigrationReport {
  applied: Array<{ version: number; name: string }>;
  current: number;
}

export async function migrate(runner: SqlRunner, database: string): Promise<MigrationReport> {
  const db = quoteIdentifier(database);
  const ledger = `${db}.sluice_schema_migrations`;
  await runner.query(`CREATE DATABASE IF NOT EXISTS ${db}`);
  await runner.query(
    `CREATE TABLE IF NOT EXISTS ${ledger} (version UInt32, name String, applied_at DateTime DEFAULT now()) ` +
      'ENGINE = MergeTree ORDER BY version',
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
    for (const statement of migration.statements(database)) await runner.query(statement);
    await runner.query(
      `INSERT INTO ${ledger} (version, name) VALUES (${migration.version}, '${migration.name.replaceAll("'", '')}')`,
    );
    applied.push({ version: migration.version, name: migration.name });
  }
  const current = Math.max(0, ...done, ...applied.map((m) => m.version));
  return { applied, current };
}
