/**
 * The in-flight byte budget at the front ends (embedded mode, in process): a request that finds
 * the budget used up is refused with 503 + Retry-After (OTLP/HTTP, agent API) or UNAVAILABLE
 * with RetryInfo (OTLP/gRPC), readiness says "full", and the budget comes back whole when a
 * request ends any way — a client that leaves, a payload the pipeline refuses, rows the bus
 * refuses.
 */
import * as grpc from '@grpc/grpc-js';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

const MiB = 1024 * 1024;
const BUDGET = 4 * MiB;
let sluice: TestSluice;
let client: grpc.Client;

beforeAll(async () => {
  sluice = await startTestSluice({
    'limits.maxInFlightBytes': BUDGET,
    // The embedded bus refuses rows past 1 MiB waiting for an insert: a request of ~2 MiB of rows never fits.
    'storage.maxPendingBytes': MiB,
    'limits.rateBurst': 100_000,
  });
  client = new grpc.Client(sluice.grpcAddress, grpc.credentials.createInsecure());
});
afterAll(async () => {
  client?.close();
  await sluice?.stop();
});

async function figure(name: string): Promise<number> {
  const metrics = await (await fetch(`${sluice.baseUrl}/metrics`)).text();
  const value = metrics.match(new RegExp(`^${name.replace(/[{}]/g, '\\$&')} (\\d+)$`, 'm'))?.[1];
  return Number(value);
}
const inUse = () => figure('sluice_inflight_bytes{figure="in_use"}');

const postTraces = (body: Uint8Array<ArrayBuffer>) =>
  fetch(`${sluice.baseUrl}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/x-protobuf', 'x-api-key': sluice.apiKey }, body });

function exportGrpc(body: Uint8Array): Promise<{ code: number; trailers?: grpc.Metadata }> {
  const metadata = new grpc.Metadata();
  metadata.set('x-api-key', sluice.apiKey);
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.from(body),
      metadata,
      (err) => resolve(err ? { code: err.code, trailers: err.metadata } : { code: 0 }),
    );
  });
}

describe('the in-flight byte budget', () => {
  it('refuses with 503 + Retry-After (HTTP) and UNAVAILABLE + RetryInfo (gRPC) while it is used up, and takes requests again once freed', async () => {
    // A slow client announces more than the whole budget and sends the budget's worth of it
    // (a body takes budget as its bytes arrive, not its Content-Length).
    const slow = connect(sluice.httpPort, '127.0.0.1');
    slow.on('error', () => {});
    slow.write(
      `POST /v1/traces HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-protobuf\r\n` +
        `x-api-key: ${sluice.apiKey}\r\ncontent-length: ${BUDGET + MiB}\r\n\r\n`,
    );
    slow.write(Buffer.alloc(BUDGET));
    await eventually(async () => (await inUse()) === BUDGET);

    const small = encodeTraces(traceRequest({ spans: 5, name: 'refused' }));
    const otlp = await postTraces(small);
    expect([otlp.status, otlp.headers.get('retry-after')]).toEqual([503, '5']);
    const agent = await fetch(`${sluice.baseUrl}/api/v1/heartbeat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': sluice.apiKey },
      body: JSON.stringify({ agentId: 'a1', version: '1.0.0' }),
    });
    expect([agent.status, agent.headers.get('retry-after'), (await agent.json()).error]).toEqual([503, '5', 'unavailable']);
    const rpc = await exportGrpc(small);
    expect(rpc.code).toBe(grpc.status.UNAVAILABLE);
    expect((rpc.trailers?.get('grpc-status-details-bin')[0] as Buffer).toString('latin1')).toContain('type.googleapis.com/google.rpc.RetryInfo');
    expect(await figure('sluice_inflight_refusals_total')).toBe(3);
    const ready = await (await fetch(`${sluice.baseUrl}/api/v1/ready`)).json();
    expect(ready.components.inflight).toMatchObject({ ok: true, detail: expect.stringContaining('full'), figures: { inUseBytes: BUDGET, limitBytes: BUDGET } });

    // The slow client leaves: its reservation comes back, and requests are taken again.
    slow.destroy();
    await eventually(async () => (await inUse()) === 0);
    expect((await postTraces(encodeTraces(traceRequest({ spans: 5, name: 'taken' })))).status).toBe(200);
    expect((await exportGrpc(encodeTraces(traceRequest({ spans: 5, name: 'taken' })))).code).toBe(grpc.status.OK);
    expect(await inUse()).toBe(0);
    const [row] = await sluice.rows<{ refused: string; taken: string }>(
      "SELECT countIf(SpanName = 'refused') AS refused, countIf(SpanName = 'taken') AS taken FROM otel.otel_traces",
    );
    expect([Number(row!.refused), Number(row!.taken)]).toEqual([0, 10]);
  });

  it('counts a relay admin body too: held, it takes budget as it arrives; with the budget used up, the admin API answers 503 + Retry-After', async () => {
    const heldBytes = 512 * 1024;
    const held = connect(sluice.relay!.port, '127.0.0.1');
    held.on('error', () => {});
    held.write(`POST /api/v1/admin/login HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${heldBytes + 1024}\r\n\r\n`);
    held.write(Buffer.alloc(heldBytes, 0x20));
    await eventually(async () => (await inUse()) === heldBytes);
    const slow = connect(sluice.httpPort, '127.0.0.1');
    slow.on('error', () => {});
    slow.write(
      `POST /v1/traces HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-protobuf\r\n` +
        `x-api-key: ${sluice.apiKey}\r\ncontent-length: ${BUDGET}\r\n\r\n`,
    );
    slow.write(Buffer.alloc(BUDGET - heldBytes));
    await eventually(async () => (await inUse()) === BUDGET);

    const login = () =>
      fetch(`http://127.0.0.1:${sluice.relay!.port}/api/v1/admin/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'nobody@example.com', password: 'wrong password' }),
      });
    const refused = await login();
    expect([refused.status, refused.headers.get('retry-after')]).toEqual([503, '5']);

    held.destroy();
    slow.destroy();
    await eventually(async () => (await inUse()) === 0);
    expect((await login()).status).toBe(401);
  });

  it('comes back whole when the pipeline refuses the payload or the bus refuses the rows', async () => {
    const garbage = await postTraces(new Uint8Array([0x0a, 0xff, 0xff, 0x01]));
    expect(garbage.status).toBe(400);
    expect(await inUse()).toBe(0);

    // ~1 MiB of protobuf, ~2 MiB of rows: within the budget, over what the embedded bus takes.
    const big = await postTraces(encodeTraces(traceRequest({ spans: 12_000, name: 'big' })));
    expect(big.status).toBe(503);
    expect(await big.text()).toContain('storage is behind');
    expect(await inUse()).toBe(0);
  });
});
