/**
 * The read-only ClickHouse endpoint of `sluice serve` (SLUICE_QUERY_PORT), driven by
 * @clickhouse/client (a real client we did not write) and by raw requests shaped like those of
 * Grafana's ClickHouse data source with protocol http. Those come from clickhouse-go v2, read
 * at github.com/ClickHouse/clickhouse-go (conn_http.go, conn_http_query.go) and
 * github.com/grafana/clickhouse-datasource (pkg/plugin/driver.go, pkg/macros/macros.go):
 *   - POST / with the SQL as the body; URL parameters `database` (the data source's default
 *     database), `default_format=Native`, `client_protocol_version=54460`, `query_id`, and the
 *     data source's custom settings;
 *   - credentials as Basic auth from the URL's userinfo (X-ClickHouse-User/Key behind TLS);
 *   - `Accept-Encoding: gzip` (the data source's HTTP compression), without
 *     enable_http_compression, so ClickHouse answers uncompressed;
 *   - at connect, `SELECT displayName(), version(), revision(), timezone()` read at revision
 *     54460, later answers at the revision() it returned; `SELECT 1` as the ping;
 *   - queries with Grafana's macros expanded (`$__timeFilter_ms` to fromUnixTimestamp64Milli,
 *     `$__timeInterval` to toStartOfInterval(toDateTime(col), INTERVAL n second)), identifiers
 *     in double quotes, and the schema browser's SHOW DATABASES / SHOW TABLES / system.columns.
 * The Go client's reading of Native is test/native-decoder.ts.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { ClickHouseLogLevel, createClient as createClickHouseClient, type ClickHouseClient, type ClickHouseClientConfigOptions, type ClickHouseError } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../core/log.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { decodeNative, nativeRows } from './native-decoder.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';
import { freePort } from './sluice-processes.ts';

const USER = 'grafana';
const PASSWORD = 'query-endpoint-test-secret';
const CLICKHOUSE_GO_REVISION = 54460;
const GRAFANA_USER_AGENT = 'clickhouse-go/2.40.1 (lv:go/1.24.4; os:linux) grafana/12.1.0 clickhouse-datasource/4.10.1';

let sluice: TestSluice;
let base: string;
let client: ClickHouseClient;
let logged = '';
const service = `svc-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  const log = createLogger('info', new Writable({ write: (chunk, _encoding, done) => { logged += String(chunk); done(); } }));
  sluice = await startTestSluice({
    'query.port': await freePort(),
    'query.password': PASSWORD,
    'query.maxExecutionSeconds': 2,
    'query.maxResultRows': 1000,
    // Low, so the memory finding's statements fail fast here (the default is 512 MiB).
    'query.maxMemoryBytes': 64 * 1024 * 1024,
    // X-Forwarded-For from the test itself names the client address (the throttling case).
    'limits.trustedProxies': ['127.0.0.1'],
  }, log);
  base = `http://127.0.0.1:${sluice.queryPort}`;
  for (const [name, spans] of [['GET /cart', 5], ['POST /pay', 3]] as const) {
    const sent = await fetch(`${sluice.baseUrl}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf', 'x-api-key': sluice.apiKey },
      body: encodeTraces(traceRequest({ spans, name, service })),
    });
    expect(sent.status).toBe(200);
  }
  client = createClient({ url: base, username: USER, password: PASSWORD });
  // The rows leave the local log within a flush interval.
  await eventually(async () => (await sluice.rows(`SELECT count() AS n FROM otel.otel_traces WHERE ServiceName = '${service}'`))[0]?.n === 8);
});

afterAll(async () => {
  await client?.close();
  await sluice?.stop();
});

/** @clickhouse/client, quiet: the errors it would log are what the tests expect. */
const createClient = (options: ClickHouseClientConfigOptions) => createClickHouseClient({ ...options, log: { level: ClickHouseLogLevel.OFF } });

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** The ClickHouse error a client call fails with. */
async function clickhouseError(call: Promise<unknown>): Promise<ClickHouseError> {
  const error = await call.then(() => undefined, (err: unknown) => err);
  if (!error) throw new Error('expected the call to fail');
  return error as ClickHouseError;
}

