import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogEntry, LogQuery } from '../api.ts';
import { QueryValidationError } from './errors.ts';
import { ConsoleQueries } from './queries.ts';
import { hexId, ingestAgent, ingestOtlp, logsRequest, ms, openQueries, type QueriesFixture } from '../../test/console-queries-fixture.ts';

let fixture: QueriesFixture;
let queries: ConsoleQueries;
const now = Date.now();
/** Receive time of the agent batch: its seven entries have no timestamp of their own, so they share this one. */
const batchAt = now - 10 * 60_000;
const range = { from: now - 3_600_000, to: now };
const traceId = hexId(16);
const spanId = hexId(8);

beforeAll(async () => {
  fixture = await openQueries();
  ({ queries } = fixture);
  const { storage } = fixture.engine;
  for (const source of ['src-a', 'src-b']) {
    await ingestOtlp(storage, 'logs', logsRequest('checkout', [
      { time: ms(now - 20 * 60_000), body: 'Payment FAILED for order 42', severityNumber: 17, severityText: 'ERROR', attributes: { user: 'u1' }, traceId, spanId },
      { time: ms(now - 25 * 60_000), body: 'cart updated', attributes: { user: 'u2' } },
      { time: ms(now - 30 * 60_000), body: 'cache miss', severityNumber: 5, severityText: 'DEBUG' },
      // The range's edges: `from` is in, `to` is out.
      { time: ms(range.from), body: 'at from' },
      { time: ms(range.to), body: 'at to' },
    ], { 'host.name': 'web-1' }), source);
    await ingestOtlp(storage, 'logs', logsRequest('payments', [{ time: ms(now - 5 * 60_000), body: 'charge ok' }]), source);
    await ingestAgent(storage, 'logs', {
      host: 'db-1', service: 'postgres', attributes: { region: 'eu' },
      entries: ['checkpoint', 'vacuum', 'PAYMENT table locked', 'slow query', 'connection reset', 'autovacuum', 'replica lag']
        .map((message, i) => ({ message, level: i % 2 ? 'warn' : 'info' })),
    }, source, batchAt);
  }
});
afterAll(() => fixture?.close());

const bodies = (logs: LogEntry[]) => logs.map((entry) => entry.body);
const page = (query: Partial<LogQuery>, sources = ['src-a']) => queries.logs(sources, { ...range, ...query });

