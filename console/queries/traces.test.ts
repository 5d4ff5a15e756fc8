import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TraceQuery } from '../api.ts';
import { MAX_TRACE_SPANS } from './config.ts';
import { ConsoleQueries } from './queries.ts';
import { hexId, ingestOtlp, ms, openQueries, tracesRequest, type QueriesFixture, type SpanSpec } from '../../test/console-queries-fixture.ts';

let fixture: QueriesFixture;
let queries: ConsoleQueries;
const now = Date.now();
const range = { from: now - 3_600_000, to: now };
const MS = 1_000_000n;
const [t1, t2, t3, t4, old, wide, other] = Array.from({ length: 7 }, () => hexId(16));
const root1 = hexId(8);
const charge = hexId(8);
const root2 = hexId(8);

beforeAll(async () => {
  fixture = await openQueries();
  ({ queries } = fixture);
  const { storage } = fixture.engine;
  const at = (minutesAgo: number) => ms(now - minutesAgo * 60_000);
  await ingestOtlp(storage, 'traces', tracesRequest('checkout', [
    { traceId: t1, spanId: root1, name: 'POST /checkout', start: at(10), durationNs: 300n * MS, status: 'error', statusMessage: 'payment failed' },
    { traceId: t3, spanId: hexId(8), name: 'GET /cart', start: at(40), durationNs: 50n * MS },
    { traceId: old, spanId: hexId(8), name: 'GET /old', start: at(120), durationNs: 50n * MS },
  ]), 'src-a');
  await ingestOtlp(storage, 'traces', tracesRequest('payments', [
    {
      traceId: t1, spanId: charge, parentSpanId: root1, name: 'charge', start: at(10) + 20n * MS, durationNs: 250n * MS, status: 'error',
      attributes: { 'payment.method': 'card', attempt: 2 },
      events: [{ time: at(10) + 100n * MS, name: 'exception', attributes: { 'exception.type': 'CardDeclined' } }],
      links: [{ traceId: t2, spanId: root2, attributes: { reason: 'retry of' } }],
    },
    // A trace whose root never arrived: its earliest span stands in.
    { traceId: t4, spanId: hexId(8), parentSpanId: hexId(8), name: 'refund', start: at(30), durationNs: 80n * MS },
    { traceId: t4, spanId: hexId(8), parentSpanId: hexId(8), name: 'notify', start: at(30) + 10n * MS, durationNs: 100n * MS },
  ]), 'src-a');
  await ingestOtlp(storage, 'traces', tracesRequest('frontend', [
    { traceId: t2, spanId: root2, name: 'GET /', start: at(12), durationNs: 20n * MS, status: 'ok', attributes: { 'http.route': '/' } },
    { traceId: t2, spanId: hexId(8), parentSpanId: root2, name: 'render', start: at(12) + 10n * MS, durationNs: 5n * MS },
  ], { 'deployment.environment': 'prod' }), 'src-a');
  // Another tenant: its own trace, and spans under t1's id (trace ids are the sender's to choose).
  await ingestOtlp(storage, 'traces', tracesRequest('checkout', [
    { traceId: t1, spanId: hexId(8), name: 'POST /checkout', start: at(10), durationNs: 900n * MS, status: 'error', attributes: { 'payment.method': 'card' } },
    { traceId: other, spanId: hexId(8), name: 'GET /cart', start: at(5), durationNs: 1n * MS, attributes: { 'payment.method': 'card' } },
  ], { 'deployment.environment': 'prod' }), 'src-b');
});
afterAll(() => fixture?.close());

const search = (query: Partial<TraceQuery>, sources = ['src-a']) => queries.traces(sources, { ...range, ...query });
const ids = async (query: Partial<TraceQuery>, sources?: string[]) => (await search(query, sources)).map((summary) => summary.traceId);

