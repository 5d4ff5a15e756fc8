/**
 * SQL metacharacters in every string filter are matched as data: rows whose service, name,
 * attribute key and value, text and host ARE these strings are found exactly by them, nothing
 * else is (as a filter spliced into SQL would match everything, or fail), and the statements
 * carry the values only as bound parameters.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleQueries } from './queries.ts';
import {
  attrs, hexId, ingestAgent, ingestOtlp, logsRequest, metricsRequest, ms, openQueries, pointTimes, tracesRequest, type QueriesFixture,
} from '../../test/console-queries-fixture.ts';

const NASTY = [
  "it's", 'back\\slash', "') OR 1=1 --", '{x:String}', '{p0:String}', '"; DROP TABLE otel.otel_logs; --',
  "\\'", '%_*', 'tab\there', 'line\nbreak', '\\N', 'ünïcödé', '`backtick`', "' UNION ALL SELECT 1 --",
];

let fixture: QueriesFixture;
let queries: ConsoleQueries;
const statements: Array<{ sql: string; params: Record<string, string> }> = [];
const now = Date.now();
const range = { from: now - 3_600_000, to: now };
const traceIds = NASTY.map(() => hexId(16));

beforeAll(async () => {
  fixture = await openQueries();
  const { storage, reader } = fixture.engine;
  // Every statement ConsoleQueries sends, as the runner sees it.
  queries = new ConsoleQueries({
    run: (database, sql, options) => {
      statements.push({ sql, params: { ...options.params } });
      return reader.run(database, sql, options);
    },
  }, 'otel');
  const second = Math.floor((now - 600_000) / 1000);
  for (const source of ['src-a', 'src-b']) {
    for (const [i, s] of NASTY.entries()) {
      const time = ms(now - 600_000 + i);
      await ingestOtlp(storage, 'logs', logsRequest(s, [{ time, body: `body ${s} end`, attributes: { [s]: s } }]), source);
      await ingestAgent(storage, 'logs', { host: s, service: s, entries: [{ message: `agent ${s} end`, attributes: { [s]: s } }] }, source, now - 500_000 + i);
      await ingestOtlp(storage, 'traces', tracesRequest(s, [{ traceId: traceIds[i]!, spanId: hexId(8), name: s, start: time, durationNs: source === 'src-a' ? 1000n : 2000n, attributes: { [s]: s } }]), source);
      await ingestOtlp(storage, 'metrics', metricsRequest(s, [{ name: s, gauge: { dataPoints: [{ ...pointTimes(second), asDouble: i, attributes: attrs({ [s]: s }) }] } }]), source);
      await ingestAgent(storage, 'metrics', { host: s, service: s, metrics: [{ name: 'agent.metric', value: i, attributes: { [s]: s } }] }, source, now - 500_000);
      await ingestAgent(storage, 'deploy', { service: s, version: String(i), timestamp: String(time) }, source, now);
    }
  }
});
afterAll(() => fixture?.close());

describe('SQL metacharacters in filters', () => {
  it('find exactly the rows that hold them, in every query', async () => {
    const a = ['src-a'];
    expect(await queries.services(a, range)).toEqual([...NASTY].sort());
    expect((await queries.metricNames(a, range)).map((m) => m.name).sort()).toEqual(['agent.metric', ...NASTY].sort());
    for (const [i, s] of NASTY.entries()) {
      const logs = async (query: object) => (await queries.logs(a, { ...range, ...query })).logs.map((e) => `${e.kind}:${e.body}`).sort();
      const both = [`agent:agent ${s} end`, `otlp:body ${s} end`];
      expect(await logs({ services: [s] }), s).toEqual(both);
      expect(await logs({ text: s }), s).toEqual(both);
      expect(await logs({ text: s.toUpperCase() }), s).toEqual(both);
      expect(await logs({ attributes: [{ key: s, value: s }] }), s).toEqual(both);
      expect(await logs({ attributes: [{ key: 'host.name', value: s }] }), s).toEqual([`agent:agent ${s} end`]);

      const traces = async (query: object) => (await queries.traces(a, { ...range, ...query })).map((t) => t.traceId);
      expect(await traces({ services: [s] }), s).toEqual([traceIds[i]]);
      expect(await traces({ operation: s }), s).toEqual([traceIds[i]]);
      expect(await traces({ attributes: [{ key: s, value: s }] }), s).toEqual([traceIds[i]]);

      const gauge = await queries.metric(a, { ...range, name: s, kind: 'gauge', aggregation: 'max', groupBy: s, attributes: [{ key: s, value: s }], services: [s] });
      expect(gauge.series.map((x) => [x.group, Math.max(...x.points.map(([, v]) => v ?? -1))]), s).toEqual([[s, i]]);
      const agent = await queries.metric(a, { ...range, name: 'agent.metric', kind: 'agent', aggregation: 'max', groupBy: s, attributes: [{ key: 'host.name', value: s }] });
      expect(agent.series.map((x) => [x.group, Math.max(...x.points.map(([, v]) => v ?? -1))]), s).toEqual([[s, i]]);

      expect((await queries.deploys(a, { ...range, services: [s] })).map((d) => [d.sourceId, d.version]), s).toEqual([['src-a', String(i)]]);
    }
  });

  it('reach the engine only as bound parameters, in statements that are read-only', async () => {
    expect(statements.length).toBeGreaterThan(100);
    for (const { sql, params } of statements) {
      expect(sql).toMatch(/\nSETTINGS readonly = 1, max_execution_time = /);
      // (A value shaped like our own placeholders is in the text as those.)
      for (const s of [...NASTY.filter((n) => n !== '{p0:String}'), 'src-a', 'agent.metric']) expect(sql.includes(s), `${s} in ${sql}`).toBe(false);
    }
    const bound = new Set(statements.flatMap(({ params }) => Object.values(params)));
    for (const s of NASTY) expect(bound.has(s), s).toBe(true);
  });
});

describe('a tenant', () => {
  it("never gets another source's rows through any filter", async () => {
    const only = (ids: string[]) => expect(new Set(ids)).toEqual(new Set(['src-a']));
    for (const s of NASTY) {
      only((await queries.logs(['src-a'], { ...range, text: s, attributes: [{ key: s, value: s }] })).logs.map((e) => e.sourceId));
      only((await queries.deploys(['src-a'], { ...range, services: [s] })).map((d) => d.sourceId));
    }
    // The same trace ids under src-b (spans of 2000 ns there): each source sees its own span only.
    for (const traceId of traceIds) {
      expect((await queries.trace(['src-a'], traceId))!.spans.map((span) => span.durationNs)).toEqual(['1000']);
      expect((await queries.trace(['src-b'], traceId))!.spans.map((span) => span.durationNs)).toEqual(['2000']);
    }
    expect((await queries.traces(['src-a'], { ...range })).map((t) => t.durationMs)).toEqual(NASTY.map(() => 0.001));
  });
});
