/** OTLP/gRPC refusals with their gRPC codes, through a raw grpc-js client. */
import * as grpc from '@grpc/grpc-js';
import { compress as zstdCompress } from '@mongodb-js/zstd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { h2Connect, unaryCall } from './grpc-raw.ts';
import { startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

let sluice: TestSluice;
let client: grpc.Client;
/** Sends with grpc-encoding: gzip. */
let gzipClient: grpc.Client;
let acceptedSpans = 0;

beforeAll(async () => {
  // One token a minute: the bucket does not refill during the file, however slow the machine.
  sluice = await startTestSluice({ 'limits.rateBurst': 9, 'limits.ratePerMinute': 1 });
  client = new grpc.Client(sluice.grpcAddress, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': 128 * 1024 * 1024,
  });
  gzipClient = new grpc.Client(sluice.grpcAddress, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': 128 * 1024 * 1024,
    'grpc.default_compression_algorithm': grpc.compressionAlgorithms.gzip,
  });
});
afterAll(async () => {
  client?.close();
  gzipClient?.close();
  await sluice?.stop();
});

const identity = (b: Buffer) => b;

function exportTraces(body: Uint8Array, metadata: Record<string, string>, via = client) {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise<{ code: number; details?: string; trailers?: grpc.Metadata }>((resolve) => {
    via.makeUnaryRequest(
      '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
      identity,
      identity,
      Buffer.from(body),
      md,
      (err) => resolve(err ? { code: err.code, details: err.details, trailers: err.metadata } : { code: 0 }),
    );
  });
}

describe('OTLP/gRPC refusals', () => {
  it('accepts a valid export and refuses a bad key with UNAUTHENTICATED', async () => {
    const body = encodeTraces(traceRequest({ spans: 2 }));
    expect((await exportTraces(body, { 'x-api-key': sluice.apiKey })).code).toBe(grpc.status.OK);
    expect((await exportTraces(body, { authorization: `Bearer ${sluice.apiKey}` })).code).toBe(grpc.status.OK);
    expect((await exportTraces(body, { 'x-api-key': sluice.apiKey }, gzipClient)).code).toBe(grpc.status.OK);
    acceptedSpans += 6;
    expect((await exportTraces(body, {})).code).toBe(grpc.status.UNAUTHENTICATED);
    expect((await exportTraces(body, { 'x-api-key': 'slk_nope' })).code).toBe(grpc.status.UNAUTHENTICATED);
  });

  it('takes a message compressed with zstd (grpc-encoding: zstd), as OTLP/HTTP takes zstd bodies', async () => {
    const session = h2Connect(sluice.grpcAddress);
    try {
      const body = await zstdCompress(Buffer.from(encodeTraces(traceRequest({ spans: 3 }))), 3);
      const result = await unaryCall(session, body, { 'x-api-key': sluice.apiKey, 'grpc-encoding': 'zstd' });
      expect(result.status).toBe(grpc.status.OK);
      acceptedSpans += 3;
    } finally {
      session.close();
    }
  });

  it('refuses garbage protobuf with INVALID_ARGUMENT', async () => {
    const result = await exportTraces(new Uint8Array([0x0a, 0xff, 0xff, 0x01]), { 'x-api-key': sluice.apiKey });
    expect(result.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('refuses a message over 10 MiB with RESOURCE_EXHAUSTED', async () => {
    const result = await exportTraces(new Uint8Array(10 * 1024 * 1024 + 1), { 'x-api-key': sluice.apiKey });
    expect(result.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
  });

  it('refuses a gzip bomb (a small message inflating past 10 MiB) with RESOURCE_EXHAUSTED', async () => {
    const bomb = new Uint8Array(64 * 1024 * 1024);
    const result = await exportTraces(bomb, { 'x-api-key': sluice.apiKey }, gzipClient);
    expect(result.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
  });

  it('throttles with UNAVAILABLE and a RetryInfo detail', async () => {
    const body = encodeTraces(traceRequest({ spans: 1 }));
    let result = { code: 0 } as Awaited<ReturnType<typeof exportTraces>>;
    for (let i = 0; i < 10 && result.code === 0; i++) {
      result = await exportTraces(body, { 'x-api-key': sluice.apiKey });
      if (result.code === 0) acceptedSpans += 1;
    }
    expect(result.code).toBe(grpc.status.UNAVAILABLE);
    const details = result.trailers?.get('grpc-status-details-bin')[0] as Buffer | undefined;
    expect(details?.toString('latin1')).toContain('type.googleapis.com/google.rpc.RetryInfo');
  });

  it('stored exactly the accepted spans', async () => {
    const [row] = await sluice.rows<{ n: number }>('SELECT count() AS n FROM otel.otel_traces');
    expect(Number(row!.n)).toBe(acceptedSpans);
  });
});
