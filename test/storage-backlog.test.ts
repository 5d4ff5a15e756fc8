/**
 * The local log is bounded when storage cannot keep up: past storage.maxPendingBytes of rows
 * not yet inserted, requests get 503 with Retry-After, and exactly the acknowledged requests are
 * stored. Storage is made slow on purpose (its inserts wait until the requests are all in), so
 * the backlog builds up however fast or loaded the machine is.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

let sluice: TestSluice;
/** While set, every insert waits for it. */
let stall: Promise<void> | undefined;

beforeAll(async () => {
  sluice = await startTestSluice({
    'limits.rateBurst': 100_000,
    'limits.ratePerMinute': 600_000,
    'storage.maxPendingBytes': 1024 * 1024,
  });
  const insert = sluice.storage.insert.bind(sluice.storage);
  sluice.storage.insert = async (batch) => {
    await stall;
    return insert(batch);
  };
});
afterAll(async () => sluice?.stop());

describe('storage behind', () => {
  it('refuses past the backlog limit and stores exactly what it acknowledged', async () => {
    let resume!: () => void;
    stall = new Promise((resolve) => (resume = resolve));
    const body = encodeTraces(traceRequest({ spans: 2000, name: 'big' }));
    const pending = Array.from({ length: 16 }, (_, i) =>
      fetch(sluice.baseUrl + '/v1/traces', {
        method: 'POST',
        headers: { 'content-type': 'application/x-protobuf', 'x-api-key': sluice.apiKey },
        body,
      }).then(async (response) => ({ i, status: response.status, retryAfter: response.headers.get('retry-after') })),
    );
    // Every request is answered while storage is held: from the log, or refused once it is full.
    const responses = await Promise.all(pending);
    const statuses = responses.map((r) => r.status);
    expect(new Set(statuses)).toEqual(new Set([200, 503]));
    for (const response of responses.filter((r) => r.status === 503)) expect(response.retryAfter).toBe('5');
    stall = undefined;
    resume();
    const accepted = statuses.filter((s) => s === 200).length;
    const stored = async () => Number((await sluice.rows<{ n: number }>('SELECT count() AS n FROM otel.otel_traces'))[0]!.n);
    await eventually(async () => (await stored()) === accepted * 2000, 30_000);
  });
});
