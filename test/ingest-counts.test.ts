/**
 * The per-source ingest counts on a whole running `sluice serve`: requests accepted and refused
 * over OTLP/HTTP, OTLP/gRPC and the agent API land in `ingest_counts` with their source, signal,
 * outcome, reason and items, within a flush (10 s) and the local log's interval.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { h2Connect, unaryCall } from './grpc-raw.ts';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

const KiB = 1024;
let sluice: TestSluice;
let other: { id: string; apiKey: string };

beforeAll(async () => {
  sluice = await startTestSluice({ 'limits.maxBodyBytes': 64 * KiB, 'limits.rateBurst': 10_000, 'limits.ratePerMinute': 600_000 });
  other = await sluice.sources.createSource('other');
});
afterAll(async () => sluice?.stop());

async function post(path: string, body: Uint8Array | string, headers: Record<string, string> = {}): Promise<number> {
  const response = await fetch(sluice.baseUrl + path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-protobuf', 'x-api-key': sluice.apiKey, ...headers },
    body: body as BodyInit,
  });
  await response.arrayBuffer();
  return response.status;
}

interface CountRow { SourceId: string; Signal: string; Outcome: string; Reason: string; Requests: number; Items: number }

/** Everything counted so far, summed over the buckets (a test's requests may straddle two). */
async function counted(): Promise<CountRow[]> {
  const rows = await sluice.rows<CountRow>(
    'SELECT SourceId, Signal, Outcome, Reason, sum(Requests) AS Requests, sum(Items) AS Items FROM otel.ingest_counts ' +
      'GROUP BY SourceId, Signal, Outcome, Reason',
  );
  return rows.map((row) => ({ ...row, Requests: Number(row.Requests), Items: Number(row.Items) }));
}

const byKey = (a: CountRow, b: CountRow) => {
  const key = (row: CountRow) => [row.SourceId, row.Signal, row.Outcome, row.Reason].join('\0');
  return key(a) < key(b) ? -1 : 1;
};

describe('ingest_counts', () => {
  it('counts what each front end accepted and refused, per source, signal and reason', async () => {
    const source = sluice.sourceId;
    // Accepted over OTLP/HTTP: 5 and 3 spans.
    expect(await post('/v1/traces', encodeTraces(traceRequest({ spans: 5 })))).toBe(200);
    expect(await post('/v1/traces', encodeTraces(traceRequest({ spans: 3 })))).toBe(200);
    // Refused: a payload that does not decode, one over the cap, one without a good key, and a
    // content type the endpoint does not take (sent with a good key: counted under its source).
    expect(await post('/v1/traces', new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]))).toBe(400);
    expect(await post('/v1/traces', new Uint8Array(64 * KiB + 1))).toBe(413);
    expect(await post('/v1/traces', encodeTraces(traceRequest({ spans: 2 })), { 'x-api-key': 'slk_' + 'A'.repeat(43) })).toBe(401);
    expect(await post('/v1/traces', 'spans', { 'content-type': 'text/plain' })).toBe(415);

    // OTLP/gRPC: 4 spans accepted, a message that does not decode, a call without a key.
    const session = h2Connect(sluice.grpcAddress);
    try {
      expect((await unaryCall(session, encodeTraces(traceRequest({ spans: 4 })), { 'x-api-key': sluice.apiKey })).status).toBe(0);
      expect((await unaryCall(session, new Uint8Array([0x0a, 0xff]), { 'x-api-key': sluice.apiKey })).status).toBe(3);
      expect((await unaryCall(session, encodeTraces(traceRequest({ spans: 1 })), {})).status).toBe(16);
    } finally {
      session.close();
    }

    // The agent API, from another source: 4 log entries, and a batch refused whole.
    const entries = Array.from({ length: 4 }, (_, i) => ({ message: `entry ${i}` }));
    const json = { 'content-type': 'application/json', 'x-api-key': other.apiKey };
    expect(await post('/api/v1/ingest', JSON.stringify({ service: 'api', entries }), json)).toBe(200);
    expect(await post('/api/v1/ingest', JSON.stringify({ entries: 'none' }), json)).toBe(400);

    const expected: CountRow[] = [
      { SourceId: '', Signal: 'traces', Outcome: 'refused', Reason: 'unauthorized', Requests: 2, Items: 2 },
      { SourceId: other.id, Signal: 'agent_logs', Outcome: 'accepted', Reason: '', Requests: 1, Items: 4 },
      { SourceId: other.id, Signal: 'agent_logs', Outcome: 'refused', Reason: 'bad_request', Requests: 1, Items: 1 },
      { SourceId: source, Signal: 'traces', Outcome: 'accepted', Reason: '', Requests: 3, Items: 12 },
      { SourceId: source, Signal: 'traces', Outcome: 'refused', Reason: 'bad_request', Requests: 2, Items: 2 },
      { SourceId: source, Signal: 'traces', Outcome: 'refused', Reason: 'payload_too_large', Requests: 1, Items: 1 },
      { SourceId: source, Signal: 'traces', Outcome: 'refused', Reason: 'unsupported_media_type', Requests: 1, Items: 1 },
    ].sort(byKey);
    // A flush every 10 s, then the local log's interval: up to about 11 s.
    let last: CountRow[] = [];
    await eventually(async () => JSON.stringify((last = (await counted()).sort(byKey))) === JSON.stringify(expected), 25_000, 250).catch(() => {
      expect(last).toEqual(expected);
    });
    // The buckets are 10 s apart, on the boundaries of the wall clock.
    const stamps = await sluice.rows<{ s: number }>('SELECT DISTINCT toUnixTimestamp(Timestamp) AS s FROM otel.ingest_counts');
    for (const { s } of stamps) expect(Number(s) % 10).toBe(0);
  });
});