/** A request as clickhouse-go sends it for Grafana's data source (see the top of this file). */
function grafanaRequest(sql: string, extra: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<Response> {
  const params = new URLSearchParams({ client_protocol_version: String(CLICKHOUSE_GO_REVISION), database: 'otel', default_format: 'Native', ...extra, query_id: randomUUID() });
  return fetch(`${base}/?${params}`, {
    method: 'POST',
    headers: { authorization: basic(USER, PASSWORD), 'user-agent': GRAFANA_USER_AGENT, 'accept-encoding': 'gzip', ...headers },
    body: sql,
  });
}

describe('the query endpoint', () => {
  it('answers health checks without credentials', async () => {
    for (const path of ['/ping', '/']) {
      const response = await fetch(base + path);
      expect(response.status).toBe(200);
      expect(await response.text()).toBe('Ok.\n');
    }
    expect((await client.ping()).success).toBe(true);
  });

  it('runs its statements on the chDB read threads, one for each statement its gate and the console\'s let run at once', async () => {
    const report = await (await fetch(`${sluice.baseUrl}/api/v1/ready`)).json() as { components: Record<string, { ok: boolean; figures?: Record<string, number> }> };
    // SLUICE_QUERY_MAX_CONCURRENT (2 by default) plus the console's two reads at once.
    expect(report.components['chdb read threads']).toMatchObject({ ok: true, figures: { threads: 4 } });
  });

  it('serves @clickhouse/client: the telemetry tables by their names, in the formats it asks for', async () => {
    const result = await client.query({
      query: 'SELECT SpanName, count() AS spans FROM otel_traces WHERE ServiceName = {service:String} GROUP BY SpanName ORDER BY SpanName',
      query_params: { service },
      format: 'JSONEachRow',
    });
    expect((await result.json<{ SpanName: string; spans: string | number }>()).map((row) => [row.SpanName, Number(row.spans)])).toEqual([['GET /cart', 5], ['POST /pay', 3]]);
    expect(result.response_headers['x-clickhouse-format']).toBe('JSONEachRow');
    expect(JSON.parse(String(result.response_headers['x-clickhouse-summary']))).toMatchObject({ read_rows: expect.stringMatching(/^\d+$/), written_rows: '0' });

    const sql = `SELECT SpanName, ServiceName FROM otel.otel_traces WHERE ServiceName = '${service}' ORDER BY SpanName LIMIT 1`;
    const json = await (await client.query({ query: sql, format: 'JSON' })).json<{ data: unknown[]; meta: unknown[] }>();
    expect(json.data).toEqual([{ SpanName: 'GET /cart', ServiceName: service }]);
    expect(await (await client.query({ query: sql, format: 'JSONCompactEachRowWithNamesAndTypes' })).json()).toEqual([
      ['SpanName', 'ServiceName'], ['LowCardinality(String)', 'LowCardinality(String)'], ['GET /cart', service],
    ]);
    expect(await (await client.query({ query: sql, format: 'TabSeparated' })).text()).toBe(`GET /cart\t${service}\n`);

    const rowBinary = await grafanaRequest(sql, { default_format: 'RowBinaryWithNamesAndTypes' });
    expect(Buffer.from(await rowBinary.arrayBuffer()).subarray(0, 10)).toEqual(Buffer.from([2, 8, ...Buffer.from('SpanName')]));

    const compressed = createClient({ url: base, username: USER, password: PASSWORD, compression: { response: true } });
    try {
      const gzipped = await compressed.query({ query: sql, format: 'JSONEachRow' });
      expect(gzipped.response_headers['content-encoding']).toBe('gzip');
      expect(await gzipped.json()).toEqual([{ SpanName: 'GET /cart', ServiceName: service }]);
    } finally {
      await compressed.close();
    }
  });

  it('refuses writes, DDL, SET and more than one statement, as ClickHouse refuses a readonly user', async () => {
    const refusals = await Promise.all([
      clickhouseError(client.insert({ table: 'otel_traces', values: [{ SpanName: 'forged' }], format: 'JSONEachRow' })),
      clickhouseError(client.command({ query: 'CREATE TABLE forged (a UInt8) ENGINE = Memory' })),
      clickhouseError(client.command({ query: 'DROP TABLE otel_traces' })),
      clickhouseError(client.command({ query: 'ALTER TABLE otel_traces DELETE WHERE 1' })),
      clickhouseError(client.command({ query: 'SET readonly = 0' })),
      clickhouseError(client.command({ query: 'SYSTEM STOP MERGES' })),
    ]);
    expect(refusals.map((err) => err.code)).toEqual(['164', '164', '164', '164', '164', '164']);
    expect(refusals[1]!.message).toMatch(/Cannot execute query in readonly mode/);
    const multi = await clickhouseError(client.query({ query: 'SELECT 1; DROP TABLE otel_traces' }));
    expect(multi.code).toBe('62');
    expect(multi.message).toMatch(/Multi-statements are not allowed/);
    expect(await sluice.rows(`SELECT count() AS n FROM otel.otel_traces WHERE ServiceName = '${service}'`)).toEqual([{ n: 8 }]);
    expect(await sluice.rows("SELECT count() AS n FROM system.tables WHERE database = 'otel' AND name = 'forged'")).toEqual([{ n: 0 }]);
  });

  it('refuses settings that would lift the limits, in the URL and in the statement', async () => {
    const lifted = await Promise.all([
      clickhouseError(client.query({ query: 'SELECT 1', clickhouse_settings: { max_execution_time: 0 } })),
      clickhouseError(client.query({ query: 'SELECT 1', clickhouse_settings: { max_result_rows: '1000000' } })),
      clickhouseError(client.query({ query: 'SELECT 1', clickhouse_settings: { readonly: '0' } })),
      clickhouseError(client.query({ query: 'SELECT 1', clickhouse_settings: { max_memory_usage: '0' } })),
      clickhouseError(client.query({ query: 'SELECT * FROM (SELECT 1 SETTINGS readonly = 0) SETTINGS max_result_rows = 0' })),
    ]);
    expect(lifted.map((err) => err.code)).toEqual(['452', '452', '164', '452', '164']);
    // Lowered, they apply.
    const lowered = await clickhouseError(client.query({ query: 'SELECT number FROM numbers(5)', clickhouse_settings: { max_result_rows: '2' } }));
    expect(lowered.code).toBe('396');
  });

  it('stops a statement at the time limit and at the row limit', async () => {
    const slow = await fetch(`${base}/?query=${encodeURIComponent('SELECT count() FROM system.numbers')}`, { headers: { authorization: basic(USER, PASSWORD) } });
    expect(slow.status).toBe(408);
    expect(slow.headers.get('x-clickhouse-exception-code')).toBe('159');
    expect(await slow.text()).toMatch(/^Code: 159\. DB::Exception: Timeout exceeded: elapsed [\d.]+ ms, maximum: 2000 ms/);
    const many = await clickhouseError(client.query({ query: 'SELECT number FROM numbers(5000)' }));
    expect(many.code).toBe('396');
    expect(many.message).toMatch(/Limit for result exceeded, max rows: 1\.00 thousand/);
  });

  it('bounds every statement\'s memory, so the statements that took 3 GiB and ran past their time limit fail at once', async () => {
    const settings = await (await client.query({ query: "SELECT getSetting('max_memory_usage') AS memory, getSetting('allow_introspection_functions') AS introspection", format: 'JSONEachRow' })).json();
    expect(settings).toEqual([{ memory: 64 * 1024 * 1024, introspection: false }]);
    for (const sql of ['SELECT length(groupArray(number)) FROM numbers(150000000)', 'SELECT sum(arraySum(arrayMap(x -> sipHash64(x,x,x,x), range(300000000))))']) {
      const response = await fetch(`${base}/?query=${encodeURIComponent(sql)}`, { headers: { authorization: basic(USER, PASSWORD) } });
      expect(response.headers.get('x-clickhouse-exception-code'), sql).toBe('241');
      expect(await response.text(), sql).toMatch(/^Code: 241\. DB::Exception: Query memory limit exceeded: .*maximum: 64\.00 MiB.*\(MEMORY_LIMIT_EXCEEDED\)/s);
    }
    // A client may lower it, not lift it.
    const lowered = await clickhouseError(client.query({ query: 'SELECT length(groupArray(number)) FROM numbers(10000000)', clickhouse_settings: { max_memory_usage: '8000000' } }));
    expect(lowered.code).toBe('241');
    expect(lowered.message).toMatch(/maximum: 7\.63 MiB/);
    expect((await clickhouseError(client.query({ query: 'SELECT 1', clickhouse_settings: { max_memory_usage: String(65 * 1024 * 1024) } }))).code).toBe('452');
  });

  it('shows the telemetry tables only: files by their path, the server\'s settings, disks, processes and code are refused', async () => {
    const refused = await Promise.all([
      'EXISTS TABLE default.`/etc/hostname`', "SELECT getServerSetting('path')", 'SELECT * FROM system.disks', 'SELECT query FROM system.processes',
      'SELECT * FROM system.stack_trace', "SELECT * FROM merge('system', '^processes$')", 'SELECT * FROM relay_submissions',
    ].map((query) => clickhouseError(client.query({ query }))));
    expect(refused.map((err) => err.code)).toEqual(Array(7).fill('497'));
    expect(refused[0]!.message).toMatch(/Not enough privileges: .*table default\.\/etc\/hostname is not one of them/);
    expect(await (await client.query({ query: 'SHOW DATABASES', format: 'JSONEachRow' })).json()).toEqual([{ name: 'otel' }]);
    expect(await (await client.query({ query: 'EXISTS TABLE otel.otel_traces', format: 'JSONEachRow' })).json()).toEqual([{ result: 1 }]);
    expect(await (await client.query({ query: 'SHOW TABLES FROM otel', format: 'JSONEachRow' })).json()).toContainEqual({ name: 'otel_logs' });
    const listed = await (await client.query({ query: 'SELECT DISTINCT database, table FROM system.columns', format: 'JSONEachRow' })).json<{ table: string }>();
    expect(listed.map((row) => row.table)).toContain('otel_traces');
    expect(listed.map((row) => row.table)).not.toContain('relay_submissions');
    expect((await clickhouseError(client.query({ query: 'SELECT 1', clickhouse_settings: { allow_introspection_functions: 1 } }))).code).toBe('164');
  });

  it('answers wrong credentials as ClickHouse does, throttles an address that keeps guessing, logs no password', async () => {
    const wrong = await fetch(`${base}/?query=SELECT+1`, { headers: { authorization: basic(USER, 'guess-1') } });
    expect(wrong.status).toBe(403);
    expect(wrong.headers.get('x-clickhouse-exception-code')).toBe('516');
    expect(await wrong.text()).toBe('Code: 516. DB::Exception: grafana: Authentication failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED)\n');
    const wrongClient = createClient({ url: base, username: USER, password: 'guess-2' });
    try {
      expect((await clickhouseError(wrongClient.query({ query: 'SELECT 1' }))).code).toBe('516');
    } finally {
      await wrongClient.close();
    }

    const from = (address: string, password: string) => fetch(`${base}/?query=SELECT+1`, { headers: { authorization: basic(USER, password), 'x-forwarded-for': address } });
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await from('10.20.30.40', `guess-${i}`)).status);
    expect(statuses.slice(0, 11)).toEqual(Array(11).fill(403));
    expect(statuses[11]).toBe(429);
    const heldOff = await from('10.20.30.40', PASSWORD);
    expect(heldOff.status).toBe(429);
    expect(Number(heldOff.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await from('10.20.30.41', PASSWORD)).status).toBe(200);

    expect(logged).toContain('query endpoint: authentication failed');
    expect(logged).not.toContain(PASSWORD);
    expect(logged).not.toContain('guess-');
  });

  it('answers requests shaped like Grafana\'s ClickHouse data source (clickhouse-go over HTTP)', async () => {
    const hello = await grafanaRequest('SELECT displayName(), version(), revision(), timezone()');
    expect(hello.status).toBe(200);
    expect(hello.headers.get('content-encoding')).toBeNull(); // Accept-Encoding alone does not compress
    const [columns] = decodeNative(new Uint8Array(await hello.arrayBuffer()), CLICKHOUSE_GO_REVISION);
    expect(columns!.map((column) => column.type)).toEqual(['String', 'String', 'UInt32', 'String']);
    // From here on the driver reads at the server's revision.
    const revision = columns![2]!.values[0] as number;
    expect(revision).toBeGreaterThanOrEqual(CLICKHOUSE_GO_REVISION);

    const ping = decodeNative(new Uint8Array(await (await grafanaRequest('SELECT 1')).arrayBuffer()), revision);
    expect(ping[0]!.map((column) => column.name)).toEqual(['1']);

    const now = Date.now();
    const panels = [
      // A time series panel: $__timeInterval and $__timeFilter_ms expanded as the data source's macros do.
      `SELECT toStartOfInterval(toDateTime("Timestamp"), INTERVAL 60 second) as time, "SpanName", count() as spans FROM "otel"."otel_traces" WHERE ( "Timestamp" >= fromUnixTimestamp64Milli(${now - 3_600_000}) AND "Timestamp" <= fromUnixTimestamp64Milli(${now + 60_000}) ) AND "ServiceName" = '${service}' GROUP BY time, "SpanName" ORDER BY time, "SpanName"`,
      // A traces table: the columns the data source's trace view reads.
      `SELECT "Timestamp", "TraceId", "SpanId", "ParentSpanId", "ServiceName", "SpanName", "Duration", "SpanAttributes", "ResourceAttributes", "Events.Name" FROM otel_traces WHERE "ServiceName" = '${service}' ORDER BY "Timestamp" LIMIT 1000`,
    ];
    for (const sql of panels) {
      const native = await grafanaRequest(sql, { session_timezone: 'UTC' });
      expect(native.status).toBe(200);
      const rows = nativeRows(decodeNative(new Uint8Array(await native.arrayBuffer()), revision));
      const asJson = await grafanaRequest(sql, { session_timezone: 'UTC', default_format: 'JSONCompactEachRow', output_format_json_quote_64bit_integers: '1' });
      expect(rows).toEqual((await asJson.text()).split('\n').filter(Boolean).map((line) => JSON.parse(line)));
      expect(rows.length).toBeGreaterThan(0);
    }

    // The schema browser, behind TLS (X-ClickHouse-User/Key instead of Basic auth).
    const tls = { authorization: '', 'x-clickhouse-user': USER, 'x-clickhouse-key': PASSWORD, 'x-clickhouse-ssl-certificate-auth': 'off' };
    const names = async (sql: string) => {
      const response = await fetch(`${base}/?${new URLSearchParams({ database: 'otel', default_format: 'Native', client_protocol_version: String(CLICKHOUSE_GO_REVISION) })}`, {
        method: 'POST', headers: Object.fromEntries(Object.entries(tls).filter(([, value]) => value)), body: sql,
      });
      expect(response.status).toBe(200);
      return decodeNative(new Uint8Array(await response.arrayBuffer()), CLICKHOUSE_GO_REVISION).flatMap((block) => block[0]!.values);
    };
    expect(await names('SHOW DATABASES')).toContain('otel');
    expect(await names('SHOW TABLES FROM "otel"')).toEqual(expect.arrayContaining(['otel_traces', 'otel_logs', 'otel_metrics_gauge']));
    expect(await names("SELECT name, type, table FROM system.columns WHERE database = 'otel' AND table = 'otel_traces'")).toEqual(expect.arrayContaining(['Timestamp', 'SpanAttributes']));
  });

  it('bounds the request body and refuses what it does not serve', async () => {
    const big = await fetch(`${base}/`, { method: 'POST', headers: { authorization: basic(USER, PASSWORD) }, body: `SELECT '${'x'.repeat(2 * 1024 * 1024)}'` });
    expect(big.status).toBe(413);
    expect(big.headers.get('x-clickhouse-exception-code')).toBe('229');
    const gzipped = await fetch(`${base}/?enable_http_compression=1&default_format=JSONEachRow`, { method: 'POST', headers: { authorization: basic(USER, PASSWORD), 'accept-encoding': 'gzip' }, body: 'SELECT 42 AS answer' });
    expect(gzipped.headers.get('content-encoding')).toBe('gzip');
    expect(await gzipped.text()).toBe('{"answer":42}\n'); // fetch decompresses it
    const native = await fetch(`${base}/?compress=1`, { method: 'POST', headers: { authorization: basic(USER, PASSWORD) }, body: 'SELECT 1' });
    expect(native.status).toBe(501);
    expect((await fetch(`${base}/play`)).status).toBe(404);
  });
});
