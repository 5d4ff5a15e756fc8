/**
 * Storage faults on the embedded engine: a table that disappears (DETACH) makes inserts fail
 * for real. Requests are still acknowledged (their rows are durable in the local log), readiness
 * says inserts are failing, and when the table is back everything acknowledged is stored once.
 * Past the log's limit requests get 503 with Retry-After (test/storage-backlog.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
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
    (await sluice.rows<{ SpanName: string; n: number }>('SELECT SpanName, count() AS n FROM otel.otel_traces GROUP BY SpanName ORDER BY SpanName')).map((r) => [
      r.SpanName,
      Number(r.n),
    ]),
  );

describe('storage down', () => {
  it('keeps acknowledging into the local log while storage is down, says so, and stores everything once it is back', async () => {
    expect((await send('before')).status).toBe(200);

    await sluice.storage.query('DETACH TABLE otel.otel_traces');
    const during = await Promise.all([send('during'), send('during'), send('during')]);
    expect(during.map((response) => response.status)).toEqual([200, 200, 200]);
    type Report = { components: Record<string, { ok: boolean; detail?: string }> };
    const ready = await eventually(async () => {
      const response = await fetch(sluice.baseUrl + '/api/v1/ready');
      return response.status === 503 ? ((await response.json()) as Report) : undefined;
    }, 30_000);
    expect(ready.components.bus).toMatchObject({ ok: false, detail: expect.stringContaining('storage inserts are failing') });
    const metrics = await (await fetch(sluice.baseUrl + '/metrics')).text();
    expect(metrics).toMatch(/sluice_storage_inserts_total\{table="otel_traces",outcome="failed"\} [1-9]/);
    await sluice.storage.query('ATTACH TABLE otel.otel_traces');

    expect((await send('after')).status).toBe(200);
    await eventually(async () => JSON.stringify(await countByName()) === JSON.stringify({ after: 2, before: 2, during: 6 }), 30_000);
    expect(await countByName()).toEqual({ before: 2, during: 6, after: 2 });
    await eventually(async () => (await fetch(sluice.baseUrl + '/api/v1/ready')).status === 200, 30_000);
  });
});
