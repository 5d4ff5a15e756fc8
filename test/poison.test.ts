/**
 * A poison request on the embedded default: storage refuses its rows (they span more than 100
 * daily partitions, which ClickHouse refuses in one insert). It was acknowledged once its rows
 * were in the local log; when the background insert is refused, the batch is split until the
 * offender stands alone, its rows go to <dataDir>/log/dead-letters with the reason (logged and
 * counted), and every other request of the batch is stored.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';
import { traceRequest } from './otlp-fixtures.ts';

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

describe('a poison request in a batch', () => {
  it('is dead-lettered with the reason; the others of the batch are stored', async () => {
    // Requests that each fit, sent together so they share a batch, with one that never fits.
    const good = Array.from({ length: 12 }, (_, i) => `good-${i}`);
    const responses = await Promise.all([
      ...good.map((service) => post(service)),
      post('poison', (i) => today - BigInt(i % 150) * DAY),
      // 60 days each, 120 together: refused only as a pair, so both must be stored.
      post('early', (i) => today - BigInt(60 + (i % 60)) * DAY),
      post('late', (i) => today - BigInt(i % 60) * DAY),
    ]);
    expect(responses.map((r) => r.status)).toEqual(responses.map(() => 200));

    for (const service of [...good, 'early', 'late']) expect(await count(service), service).toBe(150);
    expect(await count('poison')).toBe(0);
    const dir = join(sluice.dataDir, 'log', 'dead-letters');
    const files = await readdir(dir);
    expect(files).toHaveLength(1);
    const letter = JSON.parse(await readFile(join(dir, files[0]!), 'utf8'));
    expect(letter.reason).toBe('storage refused the rows for otel_traces: they span more than 100 partitions (days), more than ClickHouse takes in one insert: send fewer days per request');
    expect(letter.chunks).toMatchObject([{ table: 'otel_traces', rows: 150, format: 'RowBinary' }]);
    const metrics = await (await fetch(sluice.baseUrl + '/metrics')).text();
    expect(metrics).toMatch(/sluice_consumer\{figure="deadLettered",table=""\} 1/);
  });
});
