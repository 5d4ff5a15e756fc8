/**
 * Storage faults on the embedded engine: a table that disappears (DETACH) makes inserts fail
 * for real. Requests get 503 with Retry-After, nothing refused is stored, nothing accepted
 * earlier is lost, and ingestion recovers by itself when the table is back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

let sluice: TestSluice;

beforeAll(async () => {
  sluice = await startTestSluice({ 'limits.rateBurst': 100_000, 'limits.ratePerMinute': 600_000, 'storage.retryAfterSeconds': 3 });
});
afterAll(async () => sluice?.stop());

const send = (name: string, spans = 2) =>
  fetch(sluice.baseUrl + '/v1/traces', {
    method: 'POST',
    headers: { 'content-type': 'application/x-protobuf', 'x-api-key': sluice.apiKey },
    body: encodeTraces(traceRequest({ spans, name })),
  });

const countByName = async () =>
  Object.fromEntries(
    (await sluice.rows<{ SpanName: string; n: number }>('SELECT SpanName, count() AS n FROM otel.otel_traces GROUP BY SpanName')).map((r) => [
      r.SpanName,
      Number(r.n),
    ]),
  );

describe('storage down', () => {
  it('answers 503 with Retry-After while storage is down and recovers after', async () => {
    expect((await send('before')).status).toBe(200);

    await sluice.storage.query('DETACH TABLE otel.otel_traces');
    const during = await Promise.all([send('during'), send('during'), send('during')]);
    for (const response of during) {
      expect(response.status).toBe(503);
      expect(response.headers.get('retry-after')).toBe('3');
    }
    await sluice.storage.query('ATTACH TABLE otel.otel_traces');

    expect((await send('after')).status).toBe(200);
    expect(await countByName()).toEqual({ before: 2, after: 2 });
    const metrics = await (await fetch(sluice.baseUrl + '/metrics')).text();
    expect(metrics).toMatch(/sluice_items_refused_total\{signal="traces",reason="unavailable"\} 6/);
    expect(metrics).toMatch(/sluice_storage_inserts_total\{table="otel_traces",outcome="failed"\} [1-9]/);
  });
});