describe('logs', () => {
  it('lists OTLP and agent entries together, newest first, each as the console shows it', async () => {
    const { logs, cursor } = await page({});
    expect(cursor).toBeUndefined();
    expect(logs).toHaveLength(12); // 4 checkout (not the one at `to`), 1 payments, 7 postgres
    expect(logs.map((entry) => entry.timeNs)).toEqual(logs.map((entry) => entry.timeNs).sort().reverse());
    expect(bodies(logs).slice(0, 1)).toEqual(['charge ok']);
    expect(bodies(logs).slice(-1)).toEqual(['at from']);
    expect(logs.find((entry) => entry.body === 'Payment FAILED for order 42')).toEqual({
      kind: 'otlp', time: now - 20 * 60_000, timeNs: String(ms(now - 20 * 60_000)), sourceId: 'src-a', service: 'checkout',
      severityText: 'ERROR', severityNumber: 17, body: 'Payment FAILED for order 42', traceId, spanId,
      attributes: { user: 'u1' }, resource: { 'service.name': 'checkout', 'host.name': 'web-1' },
    });
    // An agent entry: its host in attributes as host.name, no resource, no trace.
    expect(logs.find((entry) => entry.body === 'vacuum')).toEqual({
      kind: 'agent', time: batchAt, timeNs: String(ms(batchAt)), sourceId: 'src-a', service: 'postgres',
      severityText: 'warn', severityNumber: 13, body: 'vacuum', traceId: '', spanId: '',
      attributes: { region: 'eu', 'host.name': 'db-1' }, resource: {},
    });
  });

  it('pages through every entry with the cursor, through entries that share a timestamp, none lost or repeated', async () => {
    const all = bodies((await page({ limit: 1000 })).logs);
    for (const limit of [1, 2, 3, 5]) {
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const answer = await page({ limit, cursor });
        expect(answer.logs.length).toBeLessThanOrEqual(limit);
        seen.push(...bodies(answer.logs));
        cursor = answer.cursor;
        pages++;
      } while (cursor && pages < 50);
      expect(seen, `limit ${limit}`).toEqual(all);
    }
  });

  it("gives one trace's logs: OTLP records of that trace id only, never an agent entry; a malformed id is a 400", async () => {
    expect(bodies((await page({ traceId })).logs)).toEqual(['Payment FAILED for order 42']);
    expect((await page({ traceId: hexId(16) })).logs).toEqual([]);
    await expect(page({ traceId: traceId.toUpperCase() })).rejects.toThrow(QueryValidationError);
    await expect(page({ traceId: 'x'.repeat(32) })).rejects.toThrow(QueryValidationError);
  });

  it('filters by service, least severity, text (any case) and attributes (exact), on both kinds', async () => {
    expect(bodies((await page({ services: ['payments', 'postgres'], minSeverity: 13 })).logs)).toEqual(['vacuum', 'slow query', 'autovacuum'].sort(bySameTime(await page({}))));
    expect(bodies((await page({ text: 'payment' })).logs).sort()).toEqual(['PAYMENT table locked', 'Payment FAILED for order 42']);
    expect(bodies((await page({ text: 'FAILED FOR' })).logs)).toEqual(['Payment FAILED for order 42']);
    expect(bodies((await page({ attributes: [{ key: 'user', value: 'u2' }] })).logs)).toEqual(['cart updated']);
    expect(bodies((await page({ attributes: [{ key: 'user', value: 'u' }] })).logs)).toEqual([]);
    // A resource attribute filters OTLP entries; an agent's host and service are its host.name and service.name.
    expect((await page({ attributes: [{ key: 'host.name', value: 'web-1' }] })).logs.map((e) => e.service)).toEqual(['checkout', 'checkout', 'checkout', 'checkout']);
    expect((await page({ attributes: [{ key: 'host.name', value: 'db-1' }, { key: 'region', value: 'eu' }] })).logs).toHaveLength(7);
    expect((await page({ attributes: [{ key: 'service.name', value: 'postgres' }] })).logs).toHaveLength(7);
    // An empty value matches an attribute that is there and empty, not one that is missing.
    expect((await page({ attributes: [{ key: 'user', value: '' }] })).logs).toEqual([]);
  });

  it("never shows another source's entries, whatever the filters", async () => {
    for (const query of [{}, { text: 'payment' }, { attributes: [{ key: 'user', value: 'u1' }] }, { services: ['checkout'] }, { limit: 1000 }]) {
      const { logs } = await page(query);
      expect(logs.length).toBeGreaterThan(0);
      expect(new Set(logs.map((entry) => entry.sourceId))).toEqual(new Set(['src-a']));
    }
    expect((await page({}, ['src-b'])).logs.every((entry) => entry.sourceId === 'src-b')).toBe(true);
    expect((await page({}, ['src-a', 'src-b'])).logs).toHaveLength(24);
    expect((await page({}, ['src-c'])).logs).toEqual([]);
    // No sources: no statement at all.
    const refusing = new ConsoleQueries({ run: () => Promise.reject(new Error('a statement ran')) }, 'otel');
    expect(await refusing.logs([], { ...range })).toEqual({ logs: [] });
  });

  it('counts what the list shows, with the same filters, for the given sources only', async () => {
    const count = (query: Partial<LogQuery>, sources = ['src-a']) => queries.logCount(sources, { ...range, ...query });
    for (const query of [{}, { services: ['postgres'] }, { minSeverity: 13 }, { text: 'payment' }, { attributes: [{ key: 'host.name', value: 'db-1' }] }, { traceId }]) {
      expect(await count(query), JSON.stringify(query)).toBe((await page({ ...query, limit: 1000 })).logs.length);
    }
    expect(await count({}, ['src-a', 'src-b'])).toBe(24);
    expect(await count({}, [])).toBe(0);
    await expect(count({ traceId: 'nope' })).rejects.toBeInstanceOf(QueryValidationError);
  });

  it('sums up what the list shows: volume by severity band per bucket, and the facets, for the same filters', async () => {
    const bandOf = (n: number) => (n === 0 ? 'unset' : n < 5 ? 'trace' : n < 9 ? 'debug' : n < 13 ? 'info' : n < 17 ? 'warn' : n < 21 ? 'error' : 'fatal');
    const byCount = (counts: Map<string, number>) => [...counts].map(([value, count]) => ({ value, count })).sort((a, b) => b.count - a.count || (a.value < b.value ? -1 : 1));
    const tally = (counts: Map<string, number>, key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);
    for (const query of [{}, { services: ['postgres'] }, { minSeverity: 13 }, { text: 'payment' }, { attributes: [{ key: 'host.name', value: 'db-1' }] }, { traceId }]) {
      const [summary, listing] = await Promise.all([queries.logSummary(['src-a'], { ...range, ...query }), page({ ...query, limit: 1000 })]);
      const { logs } = listing;
      const stepMs = summary.stepMs;
      expect(stepMs).toBe(60_000); // an hour in at most 80 bars
      const volume = new Map<number, Record<string, number>>();
      const services = new Map<string, number>();
      const bands = new Map<string, number>();
      const pairs = new Map<string, Map<string, number>>();
      for (const entry of logs) {
        const bucket = Math.floor(entry.time / stepMs) * stepMs;
        const counts = volume.get(bucket) ?? {};
        counts[bandOf(entry.severityNumber)] = (counts[bandOf(entry.severityNumber)] ?? 0) + 1;
        volume.set(bucket, counts);
        tally(services, entry.service);
        tally(bands, bandOf(entry.severityNumber));
        for (const [key, value] of Object.entries(entry.attributes)) tally(pairs.get(key) ?? pairs.set(key, new Map()).get(key)!, value);
      }
      const keyCount = (values: Map<string, number>) => [...values.values()].reduce((a, b) => a + b, 0);
      expect(summary, JSON.stringify(query)).toEqual({
        total: logs.length,
        stepMs,
        volume: [...volume].sort(([a], [b]) => a - b).map(([time, counts]) => ({ time, counts })),
        facets: {
          services: byCount(services).slice(0, 10),
          severities: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'unset'].filter((band) => bands.has(band)).map((value) => ({ value, count: bands.get(value)! })),
          attributes: [...pairs].map(([key, values]) => ({ key, count: keyCount(values), values: byCount(values).slice(0, 5) }))
            .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1)).slice(0, 5),
        },
      });
    }
    expect((await queries.logSummary(['src-a'], { ...range, text: 'no such words' })).total).toBe(0);
    expect((await queries.logSummary(['src-a', 'src-b'], range)).total).toBe(24);
    await expect(queries.logSummary(['src-a'], { ...range, minSeverity: -1 })).rejects.toBeInstanceOf(QueryValidationError);
  });

  it('refuses a cursor it did not make', async () => {
    for (const cursor of ['x', Buffer.from("1' OR 1=1").toString('base64url'), Buffer.from('99999999999999999999.1').toString('base64url')]) {
      await expect(page({ cursor })).rejects.toThrow(QueryValidationError);
    }
  });
});

/** Orders bodies as the full listing does (the agent batch shares one timestamp; its order is the query's). */
function bySameTime(listing: { logs: LogEntry[] }): (a: string, b: string) => number {
  const order = bodies(listing.logs);
  return (a, b) => order.indexOf(a) - order.indexOf(b);
}
