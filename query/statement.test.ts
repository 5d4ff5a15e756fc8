import { access, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatementRunner } from '../storage/chdb-reader.ts';
import type { ChdbStorage } from '../storage/chdb.ts';
import { openTestEngine, type TestEngine } from '../test/chdb-engine.ts';
import { toException } from './errors.ts';
import { parseQueryParams, type QueryLimits } from './request.ts';
import { QueryScope } from './scope.ts';
import { checkStatement } from './statement.ts';

let engine: TestEngine;
let dataDir: string;
let storage: ChdbStorage;
let reader: StatementRunner;

beforeAll(async () => {
  engine = await openTestEngine();
  ({ dataDir, storage, reader } = engine);
});

afterAll(() => engine?.close());

const scope = new QueryScope('otel');
const LIMITS: QueryLimits = { maxExecutionSeconds: 5, maxResultRows: 50, maxResultBytes: 1 << 20, resultOverflowMode: 'throw', maxMemoryBytes: 64 << 20 };
const check = (sql: string, params: Record<string, string> = {}, database = 'otel') => checkStatement(reader, scope, database, sql, params);

/** The ClickHouse code a statement is refused with (0: not refused). */
async function refusal(sql: string, database?: string): Promise<{ code: number; text: string }> {
  try {
    await check(sql, {}, database);
    return { code: 0, text: '' };
  } catch (err) {
    const exception = toException(err);
    if (!exception) throw err;
    return { code: exception.code, text: exception.text };
  }
}

