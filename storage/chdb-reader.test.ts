import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestEngine, type TestEngine } from '../test/chdb-engine.ts';
import type { ChdbReader } from './chdb-reader.ts';
import type { ChdbStorage } from './chdb.ts';

let engine: TestEngine;
let storage: ChdbStorage;
let reader: ChdbReader;

beforeAll(async () => {
  engine = await openTestEngine();
  ({ storage, reader } = engine);
});

afterAll(() => engine?.close());

const text = async (database: string, sql: string, format = 'TSV', params?: Record<string, string>) =>
  Buffer.from((await reader.run(database, sql, { format, params })).bytes).toString('utf8');

describe('ChdbReader', () => {
  it('reads what the writer stored, with the database it names as the current one', async () => {
    await storage.query('CREATE TABLE otel.reader_test (n UInt8) ENGINE = MergeTree ORDER BY n');
    await storage.query('INSERT INTO otel.reader_test VALUES (7)');
    expect(await text('otel', 'SELECT n FROM reader_test')).toBe('7\n');
    expect(await text('system', "SELECT currentDatabase(), {p:String}", 'TSV', { p: 'bound' })).toBe('system\tbound\n');
    // The writer's session keeps its own current database.
    expect(await storage.query('SELECT currentDatabase()', 'TSV')).toBe('default\n');
    await expect(reader.run('no_such_database', 'SELECT 1', { format: 'TSV' })).rejects.toThrow(/UNKNOWN_DATABASE|does not exist/);
  });

  it('never hands a failed statement\'s output to the next statement (chDB would, on the same connection)', async () => {
    const failing = "SELECT if(number < 3, 'LEAKED', throwIf(1, 'boom')) FROM numbers(5) SETTINGS max_block_size = 1";
    for (let i = 0; i < 3; i++) {
      await expect(reader.run('otel', failing, { format: 'TSVRaw' })).rejects.toThrow(/boom/);
      expect(await text('otel', 'SELECT 42')).toBe('42\n');
    }
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? reader.run('otel', failing, { format: 'TSVRaw' }).then(() => 'passed', () => 'failed') : text('otel', `SELECT ${i}`))));
    expect(answers).toEqual(['0\n', 'failed', '2\n', 'failed', '4\n', 'failed', '6\n', 'failed']);
  });
});
