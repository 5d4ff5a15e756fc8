import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChdbReader } from '../storage/chdb-reader.ts';
import { chdbEngineDir } from '../storage/chdb.ts';
import { decodeNative, nativeRows } from '../test/native-decoder.ts';
import { ClickHouseException } from './errors.ts';
import { nativeForRevision } from './native.ts';

/** clickhouse-go's client_protocol_version (lib/proto/const.go DBMS_TCP_PROTOCOL_VERSION). */
const CLICKHOUSE_GO_REVISION = 54460;

let dataDir: string;
let reader: ChdbReader;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-native-'));
  reader = new ChdbReader(chdbEngineDir(dataDir));
});

afterAll(async () => {
  await reader.shutdown();
  await rm(dataDir, { recursive: true, force: true });
});

async function output(sql: string, format: string): Promise<Uint8Array> {
  return (await reader.run('default', sql, { format })).bytes;
}

/** The query's rows through chDB's Native, rewritten for `revision` and read as clickhouse-go reads it, against its JSONCompactEachRow. */
async function expectSameRows(sql: string, revision = CLICKHOUSE_GO_REVISION): Promise<unknown[][]> {
  const native = nativeForRevision(await output(sql, 'Native'), revision);
  const rows = nativeRows(decodeNative(native, revision));
  const asJson = `${sql} SETTINGS output_format_json_quote_64bit_integers = 1, output_format_json_named_tuples_as_objects = 0`;
  const json = Buffer.from(await output(asJson, 'JSONCompactEachRow')).toString('utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line));
  expect(rows).toEqual(json);
  return rows;
}

describe('Native for a client protocol revision', () => {
  it('carries the column types of the telemetry tables', async () => {
    const rows = await expectSameRows(`
      SELECT
        toDateTime64('2024-05-01 12:00:00.123456789', 9, 'UTC') AS ts, toUnixTimestamp64Nano(ts) AS ns,
        toLowCardinality(concat('svc-', toString(number % 3))) AS service,
        map(toLowCardinality('http.method'), 'GET', toLowCardinality(toString(number)), repeat('x', number)) AS attributes,
        [toDateTime64('2024-05-01 00:00:00', 9, 'UTC'), toDateTime64('2024-05-02 00:00:00', 3, 'UTC')] AS events,
        arrayMap(i -> map(toLowCardinality('k'), toString(i)), range(number % 3)) AS links,
        number * 1000000000000 AS big, toInt64(-number) AS negative, number / 3 AS ratio, toUInt8(number) AS small,
        if(number % 2 = 0, NULL, toString(number)) AS maybe,
        CAST(if(number % 2 = 0, NULL, 'v'), 'LowCardinality(Nullable(String))') AS maybe_lc,
        tuple(number, toString(number))::Tuple(n UInt64, s String) AS pair,
        CAST('b', 'Enum8(\\'a\\' = 1, \\'b\\' = 2)') AS level, toFixedString('ab', 2) AS fixed, number % 2 = 0 AS even,
        toDecimal64(number / 2, 2) AS price
      FROM numbers(5)`);
    expect(rows).toHaveLength(5);
    expect(rows[1]!.slice(2, 4)).toEqual(['svc-1', { 'http.method': 'GET', '1': 'x' }]);
  });

  it('rewrites every block of a long result, and leaves an empty one empty', async () => {
    const sql = 'SELECT number, toString(number) AS s FROM numbers(150000)';
    const rows = await expectSameRows(sql);
    expect(rows).toHaveLength(150000);
    expect(decodeNative(nativeForRevision(await output(sql, 'Native'), CLICKHOUSE_GO_REVISION), CLICKHOUSE_GO_REVISION).length).toBeGreaterThan(1);
    expect(rows[149999]).toEqual(['149999', '149999']);
    expect(nativeForRevision(await output('SELECT 1 WHERE 0', 'Native'), CLICKHOUSE_GO_REVISION)).toHaveLength(0);
  });

  it('adds only the BlockInfo for a revision before custom serializations', async () => {
    await expectSameRows("SELECT 1 AS one, 'x' AS x", 54453);
    const plain = await output("SELECT 1 AS one, 'x' AS x", 'Native');
    expect(nativeForRevision(plain, 54453)).toHaveLength(plain.length + 8);
    expect(nativeForRevision(plain, CLICKHOUSE_GO_REVISION)).toHaveLength(plain.length + 8 + 2);
  });

  it('refuses a type whose data it cannot walk, with a ClickHouse error', async () => {
    const plain = await output("SELECT 1 AS n, 'x'::Dynamic AS d", 'Native');
    let error: unknown;
    try {
      nativeForRevision(plain, CLICKHOUSE_GO_REVISION);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ClickHouseException);
    expect((error as ClickHouseException).code).toBe(48);
    expect((error as ClickHouseException).text).toMatch(/Column d of type Dynamic cannot be sent here in the Native format/);
  });
});
