/**
 * ClickhouseServerStorage against a real ClickHouse server: this file starts its own
 * `clickhouse-server` (random ports, temp data dir, minimal config) and stops it at the end.
 * The binary must be installed (deploy/services.sh installs it; CI runs that script): without
 * it the suite FAILS, it never skips.
 *
 * The server here is Debian's package, ClickHouse 18.16. What it cannot do, seen on it:
 * - no Map, DateTime64, CODEC(...) or TTL (syntax errors, code 62); LowCardinality only with
 *   allow_experimental_low_cardinality_type (code 44). So the otel schema cannot be created
 *   here: these tests use a table of String/UInt64/Float64/Array columns instead. The otel
 *   schema SQL itself (the same SQL this driver sends) runs against chDB in
 *   storage/schema.test.ts, storage/chdb.test.ts and the OTLP end-to-end tests.
 * - no insert_deduplication_token (unknown setting, code 115) and no
 *   non_replicated_deduplication_window (code 36): the driver sees that at start, inserts
 *   without a token, and a repeated batch is stored twice. Token dedup is tested on chDB.
 * - errors come as "Code: N, e.displayText() = ..." which @clickhouse/client does not parse:
 *   the driver reads the code itself (tested below with a real parse error).
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { transcodeOtlp } from '../pipeline/otlp/index.ts';
import { startClickhouseFacade, type ClickhouseFacade } from '../test/clickhouse-facade.ts';
import { startClickhouseServer, stopProcess, type ClickhouseServer } from '../test/clickhouse-server.ts';
import { encodeTraces, traceRequest } from '../test/otlp-fixtures.ts';
import { freePort } from '../test/sluice-processes.ts';
import { ClickhouseServerStorage } from './clickhouse.ts';
import type { SchemaOptions } from './schema.ts';

const DB = 'sluice_test';
let server: ClickhouseServer;
let storage: ClickhouseServerStorage;

beforeAll(async () => {
  server = await startClickhouseServer();
  storage = new ClickhouseServerStorage({ url: server.url, database: DB });
  await storage.start();
  await storage.query(`CREATE DATABASE IF NOT EXISTS ${DB}`);
  await storage.query(`CREATE TABLE ${DB}.points (s String, n UInt64, f Float64, a Array(String)) ENGINE = MergeTree ORDER BY n`);
}, 120_000);
afterAll(async () => {
  await storage?.shutdown();
  await server?.stop();
});

const rows = async (sql: string) => (await storage.query(sql)).split('\n').filter(Boolean).map((line) => JSON.parse(line));
const count = async () => Number((await rows(`SELECT count() AS n FROM ${DB}.points`))[0].n);

describe('ClickhouseServerStorage on a real server', () => {
  it('starts: health check, then learns the server version and whether it takes dedup tokens', async () => {
    expect(storage.serverVersion).toMatch(/^\d+\.\d+/);
    expect(storage.dedupTokens, `server ${storage.serverVersion}`).toBe(false);
    // Why the driver asks first: 18.16 refuses the setting outright.
    await expect(storage.query("SELECT 1 SETTINGS insert_deduplication_token = 'x'")).rejects.toThrow(/code 115: Unknown setting insert_deduplication_token/);
  });

  it('inserts RowBinary chunks as sent, in the batch column order, and reads them back as JSONEachRow', async () => {
    const long = 'é'.repeat(100); // 200 bytes: a two-byte length prefix
    const chunks = [
      Buffer.concat([row(['x', 'y'], 'one', 1.5, 1n), row([], long, -0.25, 2n)]),
      row(['z'], 'three', 1e300, 18446744073709551615n),
    ];
    await storage.insert({ table: 'points', columns: ['a', 's', 'f', 'n'], chunks });
    expect(await rows(`SELECT s, n, f, a FROM ${DB}.points ORDER BY n`)).toEqual([
      { s: 'one', n: '1', f: 1.5, a: ['x', 'y'] },
      { s: long, n: '2', f: -0.25, a: [] },
      { s: 'three', n: '18446744073709551615', f: 1e300, a: ['z'] },
    ]);
    expect(await storage.query(`SELECT s FROM ${DB}.points WHERE n = 1`, 'TSV')).toBe('one\n');
  });

  it('still inserts a batch that carries a dedup token on a server without token support (stored twice)', async () => {
    const before = await count();
    const batch = { table: 'points', columns: ['a', 's', 'f', 'n'], chunks: [row([], 'again', 0, 100n)], dedupToken: 'stream:7-7' };
    await storage.insert(batch);
    await storage.insert(batch);
    expect(await count()).toBe(before + 2);
  });

  it('refuses rows that do not parse as the columns: permanent, with the ClickHouse code', async () => {
    const before = await count();
    const truncated = row(['x'], 'cut', 1, 5n).subarray(0, 12);
    const err = await storage.insert({ table: 'points', columns: ['a', 's', 'f', 'n'], chunks: [truncated] }).catch((e) => e);
    expect(err).toBeInstanceOf(SluiceError);
    expect(err.code).toBe('bad_request');
    expect(err.retryable).toBe(false);
    expect(err.message).toMatch(/code 33 CANNOT_READ_ALL_DATA: Cannot read all data/);
    expect(await count()).toBe(before);
  });

  it('treats a missing table as retryable: the schema is missing, not the rows at fault', async () => {
    const err = await storage.insert({ table: 'not_migrated', columns: ['s'], chunks: [Buffer.from([0])] }).catch((e) => e);
    expect(err.code).toBe('unavailable');
    expect(err.retryable).toBe(true);
    expect(err.message).toMatch(/code 60: .*doesn't exist.*sluice migrate/);
  });

  it('does not migrate on start unless asked; asked, it reports why 18.16 cannot hold the otel schema', async () => {
    const plain = new ClickhouseServerStorage({ url: server.url, database: 'sluice_not_migrated' });
    await plain.start();
    await plain.shutdown();
    expect(await rows("SELECT name FROM system.databases WHERE name = 'sluice_not_migrated'")).toEqual([]);

    const migrating = new ClickhouseServerStorage({ url: server.url, database: 'sluice_migrated', migrateOnStart: true });
    await expect(migrating.start()).rejects.toThrow(/^cannot use ClickHouse at http:\/\/default@127\.0\.0\.1:\d+: ClickHouse error code 62: Syntax error: .* CODEC\(ZSTD\(1\)\)/);
    // migrate() did run: the ledger exists, with no version recorded.
    expect(await rows('SELECT count() AS n FROM sluice_migrated.sluice_schema_migrations')).toEqual([{ n: '0' }]);
  });

  it('fails start() with the URL (never the password) when nobody answers', async () => {
    const port = await freePort();
    const down = new ClickhouseServerStorage({ url: `http://default:hunter2@127.0.0.1:${port}`, requestTimeoutMs: 2000 });
    const err = await down.start().catch((e) => e);
    expect(err.code).toBe('unavailable');
    expect(err.message).toBe(`cannot reach ClickHouse at http://default@127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`);
  });

  it('refuses bad credentials at start, not at the first insert', async () => {
    const url = new URL(server.url);
    url.username = 'nobody';
    url.password = 'hunter2';
    const err = await new ClickhouseServerStorage({ url: url.href }).start().catch((e) => e);
    expect(err.message).toMatch(/^cannot use ClickHouse at http:\/\/nobody@127\.0\.0\.1:\d+: ClickHouse error code 192: Unknown user nobody/);
    expect(err.message).not.toContain('hunter2');
  });

  // Last: stops the server under a started driver.
  it('throws a retryable error when the server goes away after start', async () => {
    await stopProcess(server.process);
    const err = await storage.insert({ table: 'points', columns: ['a', 's', 'f', 'n'], chunks: [row([], 'lost', 0, 9n)] }).catch((e) => e);
    expect(err.code).toBe('unavailable');
    expect(err.retryable).toBe(true);
    expect(err.message).toMatch(/^ClickHouse at http:\/\/default@127\.0\.0\.1:\d+ is unavailable: .*(ECONNREFUSED|ECONNRESET|socket hang up)/);
  });
});

describe('ClickhouseServerStorage behind a failing HTTP peer', () => {
  // What a load balancer in front of a cluster does when the servers behind it are in trouble.
  let peer: Server;
  let insertResponse: 'hang' | '502';
  let viaPeer: ClickhouseServerStorage;

  beforeAll(async () => {
    peer = createHttpServer((req, res) => {
      if (req.url?.startsWith('/ping')) return void res.end('Ok.\n');
      if (!req.url?.includes('query=INSERT')) return void req.resume().on('end', () => res.end('{"version":"proxy","dedup":"0"}\n'));
      req.resume();
      if (insertResponse === '502') res.writeHead(502, { 'content-type': 'text/html' }).end('<html><body>502 Bad Gateway</body></html>');
    });
    await new Promise<void>((resolve) => peer.listen(0, '127.0.0.1', resolve));
    viaPeer = new ClickhouseServerStorage({ url: `http://default@127.0.0.1:${(peer.address() as AddressInfo).port}`, requestTimeoutMs: 500 });
    await viaPeer.start();
  });
  afterAll(async () => {
    await viaPeer?.shutdown();
    peer?.closeAllConnections();
    await new Promise((resolve) => peer?.close(resolve));
  });

  for (const [mode, reason] of [['502', /502 Bad Gateway/], ['hang', /Timeout error/]] as const) {
    it(`throws a retryable error on ${mode === '502' ? 'a 5xx without a ClickHouse exception' : 'a request timeout'}`, async () => {
      insertResponse = mode;
      const err = await viaPeer.insert({ table: 'points', columns: ['s'], chunks: [Buffer.from([0])] }).catch((e) => e);
      expect(err.code).toBe('unavailable');
      expect(err.retryable).toBe(true);
      expect(err.message).toMatch(reason);
    });
  }
});

describe('the insert the driver sends, as an HTTP peer receives it', () => {
  // A peer posing as a current server (tokens, partition limit): it records each insert's query string.
  let peer: Server;
  const inserts: URLSearchParams[] = [];
  const storages: ClickhouseServerStorage[] = [];
  beforeAll(async () => {
    peer = createHttpServer((req, res) => {
      const params = new URL(req.url!, 'http://peer').searchParams;
      if (req.url?.startsWith('/ping')) return void res.end('Ok.\n');
      if (params.get('query')?.startsWith('INSERT')) inserts.push(params);
      req.resume().on('end', () => res.end('{"version":"25.8.1.1","dedup":"1","partitions":"1"}\n'));
    });
    await new Promise<void>((resolve) => peer.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await Promise.all(storages.map((s) => s.shutdown()));
    peer?.closeAllConnections();
    await new Promise((resolve) => peer?.close(resolve));
  });

  const sentInsert = async (schema: SchemaOptions) => {
    const storage = new ClickhouseServerStorage({ url: `http://default@127.0.0.1:${(peer.address() as AddressInfo).port}`, database: 'otel', schema });
    storages.push(storage);
    await storage.start();
    inserts.length = 0;
    await storage.insert({ table: 'otel_traces', columns: ['SourceId', 'TraceId'], chunks: [Buffer.from([1, 0x73, 1, 0x74])], dedupToken: 'SLUICE_ROWS_OTEL_TRACES:41-57' });
    expect(inserts).toHaveLength(1);
    return inserts[0]!;
  };

  it('into a Distributed table: waits for every shard (insert_distributed_sync), with the batch token and the partition limit lifted', async () => {
    const sent = await sentInsert({ cluster: 'sluice', replicated: true, distributed: true });
    // The plain name: in distributed mode it is the Distributed table.
    expect(sent.get('query')).toBe('INSERT INTO `otel`.`otel_traces` (`SourceId`, `TraceId`) FORMAT RowBinary');
    expect(sent.get('insert_distributed_sync')).toBe('1');
    expect(sent.get('insert_deduplication_token')).toBe('SLUICE_ROWS_OTEL_TRACES:41-57');
    expect(sent.get('max_partitions_per_insert_block')).toBe('0');
  });

  it('without distributed mode: the same insert, without the Distributed setting', async () => {
    for (const schema of [{}, { cluster: 'sluice', replicated: true }]) {
      const sent = await sentInsert(schema);
      expect(sent.get('query')).toBe('INSERT INTO `otel`.`otel_traces` (`SourceId`, `TraceId`) FORMAT RowBinary');
      expect(sent.has('insert_distributed_sync'), JSON.stringify(schema)).toBe(false);
      expect(sent.get('insert_deduplication_token')).toBe('SLUICE_ROWS_OTEL_TRACES:41-57');
    }
  });
});

describe('ClickhouseServerStorage on a current engine (chDB behind the test facade)', () => {
  let facade: ClickhouseFacade;
  let current: ClickhouseServerStorage;
  beforeAll(async () => {
    facade = await startClickhouseFacade();
    current = new ClickhouseServerStorage({ url: facade.url, migrateOnStart: true });
    await current.start();
  }, 60_000);
  afterAll(async () => {
    await current?.shutdown();
    await facade?.stop();
  });

  it('inserts a batch whose rows span more than 100 days in one insert: it holds many requests, each checked at the door', async () => {
    const day = 86_400_000_000_000n;
    const today = (BigInt(Date.now()) * 1_000_000n) / day * day;
    const chunks = [0, 1, 2].map((r) => transcodeOtlp('traces', 'protobuf', encodeTraces(traceRequest({ spans: 60, name: 'spread', startNanos: (i) => today - BigInt(r * 60 + i) * day })), 'src').tables[0]!);
    await current.insert({ table: 'otel_traces', columns: chunks[0]!.columns, chunks: chunks.map((c) => c.data) });
    expect(await facade.rows("SELECT count() AS n, uniq(toDate(Timestamp)) AS days FROM otel.otel_traces WHERE SpanName = 'spread'")).toEqual([{ n: 180, days: 180 }]);
  });
});

/** One RowBinary row of (a Array(String), s String, f Float64, n UInt64). */
function row(a: string[], s: string, f: number, n: bigint): Buffer {
  const float = Buffer.alloc(8);
  float.writeDoubleLE(f);
  const uint = Buffer.alloc(8);
  uint.writeBigUInt64LE(n);
  return Buffer.concat([varint(a.length), ...a.map(string), string(s), float, uint]);
}

function string(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  return Buffer.concat([varint(bytes.length), bytes]);
}

function varint(value: number): Buffer {
  const out: number[] = [];
  for (; value >= 0x80; value >>>= 7) out.push((value & 0x7f) | 0x80);
  out.push(value);
  return Buffer.from(out);
}

