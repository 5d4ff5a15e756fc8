/**
 * Memory stays bounded when storage cannot keep up: past the backlog limit requests get 503
 * with Retry-After, and exactly the acknowledged requests are stored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

let sluice: TestSluice;

beforeAll(async () => {
  sluice = await startTestSluice({
    'limits.rateBurst': 100_000,
    'limits.ratePerMinute': 600_000,
    'storage.maxPendingBytes': 1024 * 1024,
  });
});
afterAll(async () => sluice?.stop());

describe('storage behind', () => {
  it('refuses past the backlog limit and stores exactly what it acknowledged', async () => {
    const body = encodeTraces(traceRequest({ spans: 2000, name: 'big' }));
    const responses = await Promise.all(
      Array.from({ length: 16 }, () =>
        fetch(sluice.baseUrl + '/v1/traces', {
          method: 'POST',
          headers: { 'content-type': 'application/x-protobuf', 'x-api-key': sluice.apiKey },
          body,
        }),
      ),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses).toContain(503);
    for (const response of responses.filter((r) => r.status === 503)) expect(response.headers.get('retry-after')).toBe('5');
    const accepted = statuses.filter((s) => s === 200).length;
    expect(accepted).toBeGreaterThan(0);
    const [row] = await sluice.rows<{ n: number }>('SELECT count() AS n FROM otel.otel_traces');
    expect(Number(row!.n)).toBe(accepted * 2000);
  });
});
