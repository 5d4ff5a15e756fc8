import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { transcodeOtlp } from '../pipeline/otlp/index.ts';
import { encodeTraces, traceRequest } from '../test/otlp-fixtures.ts';
import { ChdbStorage, inputType } from './chdb.ts';
import { assertReadOnlySql, queryRows } from './storage.ts';

let dir: string;
let storage: ChdbStorage;

const scratch = () => join(dir, 'clickhouse', 'sluice-scratch');

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-chdb-'));
  // What start() must leave alone: a user's <dataDir>/tmp (a data dir may be $HOME), and a
  // file of someone else's in the scratch dir; and what it must clear: an insert file left by a crash.
  await mkdir(join(dir, 'tmp'));
  await writeFile(join(dir, 'tmp', 'notes.txt'), 'mine');
  await mkdir(scratch(), { recursive: true });
  await writeFile(join(scratch(), 'insert-4242-7.bin'), 'left by a crash');
  await writeFile(join(scratch(), 'README'), 'not ours');
  storage = new ChdbStorage(dir, 'otel');
  await storage.start();
});
afterAll(async () => {
  await storage?.shutdown();
  await rm(dir, { recursive: true, force: true });
});

const rows = () => transcodeOtlp('traces', 'protobuf', encodeTraces(traceRequest({ spans: 3 })), 'src').tables[0]!;
const count = async () => Number(JSON.parse(await storage.query('SELECT count() AS n FROM otel.otel_traces')).n);