describe('checkStatement', () => {
  it('passes reading statements, as the formatter writes them, with their FORMAT', async () => {
    expect(await check('select SpanName, count() from otel_traces -- comment\ngroup by SpanName format JSON;')).toEqual({
      sql: 'SELECT\n    SpanName,\n    count()\nFROM otel_traces\nGROUP BY SpanName\nFORMAT JSON',
      format: 'JSON',
    });
    expect(await check('WITH 1 AS x SELECT x')).toMatchObject({ format: undefined });
    for (const sql of [
      'SHOW DATABASES', 'SHOW TABLES FROM "otel"', 'DESCRIBE TABLE otel_traces', 'EXISTS TABLE otel_logs', 'SHOW CREATE TABLE otel_logs',
      'EXPLAIN SELECT 1', "SELECT name, type, table FROM system.columns WHERE database = 'otel' AND table = 'otel_traces'",
      'SELECT displayName(), version(), revision(), timezone()', 'SELECT count() FROM numbers(10)',
    ]) {
      expect(await refusal(sql), sql).toEqual({ code: 0, text: '' });
    }
    expect(await check('SELECT {service:String}', { service: 'checkout' })).toEqual({ sql: 'SELECT {service:String}', format: undefined });
  });

  it('refuses writes, DDL and admin statements as readonly (164)', async () => {
    for (const sql of [
      "INSERT INTO otel_traces (SpanName) VALUES ('x')", 'INSERT INTO otel_traces SELECT * FROM otel_traces', 'CREATE TABLE t (a UInt8) ENGINE = Memory',
      'DROP TABLE otel_traces', 'TRUNCATE TABLE otel_logs', 'ALTER TABLE otel_traces DELETE WHERE 1', 'SYSTEM FLUSH LOGS', 'SET readonly = 0',
      'USE system', 'KILL QUERY WHERE 1', 'OPTIMIZE TABLE otel_traces FINAL', "GRANT ALL ON *.* TO default", 'EXPLAIN PIPELINE INSERT INTO otel_traces SELECT * FROM otel_traces',
    ]) {
      expect((await refusal(sql)).code, sql).toBe(164);
    }
    expect(await storage.query("EXISTS TABLE otel.otel_traces", 'TSV')).toBe('1\n');
  });

  it('refuses more than one statement with the parser\'s own error', async () => {
    const { code, text } = await refusal('SELECT 1; DROP TABLE otel_traces');
    expect(code).toBe(62);
    expect(text).toMatch(/Multi-statements are not allowed/);
    expect((await refusal('SELECT 1;\nSELECT 2')).code).toBe(62);
    // The text reaches formatQuery as one string literal, whatever quotes and backslashes it holds.
    expect((await refusal("SELECT 1'); DROP TABLE otel_traces; SELECT ('")).code).toBe(62);
    expect((await refusal("SELECT '\\'); DROP TABLE otel_traces; --'")).code).toBe(0);
    expect((await refusal('SELECT 1\0; DROP TABLE otel_traces')).code).toBe(62);
    expect(await storage.query("EXISTS TABLE otel.otel_traces", 'TSV')).toBe('1\n');
  });

  it('closes the doors readonly leaves open in chDB: SETTINGS, INTO OUTFILE, files, table functions', async () => {
    for (const sql of ['SELECT 1 SETTINGS max_execution_time = 0', "SELECT * FROM (SELECT getSetting('readonly') SETTINGS readonly = 0)", 'SELECT * FROM view(SELECT 1 SETTINGS readonly = 0)']) {
      expect(await refusal(sql), sql).toMatchObject({ code: 164, text: expect.stringMatching(/SETTINGS clause is not allowed/) });
    }
    const file = join(dataDir, 'written');
    expect(await refusal(`SELECT 1 INTO OUTFILE '${file}'`)).toMatchObject({ code: 164, text: expect.stringMatching(/INTO OUTFILE/) });
    expect(await refusal(`EXPLAIN SELECT 1 INTO OUTFILE '${file}'`)).toMatchObject({ code: 164 });
    await expect(access(file)).rejects.toThrow();
    for (const sql of [
      `SELECT file('${join(dataDir, 'relay-master.key')}')`, "DESCRIBE TABLE file('/etc/hostname', CSVWithNames)", "SELECT * FROM url('http://127.0.0.1:1/', CSV)",
      "SELECT * FROM s3('http://127.0.0.1:1/x.csv')", "SELECT * FROM numbers(1) WHERE 0 IN (SELECT 1 FROM file('/etc/hostname', LineAsString))",
    ]) {
      expect((await refusal(sql)).code, sql).toBe(497);
    }
  });

  it('runs what passes with readonly = 1 on every part, and the limits (the engine\'s own check)', async () => {
    const { settings } = parseQueryParams(new URLSearchParams(), LIMITS, scope);
    const run = async (sql: string) => Buffer.from((await reader.run('otel', `${(await check(sql)).sql}\nSETTINGS ${settings}`, { format: 'TSV' })).bytes).toString();
    expect(await run("SELECT getSetting('readonly') UNION ALL SELECT getSetting('readonly')")).toBe('1\n1\n');
    expect(await run('SHOW TABLES LIMIT 1')).toMatch(/^\w+\n$/);
    expect(await run('EXPLAIN SELECT 1 FORMAT TSV')).not.toBe('');
    expect(toException(await run('SELECT number FROM numbers(100)').catch((err) => err))?.code).toBe(396);
    // Were a write to get past the tree, the engine refuses it.
    const write = reader.run('otel', `INSERT INTO otel_logs (Body) SELECT 'x'\nSETTINGS ${settings}`, { format: 'TSV' });
    expect(toException(await write.catch((err) => err))?.code).toBe(164);
  });

  it('shows the telemetry tables only: path-named tables, other databases and system tables are refused in every statement form', async () => {
    const existing = join(dataDir, 'exists.txt');
    await writeFile(existing, 'x');
    // chDB's `default` database answers for any file of the process by its path (1 here before).
    expect(await storage.query(`EXISTS TABLE default.\`${existing}\``, 'TSV')).toBe('1\n');
    for (const sql of [
      `EXISTS TABLE default.\`${existing}\``, `EXISTS TABLE default.\`${existing}\` FORMAT JSON`, `EXISTS \`${existing}\``, 'SHOW TABLES FROM system FORMAT JSON', `EXISTS TABLE otel.\`${existing}\``, `DESCRIBE TABLE default.\`${existing}\``,
      `SELECT * FROM default.\`${existing}\``, `SHOW CREATE TABLE default.\`${existing}\``, `SELECT 1 IN default.\`${existing}\``,
      'SELECT * FROM system.processes', 'SELECT * FROM system.disks', 'SELECT * FROM system.stack_trace', 'SELECT * FROM system.settings',
      'SELECT 1 IN system.processes', 'SELECT * FROM otel_traces AS t JOIN system.processes AS p ON 1', 'SELECT * FROM numbers(1) WHERE 1 IN (SELECT 1 FROM system.disks)',
      'SELECT * FROM information_schema.tables', 'SELECT * FROM relay_submissions', 'SELECT * FROM otel.relay_submissions', 'DESCRIBE TABLE relay_submissions',
      'EXISTS TABLE otel.relay_submissions', "SELECT * FROM merge('system', '^processes$')", "SELECT * FROM merge('otel', '.*')", "SELECT * FROM merge('^otel$', '.*')",
      'SHOW TABLES FROM system', 'EXISTS DATABASE system', 'SHOW PROCESSLIST', "SHOW SETTINGS LIKE '%path%'", 'SHOW GRANTS', 'SHOW FUNCTIONS', 'SHOW COLUMNS FROM otel_traces',
      "SELECT getServerSetting('path')", "SELECT filesystemCapacity()", "SELECT hostName()", "SELECT dictGet('d', 'a', 1)", "SELECT joinGet('otel.t', 'a', 1)",
      'SELECT addressToSymbol(toUInt64(1))', "SELECT hasColumnInTable('otel', 'relay_submissions', 'Data')",
    ]) {
      expect((await refusal(sql)).code, sql).toBe(497);
    }
    expect((await refusal('SELECT 1', 'system')).text).toMatch(/database system is not one of them/);
    expect((await refusal('SELECT * FROM system.processes')).text).toMatch(/Not enough privileges: the query endpoint shows the telemetry tables of otel .*; table system.processes is not one of them/);
    for (const sql of [
      'WITH x AS (SELECT 1) SELECT * FROM x', 'SELECT name FROM system.functions LIMIT 1', 'SELECT * FROM system.one', 'DESC TABLE "otel"."otel_traces"',
      'SELECT count() FROM otel.otel_logs WHERE 1 IN (SELECT 1 FROM otel_traces)', 'SHOW CREATE TABLE otel_traces', 'EXISTS DATABASE otel', 'SELECT version()',
      'EXISTS TABLE otel.otel_traces FORMAT JSON', 'SHOW TABLES FROM otel FORMAT JSON', 'SHOW CREATE TABLE otel_logs FORMAT TSV', 'EXISTS DATABASE otel FORMAT JSON',
    ]) {
      expect(await refusal(sql), sql).toEqual({ code: 0, text: '' });
    }
  });

  it('runs every statement with the memory limit, introspection off, and the system listings kept to the telemetry tables', async () => {
    const { settings } = parseQueryParams(new URLSearchParams(), LIMITS, scope);
    const run = async (sql: string) => Buffer.from((await reader.run('otel', `${sql}\nSETTINGS ${settings}`, { format: 'TSV' })).bytes).toString();
    const failure = async (sql: string) => toException(await run(sql).then(() => undefined, (err: unknown) => err));
    // The two statements of the memory finding, at this test's 64 MiB.
    for (const sql of ['SELECT length(groupArray(number)) FROM numbers(150000000)', 'SELECT sum(arraySum(arrayMap(x -> sipHash64(x, x, x, x), range(300000000))))']) {
      const exception = await failure(sql);
      expect(exception?.code, sql).toBe(241); // MEMORY_LIMIT_EXCEEDED
      expect(exception?.text, sql).toMatch(/^DB::Exception: Query memory limit exceeded: .*maximum: 64\.00 MiB/);
    }
    expect((await failure('SELECT addressToLine(toUInt64(0))'))?.code).toBe(446); // FUNCTION_NOT_ALLOWED
    expect(await run('SHOW DATABASES')).toBe('otel\n');
    const tables = (await run('SHOW TABLES')).split('\n').filter(Boolean);
    expect(tables).toEqual(expect.arrayContaining(['otel_traces', 'otel_logs', 'otel_metrics_gauge']));
    expect(tables).not.toContain('relay_submissions');
    expect(await run("SELECT DISTINCT database FROM system.columns")).toBe('otel\n');
    expect(await run("SELECT count() FROM system.tables WHERE name LIKE 'relay%' OR database = 'system'")).toBe('0\n');
  });
});
