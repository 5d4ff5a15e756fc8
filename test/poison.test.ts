/**
 * A poison request in the embedded group commit: storage refuses its rows (they span more
 * than 100 daily partitions, which ClickHouse refuses in one insert). It gets a 400 that says
 * why; every other request of the same group commit is stored and gets its 200.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

let sluice: TestSluice;

beforeAll(async () => {
  sluice = await startTestSluice({ 'limits.rateBurst': 100_000, 'limits.ratePerMinute': 600_000 });
});
afterAll(async () => sluice?.stop());

const DAY = 86_400_000_000_000n;
const today = (BigInt(Date.now()) * 1_000_000n) / DAY * DAY;

function post(service: string, startNanos?: (i: number) => bigint, spans = 150) {
  return fetch(sluice.baseUrl + '/v1/traces', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': sluice.apiKey },
    body: JSON.stringify(jsonTraces(service, spans, startNanos)),
  });
}

/** OTLP/JSON of traceRequest (ids as hex), so the 400's message can be read as text. */
function jsonTraces(service: string, spans: number, startNanos?: (i: number) => bigint): object {
  const request = traceRequest({ spans, service, startNanos }) as any;
  for (const span of request.resourceSpans[0].scopeSpans[0].spans) {
    span.traceId = Buffer.from(span.traceId).toString('hex');
    span.spanId = Buffer.from(span.spanId).toString('hex');
  }
  return request;
}

const count = async (service: string) =>
  Number((await sluice.rows<{ n: string }>(`SELECT count() AS n FROM otel.otel_traces WHERE ServiceName = '${service}'`))[0]!.n);

describe('a poison request in a group commit', () => {
  it('gets 400 with the reason; the others are stored and get 200', async () => {
    // Requests that each fit, sent together so they share group commits, with one that never fits.
    const good = Array.from({ length: 12 }, (_, i) => `good-${i}`);
    const responses = await Promise.all([
      ...good.map((service) => post(service)),
      post('poison', (i) => today - BigInt(i % 150) * DAY),
      // 60 days each, 120 together: refused only as a pair, so both must be stored.
      post('early', (i) => today - BigInt(60 + (i % 60)) * DAY),
      post('late', (i) => today - BigInt(i % 60) * DAY),
    ]);
    const statuses = responses.map((r) => r.status);
    expect(statuses.slice(0, 12)).toEqual(good.map(() => 200));
    expect(statuses.slice(12)).toEqual([400, 200, 200]);
    const refusal = await responses[12]!.json();
    expect(refusal.message).toBe('storage refused the rows for otel_traces: they span more than 100 partitions (days), more than ClickHouse takes in one insert: send fewer days per request');
    expect(responses[12]!.headers.get('retry-after')).toBeNull();

    for (const service of [...good, 'early', 'late']) expect(await count(service), service).toBe(150);
    expect(await count('poison')).toBe(0);
  });
});
