/**
 * How many daily partitions a request may span, end to end on the embedded default. ClickHouse
 * refuses an insert whose rows fall into more than 100 partitions, and the tables are
 * partitioned by day: a request whose rows span more than 100 days for one table can never be
 * stored, so it is refused at the door with 400 (not acknowledged and dead-lettered later, and
 * never a retryable 503). Requests within the limit are stored whole even when the local log
 * batches many of them into one insert that spans far more days.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeStatus } from '../gateway/otlp-response.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

let sluice: TestSluice;

beforeAll(async () => {
  // A long flush interval: requests sent together land in one batch of the local log.
  sluice = await startTestSluice({ 'limits.rateBurst': 100_000, 'limits.ratePerMinute': 600_000, 'storage.flushIntervalMs': 3000 });
});
afterAll(async () => sluice?.stop());

const DAY = 86_400_000_000_000n;
const today = (BigInt(Date.now()) * 1_000_000n) / DAY * DAY;
const REFUSAL = 'rows span 101 days; one request may span at most 100 days per table (the storage partitions otel_traces by the day of Timestamp, UTC): send them in several requests';

function post(path: string, body: Uint8Array | string, contentType: string) {
  return fetch(sluice.baseUrl + path, { method: 'POST', headers: { 'content-type': contentType, 'x-api-key': sluice.apiKey }, body: body as BodyInit });
}

/** traceRequest of `spans` spans named `service`, span i starting `dayOf(i)` days ago. */
function traces(service: string, spans: number, dayOf: (i: number) => number, format: 'protobuf' | 'json') {
  const request = traceRequest({ spans, service, startNanos: (i) => today - BigInt(dayOf(i)) * DAY }) as any;
  if (format === 'protobuf') return post('/v1/traces', encodeTraces(request), 'application/x-protobuf');
  for (const span of request.resourceSpans[0].scopeSpans[0].spans) {
    span.traceId = Buffer.from(span.traceId).toString('hex');
    span.spanId = Buffer.from(span.spanId).toString('hex');
  }
  return post('/v1/traces', JSON.stringify(request), 'application/json');
}

const count = async (service: string) =>
  Number((await sluice.rows<{ n: string }>(`SELECT count() AS n FROM otel.otel_traces WHERE ServiceName = '${service}'`))[0]!.n);

describe('the days one request may span', () => {
  it('refuses OTLP/HTTP spans on 101 days with 400 and the reason, protobuf and JSON; nothing is stored', async () => {
    const protobuf = await traces('wide-protobuf', 150, (i) => i % 101, 'protobuf');
    expect(protobuf.status).toBe(400);
    expect(protobuf.headers.get('retry-after')).toBeNull();
    expect(new Uint8Array(await protobuf.arrayBuffer())).toEqual(encodeStatus('protobuf', 3, REFUSAL));
    const json = await traces('wide-json', 150, (i) => i % 101, 'json');
    expect(json.status).toBe(400);
    expect(await json.json()).toEqual({ code: 3, message: REFUSAL, details: [] });
    // 100 days is within the limit.
    expect((await traces('hundred-days', 150, (i) => i % 100, 'json')).status).toBe(200);
    expect([await count('wide-protobuf'), await count('wide-json'), await count('hundred-days')]).toEqual([0, 0, 150]);
  });

  it('refuses an agent log batch on 101 days with 400 and the reason', async () => {
    const entries = Array.from({ length: 202 }, (_, i) => ({ message: `m${i}`, timestamp: String(today - BigInt(i % 101) * DAY) }));
    const response = await post('/api/v1/ingest', JSON.stringify({ host: 'wide', entries }), 'application/json');
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: 'bad_request',
      message: 'rows span 101 days; one request may span at most 100 days per table (the storage partitions agent_logs by the day of Timestamp, UTC): send them in several requests',
      statusCode: 400,
    });
    expect(await sluice.rows("SELECT 1 FROM otel.agent_logs WHERE Host = 'wide'")).toEqual([]);
  });

  it('stores requests within the limit whole, in one insert, when together they span 300 days', async () => {
    // Six requests of 50 days each, no day shared: any two in one batch are over 100 partitions.
    const services = Array.from({ length: 6 }, (_, r) => `batch-${r}`);
    const responses = await Promise.all(services.map((service, r) => traces(service, 100, (i) => r * 50 + (i % 50), 'protobuf')));
    expect(responses.map((response) => response.status)).toEqual(services.map(() => 200));
    // A read waits for the local log at most storage.timeoutMs (10 s); an insert of 300 new
    // partitions can take longer on a loaded machine, so the counts are polled.
    const counts = async () => Promise.all(services.map(count));
    await eventually(async () => (await counts()).every((n) => n === 100), 120_000, 500).catch(() => {});
    expect(await counts()).toEqual(services.map(() => 100));
    const [{ days }] = await sluice.rows<{ days: number }>("SELECT uniq(toDate(Timestamp)) AS days FROM otel.otel_traces WHERE startsWith(ServiceName, 'batch-')") as [{ days: number }];
    expect(days).toBe(300);
    // No insert was refused (and split), nothing was dead-lettered.
    const metrics = await (await fetch(sluice.baseUrl + '/metrics')).text();
    expect(metrics).not.toMatch(/sluice_storage_inserts_total\{[^}]*outcome="failed"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/^sluice_consumer_dead_lettered_total 0$/m);
    expect(await readdir(join(sluice.dataDir, 'log', 'dead-letters')).catch(() => [])).toEqual([]);
  });
});
