/** The per-IP token bucket on a running server, over HTTP and gRPC. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

let sluice: TestSluice;

beforeAll(async () => {
  // One token a minute: no refill between the requests of a test, however slow the machine
  // (at 60 a minute, five slow requests under a CPU hog earned a sixth token).
  sluice = await startTestSluice({ 'limits.rateBurst': 5, 'limits.ratePerMinute': 1 });
});
afterAll(async () => sluice?.stop());

const send = (headers: Record<string, string> = {}) =>
  fetch(sluice.baseUrl + '/v1/traces', {
    method: 'POST',
    headers: { 'content-type': 'application/x-protobuf', 'x-api-key': sluice.apiKey, ...headers },
    body: encodeTraces(traceRequest({ spans: 1 })),
  });

describe('rate limit', () => {
  it('allows a burst of the bucket size, then 429 with Retry-After, and counts nothing refused as stored', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await send()).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    const refused = await send();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // A google.rpc.Status in the request's content type: code 14 (UNAVAILABLE) with RetryInfo.
    expect(refused.headers.get('content-type')).toBe('application/x-protobuf');
    const status = Buffer.from(await refused.arrayBuffer());
    expect([status[0], status[1]]).toEqual([0x08, 14]);
    expect(status.toString('latin1')).toContain('type.googleapis.com/google.rpc.RetryInfo');
    const [row] = await sluice.rows<{ n: number }>('SELECT count() AS n FROM otel.otel_traces');
    expect(Number(row!.n)).toBe(5);
  });

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy', async () => {
    const response = await send({ 'x-forwarded-for': '198.51.100.23' });
    expect(response.status).toBe(429);
  });

  it('the agent API and install manifests share the same per-IP bucket', async () => {
    const headers = { 'content-type': 'application/json', 'x-api-key': sluice.apiKey };
    const requests = [
      fetch(sluice.baseUrl + '/api/v1/ingest', { method: 'POST', headers, body: '{"entries":[{"message":"m"}]}' }),
      fetch(sluice.baseUrl + '/api/v1/metrics/ingest', { method: 'POST', headers, body: '{"metrics":[]}' }),
      fetch(sluice.baseUrl + '/api/v1/heartbeat', { method: 'POST', headers, body: '{"agentId":"a","version":"1"}' }),
      fetch(sluice.baseUrl + '/api/v1/webhooks/deploy', { method: 'POST', headers, body: '{"service":"s","version":"1"}' }),
      fetch(sluice.baseUrl + '/api/v1/agent/config', { headers }),
      fetch(sluice.baseUrl + '/install/sit_' + 'x'.repeat(43)),
    ];
    for (const response of await Promise.all(requests)) {
      expect(response.status).toBe(429);
      expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(await response.json()).toMatchObject({ error: 'rate_limited', statusCode: 429 });
    }
    const [row] = await sluice.rows<{ n: number }>('SELECT count() AS n FROM otel.agent_logs');
    expect(Number(row!.n)).toBe(0);
  });

  it('health is not rate limited', async () => {
    expect((await fetch(sluice.baseUrl + '/api/v1/health')).status).toBe(200);
  });
});
