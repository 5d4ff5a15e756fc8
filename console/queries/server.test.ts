/**
 * The same queries through a ClickHouse server's driver: ConsoleQueries on ClickhouseReader
 * (@clickhouse/client over HTTP), rows put in with ClickhouseServerStorage. The ClickHouse
 * server package here (18.16) is too old for query parameters and the schema, so the server is
 * the test facade (test/clickhouse-facade.ts: chDB behind the part of ClickHouse's HTTP
 * interface the client uses, `param_*` included). What this adds to the chDB tests: values
 * escaped by the client for the URL and read back as data, the current database, limits and
 * exceptions as HTTP answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClickhouseReader } from '../../storage/clickhouse-reader.ts';
import { ClickhouseServerStorage } from '../../storage/clickhouse.ts';
import { startClickhouseFacade, type ClickhouseFacade } from '../../test/clickhouse-facade.ts';
import { QueryLimitError } from './errors.ts';
import { ConsoleQueries } from './queries.ts';
import { hexId, ingestAgent, ingestOtlp, logsRequest, metricsRequest, ms, pointTimes, tracesRequest } from '../../test/console-queries-fixture.ts';

const NASTY = ["it's", 'back\\slash', "') OR 1=1 --", '{x:String}', 'tab\there', 'line\nbreak', '\\N', "\\'", 'ünïcödé'];

let facade: ClickhouseFacade;
let storage: ClickhouseServerStorage;
let reader: ClickhouseReader;
let queries: ConsoleQueries;
const now = Date.now();
const range = { from: now - 3_600_000, to: now };
const traceIds = NASTY.map(() => hexId(16));
const minute = Math.floor(now / 60_000) * 60 - 30 * 60;

beforeAll(async () => {
  facade = await startClickhouseFacade();
  storage = new ClickhouseServerStorage({ url: facade.url, migrateOnStart: true });
  await storage.start();
  reader = new ClickhouseReader({ url: facade.url });
  queries = new ConsoleQueries(reader, 'otel');
  for (const source of ['src-a', 'src-b']) {
    for (const [i, s] of NASTY.entries()) {
      const time = ms(now - 600_000 + i);
      await ingestOtlp(storage, 'logs', logsRequest(s, [{ time, body: `body ${s} end`, attributes: { [s]: s } }]), source);
      await ingestOtlp(storage, 'traces', tracesRequest(s, [{ traceId: traceIds[i]!, spanId: hexId(8), name: s, start: time, durationNs: 1000n, attributes: { [s]: s } }]), source);
    }
    // A counter: +60 a minute.
    await ingestOtlp(storage, 'metrics', metricsRequest('api', [{
      name: 'requests', sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: Array.from({ length: 20 }, (_, k) => ({ ...pointTimes(minute + k * 60, minute - 60), asInt: 60 * k })) },
    }]), source);
    await ingestAgent(storage, 'heartbeat', { agentId: 'a1', version: '1.0' }, source, now - 60_000);
  }
}, 60_000);
afterAll(async () => {
  await reader?.shutdown();
  await storage?.shutdown();
  await facade?.stop();
});

describe('ConsoleQueries on a ClickHouse server driver', () => {
  it('matches values the client escaped for the URL as data, in every string filter', async () => {
    expect(await queries.services(['src-a'], range)).toEqual(['api', ...NASTY].sort());
    for (const [i, s] of NASTY.entries()) {
      const logs = await queries.logs(['src-a'], { ...range, services: [s], text: s.toUpperCase(), attributes: [{ key: s, value: s }] });
      expect(logs.logs.map((e) => [e.sourceId, e.body]), s).toEqual([['src-a', `body ${s} end`]]);
      const traces = await queries.traces(['src-a'], { ...range, operation: s, attributes: [{ key: s, value: s }] });
      expect(traces.map((t) => t.traceId), s).toEqual([traceIds[i]]);
    }
  });

  it('answers every kind of query, restricted to the tenant', async () => {
    const page = await queries.logs(['src-a'], { ...range, limit: 4 });
    const next = await queries.logs(['src-a'], { ...range, limit: 100, cursor: page.cursor });
    expect([...page.logs, ...next.logs].map((e) => e.body)).toEqual(NASTY.map((s) => `body ${s} end`).reverse());
    const view = await queries.trace(['src-a'], traceIds[0]!);
    expect(view?.spans.map((span) => [span.name, span.attributes])).toEqual([[NASTY[0], { [NASTY[0]!]: NASTY[0] }]]);
    const rate = await queries.metric(['src-a'], { ...range, name: 'requests', kind: 'sum', aggregation: 'rate', stepSeconds: 60 });
    // The first point (0, its counter started a minute before: read) adds nothing; then 60 a minute.
    expect(rate.series.map((s) => s.points.filter(([, v]) => v !== null).map(([, v]) => v))).toEqual([[0, ...Array.from({ length: 19 }, () => 1)]]);
    expect((await queries.metricNames(['src-a'], range)).map((m) => m.name)).toEqual(['requests']);
    expect((await queries.agents(['src-a'])).map((a) => a.sourceId)).toEqual(['src-a']);
    expect(await queries.deploys(['src-a'], range)).toEqual([]);
  });

  it("answers a limit reached as a QueryLimitError, from the server's HTTP answer", async () => {
    const limited = new ConsoleQueries(reader, 'otel', { maxRowsToRead: 5 });
    const err = await limited.logs(['src-a'], { ...range, text: 'never there' }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(QueryLimitError);
    expect(err).toMatchObject({ limit: 'rows_read', statusCode: 422 });
  });
});
