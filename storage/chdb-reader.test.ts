import { threadId } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toException } from '../query/errors.ts';
import { openTestEngine, type TestEngine } from '../test/chdb-engine.ts';
import { ChdbReader, type StatementRunner } from './chdb-reader.ts';
import { ChdbReadThreads } from './chdb-read-threads.ts';
import { chdbEngineDir, type ChdbStorage } from './chdb.ts';
import { clickhouseException } from './errors.ts';

let engine: TestEngine;
let storage: ChdbStorage;
/** The main thread's connections, as ChdbStorage runs its own statements. */
let mainReader: ChdbReader;

beforeAll(async () => {
  engine = await openTestEngine();
  storage = engine.storage;
  mainReader = new ChdbReader(chdbEngineDir(engine.dataDir));
  await storage.query('CREATE TABLE otel.reader_test (n UInt8) ENGINE = MergeTree ORDER BY n');
  await storage.query('INSERT INTO otel.reader_test VALUES (7)');
});

afterAll(async () => {
  await mainReader?.shutdown();
  await engine?.close();
});

const drivers: [string, () => StatementRunner][] = [
  ['ChdbReader (main thread)', () => mainReader],
  ['ChdbReadThreads (read threads)', () => engine.reader],
];

describe.each(drivers)('%s', (_name, runnerOf) => {
  const text = async (database: string, sql: string, format = 'TSV', params?: Record<string, string>) =>
    Buffer.from((await runnerOf().run(database, sql, { format, params })).bytes).toString('utf8');

  it('reads what the writer stored, with the database it names as the current one', async () => {
    expect(await text('otel', 'SELECT n FROM reader_test')).toBe('7\n');
    expect(await text('system', "SELECT currentDatabase(), {p:String}", 'TSV', { p: 'bound' })).toBe('system\tbound\n');
    // The writer's session keeps its own current database.
    expect(await storage.query('SELECT currentDatabase()', 'TSV')).toBe('default\n');
    await expect(runnerOf().run('no_such_database', 'SELECT 1', { format: 'TSV' })).rejects.toThrow(/UNKNOWN_DATABASE|does not exist/);
  });

  it('never hands a failed statement\'s output to the next statement (chDB would, on the same connection)', async () => {
    const reader = runnerOf();
    const failing = "SELECT if(number < 3, 'LEAKED', throwIf(1, 'boom')) FROM numbers(5) SETTINGS max_block_size = 1";
    for (let i = 0; i < 3; i++) {
      await expect(reader.run('otel', failing, { format: 'TSVRaw' })).rejects.toThrow(/boom/);
      expect(await text('otel', 'SELECT 42')).toBe('42\n');
    }
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? reader.run('otel', failing, { format: 'TSVRaw' }).then(() => 'passed', () => 'failed') : text('otel', `SELECT ${i}`))));
    expect(answers).toEqual(['0\n', 'failed', '2\n', 'failed', '4\n', 'failed', '6\n', 'failed']);
  });
});

describe('ChdbReadThreads', () => {
  const statements: [string, string, Record<string, string> | undefined][] = [
    ["SELECT number, toString(number) AS s, [number, 2] AS a FROM numbers(1000)", 'Native', undefined],
    ["SELECT number, repeat('x', 100) AS s FROM numbers(20000)", 'RowBinary', undefined],
    ['SELECT {n:UInt32} AS n, {s:String} AS s, n * 2 AS twice', 'JSONEachRow', { n: '21', s: "it's a\\b" }],
    ['SELECT n FROM reader_test', 'TSV', undefined],
    ["SELECT '' WHERE 0", 'TSV', undefined],
  ];

  it('answers what the main thread\'s connections answer, byte for byte, from another thread', async () => {
    for (const [sql, format, params] of statements) {
      const [main, threads] = await Promise.all([mainReader.run('otel', sql, { format, params }), engine.reader.run('otel', sql, { format, params })]);
      expect(Buffer.from(threads.bytes).equals(Buffer.from(main.bytes)), `${format}: ${sql}`).toBe(true);
      expect(threads.rowsRead).toBe(main.rowsRead);
      expect(threads.threadId).toBeGreaterThan(0);
      expect(threads.threadId).not.toBe(threadId);
    }
  });

  it('runs statements at once on different threads, and the bytes arrive whole', async () => {
    const sql = "SELECT number, repeat('x', 1024) AS s FROM numbers(20000)";
    const outputs = await Promise.all([1, 2].map(() => engine.reader.run('otel', sql, { format: 'RowBinary' })));
    expect(new Set(outputs.map((output) => output.threadId)).size).toBe(2);
    for (const output of outputs) expect(output.bytes.byteLength).toBe(20000 * (8 + 2 + 1024));
  });

  it('keeps the engine\'s error: its name, code, ClickHouse code and text, as the query endpoint answers it', async () => {
    const cases = ["SELECT throwIf(1, 'boom: it''s here')", 'SELECT no_such_column', 'SELEC 1', "SELECT 1 SETTINGS readonly = 1, max_threads = 'x'"];
    for (const sql of cases) {
      const main = await mainReader.run('otel', sql, { format: 'TSV' }).catch((err: unknown) => err as Error & { clickhouseCode?: number; code?: string });
      const threads = await engine.reader.run('otel', sql, { format: 'TSV' }).catch((err: unknown) => err as Error & { clickhouseCode?: number; code?: string });
      expect(threads).toBeInstanceOf(Error);
      expect(main).toBeInstanceOf(Error);
      if (!(threads instanceof Error) || !(main instanceof Error)) continue;
      expect({ name: threads.name, message: threads.message, code: threads.code, clickhouseCode: threads.clickhouseCode })
        .toEqual({ name: main.name, message: main.message, code: main.code, clickhouseCode: main.clickhouseCode });
      expect(typeof threads.clickhouseCode).toBe('number');
      expect(clickhouseException(threads)).toEqual(clickhouseException(main));
      expect(toException(threads)).toEqual(toException(main));
    }
  });

  it('closes its connections at shutdown without waiting for a statement under way, refuses after; the threads serve the next reader', async () => {
    const reader = new ChdbReadThreads(chdbEngineDir(engine.dataDir), 2);
    await reader.start();
    await reader.run('otel', 'SELECT 1', { format: 'TSV' });
    const order: string[] = [];
    const under = reader.run('otel', 'SELECT count() FROM numbers(50000000) WHERE sipHash64(number) % 7 = 1', { format: 'TSV' });
    void under.then(() => order.push('statement'));
    await reader.shutdown();
    order.push('shutdown');
    expect(Number(Buffer.from((await under).bytes).toString())).toBeGreaterThan(0);
    expect(order).toEqual(['shutdown', 'statement']);
    await expect(reader.run('otel', 'SELECT 1', { format: 'TSV' })).rejects.toMatchObject({ code: 'unavailable' });
    expect(reader.status().ok).toBe(false);
    const next = new ChdbReadThreads(chdbEngineDir(engine.dataDir), 2);
    await next.start();
    expect(Buffer.from((await next.run('otel', 'SELECT 5', { format: 'TSV' })).bytes).toString()).toBe('5\n');
    expect(next.status()).toMatchObject({ ok: true, figures: { threads: 2 } });
    await next.shutdown();
  });
});