describe('traces: search', () => {
  it('sums up the traces in the range, most recent first', async () => {
    const summaries = await search({});
    expect(summaries.map((s) => s.traceId)).toEqual([t1, t2, t4, t3]);
    expect(summaries[0]).toEqual({
      traceId: t1, start: now - 10 * 60_000, durationMs: 300, rootService: 'checkout', rootName: 'POST /checkout',
      spans: 2, errors: 2, services: ['checkout', 'payments'],
    });
    expect(summaries[2]).toMatchObject({ traceId: t4, rootService: 'payments', rootName: 'refund', durationMs: 110, spans: 2, errors: 0 });
    expect((await search({ limit: 2 })).map((s) => s.traceId)).toEqual([t1, t2]);
  });

  it('finds traces by a span of theirs: service, operation, duration, status, attribute', async () => {
    expect(await ids({ services: ['payments'] })).toEqual([t1, t4]);
    expect(await ids({ services: ['payments'], operation: 'charge' })).toEqual([t1]);
    expect(await ids({ operation: 'render' })).toEqual([t2]);
    expect(await ids({ minDurationMs: 250 })).toEqual([t1]);
    expect(await ids({ minDurationMs: 250.5 })).toEqual([t1]); // the root, 300 ms
    expect(await ids({ maxDurationMs: 5 })).toEqual([t2]);
    expect(await ids({ minDurationMs: 90, maxDurationMs: 110 })).toEqual([t4]);
    expect(await ids({ status: 'error' })).toEqual([t1]);
    expect(await ids({ status: 'ok' })).toEqual([t2]);
    expect(await ids({ status: 'unset', services: ['checkout'] })).toEqual([t3]);
    expect(await ids({ attributes: [{ key: 'payment.method', value: 'card' }] })).toEqual([t1]);
    expect(await ids({ attributes: [{ key: 'attempt', value: '2' }] })).toEqual([t1]);
    // A resource attribute finds the spans of that resource.
    expect(await ids({ attributes: [{ key: 'deployment.environment', value: 'prod' }] })).toEqual([t2]);
    expect(await ids({ attributes: [{ key: 'payment.method', value: 'cash' }] })).toEqual([]);
  });

  it("never lists or counts another source's spans", async () => {
    const [summary] = await search({ attributes: [{ key: 'payment.method', value: 'card' }] });
    // Not the other tenant's 900 ms root under the same trace id, and not its trace.
    expect(summary).toMatchObject({ traceId: t1, spans: 2, durationMs: 300 });
    expect(await ids({ services: ['checkout'] })).toEqual([t1, t3]);
    expect(await ids({}, ['src-b'])).toEqual([other, t1]);
    expect((await search({}, ['src-b']))[1]).toMatchObject({ traceId: t1, spans: 1, durationMs: 900 });
    expect(await ids({}, ['src-c'])).toEqual([]);
    const refusing = new ConsoleQueries({ run: () => Promise.reject(new Error('a statement ran')) }, 'otel');
    expect(await refusing.traces([], { ...range })).toEqual([]);
  });
});

describe('traces: one trace', () => {
  it('has every span by start time, with attributes, resource, events and links', async () => {
    const view = await queries.trace(['src-a'], t1.toUpperCase());
    expect(view?.traceId).toBe(t1);
    expect(view?.truncated).toBeUndefined();
    expect(view?.spans.map((span) => [span.service, span.name])).toEqual([['checkout', 'POST /checkout'], ['payments', 'charge']]);
    expect(view?.spans[1]).toEqual({
      traceId: t1, spanId: charge, parentSpanId: root1, name: 'charge', kind: 'Server', service: 'payments',
      startNs: String(ms(now - 10 * 60_000) + 20n * MS), durationNs: String(250n * MS), statusCode: 'Error', statusMessage: '',
      attributes: { 'payment.method': 'card', attempt: '2' }, resource: { 'service.name': 'payments' }, scope: 'console-test',
      events: [{ timeNs: String(ms(now - 10 * 60_000) + 100n * MS), name: 'exception', attributes: { 'exception.type': 'CardDeclined' } }],
      links: [{ traceId: t2, spanId: root2, attributes: { reason: 'retry of' } }],
    });
    expect(view?.spans[0]).toMatchObject({ statusMessage: 'payment failed', parentSpanId: '', events: [], links: [] });
  });

  it("is the tenant's own: another source's spans under the same id never appear", async () => {
    expect((await queries.trace(['src-b'], t1))?.spans.map((span) => span.durationNs)).toEqual([String(900n * MS)]);
    expect(await queries.trace(['src-a'], other)).toBeUndefined();
    expect(await queries.trace(['src-a'], hexId(16))).toBeUndefined();
    expect(await queries.trace([], t1)).toBeUndefined();
    // Outside any range asked: a trace is found by its id alone.
    expect((await queries.trace(['src-a'], old))?.spans).toHaveLength(1);
  });

  it(`shows the first ${MAX_TRACE_SPANS} spans of a larger trace, and says so`, async () => {
    const start = ms(now - 50 * 60_000);
    const spans: SpanSpec[] = Array.from({ length: MAX_TRACE_SPANS + 5 }, (_, i) => ({ traceId: wide, spanId: hexId(8), name: `step ${i}`, start: start + BigInt(i) * MS, durationNs: MS }));
    await ingestOtlp(fixture.engine.storage, 'traces', tracesRequest('batch', spans), 'src-a');
    const view = await queries.trace(['src-a'], wide);
    expect(view?.truncated).toBe(true);
    expect(view?.spans).toHaveLength(MAX_TRACE_SPANS);
    expect(view?.spans.at(-1)?.name).toBe(`step ${MAX_TRACE_SPANS - 1}`);
  });
});