describe('ChdbStorage', () => {
  it('drops an insert repeated with the same dedup token, and only then', async () => {
    const table = rows();
    const batch = { table: table.table, columns: table.columns, chunks: [table.data] };
    await storage.insert({ ...batch, dedupToken: 'stream:1-1' });
    await storage.insert({ ...batch, dedupToken: 'stream:1-1' });
    expect(await count()).toBe(3);
    // Identical data without a token is two writes.
    await storage.insert(batch);
    await storage.insert(batch);
    expect(await count()).toBe(9);
  });

  it('stores every column kind as written, its LowCardinality columns read as plain strings: the rows of an insert that reads the table\'s own types', async () => {
    const attributes = (prefix: string) => [
      { key: `${prefix}.ascii`, value: { stringValue: 'plain' } },
      { key: `${prefix}.utf8`, value: { stringValue: 'größe ✓ 日本' } },
      { key: `${prefix}.empty`, value: { stringValue: '' } },
      { key: `${prefix}.int`, value: { intValue: '-42' } },
    ];
    const span = (i: number) => ({
      traceId: '5b8efff798038103d269b633813fc60c', spanId: `eee19b7ec3c1b17${i}`, parentSpanId: i ? 'eee19b7ec3c1b170' : '',
      name: `kinds-${i % 3}`, kind: 2 + (i % 3), startTimeUnixNano: `${1_700_000_000_000_000_000 + i}`, endTimeUnixNano: `${1_700_000_000_500_000_000 + i}`,
      attributes: attributes('span'),
      events: i % 2 ? [] : [{ timeUnixNano: '1700000000100000000', name: 'évènement', attributes: attributes('event') }, { timeUnixNano: '1700000000200000000', name: '' }],
      links: i % 3 ? [] : [{ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceState: 'k=v', attributes: attributes('link') }],
      status: { code: i % 3, message: i % 2 ? 'échec' : '' },
    });
    const body = Buffer.from(JSON.stringify({
      resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'kinds-service' } }, ...attributes('res')] }, scopeSpans: [{ scope: { name: 'kinds', version: '1' }, spans: Array.from({ length: 6 }, (_, i) => span(i)) }] }],
    }));
    const table = transcodeOtlp('traces', 'json', body, 'src').tables[0]!;
    const { Session } = await import('chdb');
    const statements = vi.spyOn(Session.prototype, 'queryAsync');
    let sent: string[];
    try {
      await storage.insert({ table: table.table, columns: table.columns, chunks: [table.data] });
    } finally {
      sent = statements.mock.calls.map(([sql]) => String(sql));
      statements.mockRestore();
    }
    const [insert] = sent.filter((sql) => sql.startsWith('INSERT'));
    expect(insert).toContain("'RowBinary'");
    expect(insert).toContain('`SpanAttributes` Map(String, String)');
    expect(insert).not.toContain('LowCardinality');

    const file = join(dir, 'kinds.bin');
    await writeFile(file, table.data);
    const columns = table.columns.map((c) => `\`${c}\``).join(', ');
    await storage.query('CREATE TABLE otel.kinds_as_typed AS otel.otel_traces ENGINE = Memory');
    await storage.query(`INSERT INTO otel.kinds_as_typed (${columns}) FROM INFILE '${file}' FORMAT RowBinary`);
    const rows = (from: string) => queryRows<Record<string, unknown>>(storage, `SELECT ${columns} FROM otel.${from} WHERE ServiceName = 'kinds-service' ORDER BY SpanId`);
    const stored = await rows('otel_traces');
    expect(stored).toHaveLength(6);
    expect(stored).toEqual(await rows('kinds_as_typed'));
    expect(stored[0]!['Events.Name']).toEqual(['évènement', '']);
  });

  it('declares each LowCardinality column as its plain type for the insert to read', () => {
    expect(inputType('LowCardinality(String)')).toBe('String');
    expect(inputType('Array(Map(LowCardinality(String), String))')).toBe('Array(Map(String, String))');
    expect(inputType('LowCardinality(Nullable(String))')).toBe('Nullable(String)');
    expect(inputType('DateTime64(9)')).toBe('DateTime64(9)');
  });

  it('inserts a batch whose rows span more than 100 days in one insert: it holds many requests, each checked at the door', async () => {
    const day = 86_400_000_000_000n;
    const today = (BigInt(Date.now()) * 1_000_000n) / day * day;
    // Three requests of 60 days each, 180 days together, as the local log or a consumer batches them.
    const chunks = [0, 1, 2].map((r) => transcodeOtlp('traces', 'protobuf', encodeTraces(traceRequest({ spans: 60, name: 'spread', startNanos: (i) => today - BigInt(r * 60 + i) * day })), 'src').tables[0]!);
    await storage.insert({ table: 'otel_traces', columns: chunks[0]!.columns, chunks: chunks.map((c) => c.data) });
    const [stored] = await queryRows<{ n: number; days: number }>(storage, "SELECT count() AS n, uniq(toDate(Timestamp)) AS days FROM otel.otel_traces WHERE SpanName = 'spread'");
    expect(stored).toEqual({ n: 180, days: 180 });
  });

  it('makes every table fsync its inserted and merged parts: the local log deletes rows once inserted', async () => {
    const tables = await queryRows<{ name: string; create_table_query: string }>(storage, "SELECT name, create_table_query FROM system.tables WHERE database = 'otel' AND engine LIKE '%MergeTree'");
    expect(tables.length).toBeGreaterThan(10);
    for (const { name, create_table_query: sql } of tables) {
      expect(sql, name).toMatch(/fsync_after_insert = 1/);
      expect(sql, name).toMatch(/min_compressed_bytes_to_fsync_after_merge = 1/);
    }
  });

  it('leaves no insert files behind', async () => {
    expect(await readdir(scratch())).toEqual(['README']);
  });

  it('at start removes only its own leftover insert files, never a directory', async () => {
    expect(await readdir(join(dir, 'tmp'))).toEqual(['notes.txt']);
    expect(await readdir(scratch())).toEqual(['README']);
  });

  it("never hands a failed statement's output to the next one (a failed `sluice query` must not show in the next answer)", async () => {
    const failing = "SELECT if(number < 3, 'LEAKED', throwIf(1, 'boom')) FROM numbers(5) SETTINGS max_block_size = 1";
    for (let i = 0; i < 3; i++) {
      await expect(storage.query(failing, 'TSVRaw')).rejects.toThrow(/boom/);
      expect(await storage.query('SELECT 42', 'TSV')).toBe('42\n');
    }
    // Nor into an insert's connection: rows still go in, and counting them reads only the count.
    const before = await count();
    await expect(storage.query(failing, 'TSVRaw')).rejects.toThrow(/boom/);
    const table = rows();
    await storage.insert({ table: table.table, columns: table.columns, chunks: [table.data] });
    expect(await count()).toBe(before + 3);
  });

  it('migrates once: a second start finds the schema current', async () => {
    const report = JSON.parse(await storage.query('SELECT max(version) AS v, count() AS n FROM otel.sluice_schema_migrations'));
    expect(report.n).toBe(report.v);
  });
});

describe('assertReadOnlySql', () => {
  it('allows one reading statement', () => {
    for (const sql of ['SELECT 1', ' with x as (select 1) select * from x;', 'SHOW TABLES FROM otel', 'DESCRIBE otel.otel_logs', 'EXPLAIN SELECT 1']) {
      expect(() => assertReadOnlySql(sql), sql).not.toThrow();
    }
  });

  it('refuses writes and multiple statements', () => {
    for (const sql of ['DROP TABLE otel.otel_logs', 'INSERT INTO t VALUES (1)', 'SELECT 1; DROP TABLE t', 'ALTER TABLE t DELETE WHERE 1', '']) {
      expect(() => assertReadOnlySql(sql), sql).toThrow(/read-only/);
    }
  });
});
