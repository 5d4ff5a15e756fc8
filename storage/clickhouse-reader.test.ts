/**
 * ClickhouseReader against a real ClickHouse server: Debian's 18.16, the one on this machine
 * (test/clickhouse-server.ts). It is too old for what the console's statements need — query
 * parameters (19.15+; 18.16 takes `param_a` for an unknown setting, shown below) and Sluice's
 * schema — so this covers what 18.16 does: the current database, formats, the statement's own
 * SETTINGS clause (read limits and timeouts are enforced; 18.16 ignores max_result_rows there),
 * its exceptions, and the unreachable server. The console's statements run on chDB
 * (console/queries/*.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { startClickhouseServer, type ClickhouseServer } from '../test/clickhouse-server.ts';
import { freePort } from '../test/sluice-processes.ts';
import { ClickhouseReader } from './clickhouse-reader.ts';
import { clickhouseException } from './errors.ts';

let server: ClickhouseServer;
let reader: ClickhouseReader;

beforeAll(async () => {
  server = await startClickhouseServer();
  reader = new ClickhouseReader({ url: server.url });
  await reader.run('default', 'CREATE DATABASE reader_test', { format: 'TSV' });
  await reader.run('reader_test', 'CREATE TABLE points (n UInt64, s String) ENGINE = MergeTree ORDER BY n', { format: 'TSV' });
  await reader.run('reader_test', "INSERT INTO points SELECT number, concat('p', toString(number)) FROM system.numbers LIMIT 100000", { format: 'TSV' });
}, 120_000);
afterAll(async () => {
  await reader?.shutdown();
  await server?.stop();
});

const text = async (database: string, sql: string, format = 'TSV') => Buffer.from((await reader.run(database, sql, { format })).bytes).toString('utf8');
const failure = (database: string, sql: string, params?: Record<string, string>) =>
  reader.run(database, sql, { format: 'TSV', params }).then(() => undefined, (err: unknown) => err);

describe('ClickhouseReader on ClickHouse 18.16', () => {
  it('runs a statement with the database it names as the current one, in the format asked', async () => {
    expect(await text('reader_test', 'SELECT currentDatabase(), count() FROM points')).toBe('reader_test\t100000\n');
    expect(await text('system', 'SELECT currentDatabase()')).toBe('system\n');
    expect(await text('reader_test', 'SELECT n, s FROM points ORDER BY n LIMIT 2', 'JSONEachRow')).toBe('{"n":"0","s":"p0"}\n{"n":"1","s":"p1"}\n');
    // A FORMAT clause of the statement's own wins over the default format.
    expect(await text('reader_test', 'SELECT 1 FORMAT CSV', 'JSONEachRow')).toBe('1\n');
  });

  it("enforces the statement's read limit and timeout, as exceptions storage/errors.ts reads with their codes", async () => {
    const rows = clickhouseException(await failure('reader_test', 'SELECT count() FROM points WHERE n % 7 = 0 SETTINGS readonly = 1, max_rows_to_read = 1000'));
    expect(rows).toMatchObject({ code: 158, text: expect.stringMatching(/^Limit for rows to read exceeded/) });
    // 18.16 takes whole seconds only (a fraction is "Bad get: has Float64, requested UInt64").
    const time = clickhouseException(await failure('system', 'SELECT count() FROM system.numbers SETTINGS readonly = 1, max_execution_time = 1'));
    expect(time).toMatchObject({ code: 159, text: expect.stringMatching(/^Timeout exceeded/) });
  });

  it('refuses query parameters: they need ClickHouse 19.15 or later', async () => {
    const err = clickhouseException(await failure('default', 'SELECT {a:String}', { a: "it's" }));
    expect(err).toMatchObject({ code: 115, text: 'Unknown setting param_a' });
  });

  it("throws the server's exception for a failing statement, and keeps answering after it", async () => {
    expect(clickhouseException(await failure('no_such_database', 'SELECT 1'))).toMatchObject({ code: 81 });
    expect(clickhouseException(await failure('reader_test', 'SELECT nope FROM points'))).toMatchObject({ code: 47 });
    expect(await text('reader_test', 'SELECT max(n) FROM points')).toBe('99999\n');
  });

  it('answers unavailable, with the URL without its password, when nobody listens', async () => {
    const port = await freePort();
    const down = new ClickhouseReader({ url: `http://default:hunter2@127.0.0.1:${port}`, requestTimeoutMs: 2000 });
    const err = await down.run('default', 'SELECT 1', { format: 'TSV' }).then(() => undefined, (e: unknown) => e);
    await down.shutdown();
    expect(err).toBeInstanceOf(SluiceError);
    expect(err).toMatchObject({ code: 'unavailable', message: `ClickHouse at http://default@127.0.0.1:${port} is unavailable: connect ECONNREFUSED 127.0.0.1:${port}` });
    await expect(down.run('default', 'SELECT 1', { format: 'TSV' })).rejects.toThrow(/shut down/);
  });
});
