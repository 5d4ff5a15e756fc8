/**
 * Every refusal of the OTLP/HTTP front end, checked against a whole running server, and that
 * no refusal loses or corrupts data accepted before it.
 */
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { compress as zstdCompress } from '@mongodb-js/zstd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSluice, type TestSluice } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

const MiB = 1024 * 1024;
let sluice: TestSluice;

beforeAll(async () => {
  sluice = await startTestSluice({ 'limits.rateBurst': 100_000, 'limits.ratePerMinute': 600_000 });
});
afterAll(async () => sluice?.stop());

async function post(path: string, body: Uint8Array | string, headers: Record<string, string> = {}) {
  // Node's fetch takes any Uint8Array; the DOM typings only name ArrayBuffer-backed views.
  const response = await fetch(sluice.baseUrl + path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-protobuf', 'x-api-key': sluice.apiKey, ...headers },
    body: body as BodyInit,
  });
  return { status: response.status, headers: response.headers, body: new Uint8Array(await response.arrayBuffer()) };
}

async function spanCount(): Promise<number> {
  const [row] = await sluice.rows<{ n: number }>(`SELECT count() AS n FROM otel.otel_traces WHERE SourceId = '${sluice.sourceId}'`);
  return Number(row!.n);
}

describe('OTLP/HTTP refusals', () => {
  let stored = 0;

  beforeAll(async () => {
    // Data accepted before the refusals; every test below checks it is still there, intact.
    const accepted = await post('/v1/traces', encodeTraces(traceRequest({ spans: 5, name: 'accepted-before' })));
    expect(accepted.status).toBe(200);
    stored = await spanCount();
    expect(stored).toBe(5);
  });

  it('401 without a key, with an unknown key, and with a malformed Authorization header', async () => {
    const body = encodeTraces(traceRequest({ spans: 1 }));
    expect((await post('/v1/traces', body, { 'x-api-key': '' })).status).toBe(401);
    expect((await post('/v1/traces', body, { 'x-api-key': 'slk_' + 'A'.repeat(43) })).status).toBe(401);
    const bearer = await post('/v1/traces', body, { 'x-api-key': '', authorization: `Basic ${sluice.apiKey}` });
    expect(bearer.status).toBe(401);
    expect((await post('/v1/traces', body, { 'x-api-key': '', authorization: `Bearer ${sluice.apiKey}` })).status).toBe(200);
    expect(await spanCount()).toBe(stored + 1);
    stored += 1;
  });

  it('a revoked key stops working', async () => {
    const key = await sluice.sources.addKey(sluice.sourceId);
    const body = encodeTraces(traceRequest({ spans: 1 }));
    expect((await post('/v1/traces', body, { 'x-api-key': key.apiKey })).status).toBe(200);
    stored += 1;
    await sluice.sources.revokeKey(key.keyId);
    const started = Date.now();
    let status = 0;
    while (Date.now() - started < 10_000 && status !== 401) status = (await post('/v1/traces', body, { 'x-api-key': key.apiKey })).status;
    expect(status).toBe(401);
  });

  it('415 for an unsupported content type or encoding', async () => {
    const body = encodeTraces(traceRequest({ spans: 1 }));
    expect((await post('/v1/traces', body, { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await post('/v1/traces', body, { 'content-encoding': 'br' })).status).toBe(415);
    expect((await post('/v1/traces', body, { 'content-encoding': 'deflate' })).status).toBe(415);
    // Names every object answers for (found by gateway/headers.fuzz.test.ts): a 500 before.
    for (const contentType of ['constructor', 'toString', '__proto__']) {
      const response = await post('/v1/traces', body, { 'content-type': contentType });
      expect([contentType, response.status]).toEqual([contentType, 415]);
    }
  });

  it('405 with Allow for a wrong method, 404 for an unknown path', async () => {
    const wrong = await fetch(sluice.baseUrl + '/v1/traces', { method: 'GET' });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect((await fetch(sluice.baseUrl + '/v1/nope', { method: 'POST' })).status).toBe(404);
  });

  it('400 with a google.rpc.Status for truncated or garbage protobuf and malformed JSON', async () => {
    const body = encodeTraces(traceRequest({ spans: 3 }));
    const truncated = await post('/v1/traces', body.subarray(0, body.length - 7));
    expect(truncated.status).toBe(400);
    expect(truncated.headers.get('content-type')).toBe('application/x-protobuf');
    expect(truncated.body[0]).toBe(0x08); // Status.code
    expect(truncated.body[1]).toBe(3); // INVALID_ARGUMENT
    expect((await post('/v1/traces', new Uint8Array([0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2]))).status).toBe(400);
    const json = await post('/v1/traces', '{"resourceSpans": [', { 'content-type': 'application/json' });
    expect(json.status).toBe(400);
    expect(JSON.parse(Buffer.from(json.body).toString()).code).toBe(3);
    expect((await post('/v1/traces', gzipSync(body).subarray(0, 20), { 'content-encoding': 'gzip' })).status).toBe(400);
  });

  it('413 for 10 MiB + 1 byte, announced by Content-Length', async () => {
    const response = await post('/v1/traces', new Uint8Array(10 * MiB + 1));
    expect(response.status).toBe(413);
  });

  it('413 for a chunked body at the first byte past the cap, without reading the rest', async () => {
    // A raw client streams a chunked body that would go on far past the cap, reading the
    // response as it writes (yielding between chunks, so the 413 is read before the server
    // closes the connection on the rest).
    const url = new URL(sluice.baseUrl);
    const result = await new Promise<{ response: string; sent: number }>((resolve) => {
      let sent = 0;
      let response = '';
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        socket.destroy();
        resolve({ response, sent });
      };
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(
          'POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n' +
            `X-API-Key: ${sluice.apiKey}\r\nTransfer-Encoding: chunked\r\n\r\n`,
        );
        const chunk = Buffer.alloc(64 * 1024, 1);
        const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
        const pump = () => {
          if (done || response.includes('\r\n\r\n') || sent >= 100 * MiB) return;
          sent += chunk.length;
          socket.write(frame, () => setImmediate(pump));
        };
        pump();
      });
      socket.on('data', (data) => {
        response += data.toString('latin1');
        if (response.includes('\r\n\r\n')) finish();
      });
      socket.on('error', finish);
      socket.on('close', finish);
    });
    expect(result.response).toMatch(/^HTTP\/1\.1 413 /);
    expect(result.sent).toBeLessThan(20 * MiB);
  });

  it('413 for gzip and zstd bombs (10 MiB compressed or less, expanding far past the cap)', async () => {
    const zeros = Buffer.alloc(64 * MiB);
    const gzipBomb = gzipSync(zeros, { level: 9 });
    expect(gzipBomb.length).toBeLessThan(10 * MiB);
    expect((await post('/v1/traces', gzipBomb, { 'content-encoding': 'gzip' })).status).toBe(413);
    const zstdBomb = await zstdCompress(zeros, 19);
    expect((await post('/v1/traces', zstdBomb, { 'content-encoding': 'zstd' })).status).toBe(413);
  });

  it('accepts a body exactly at the decompressed cap boundary minus one request', async () => {
    const body = encodeTraces(traceRequest({ spans: 2 }));
    expect((await post('/v1/traces', gzipSync(body), { 'content-encoding': 'gzip' })).status).toBe(200);
    expect((await post('/v1/traces', await zstdCompress(Buffer.from(body), 3), { 'content-encoding': 'zstd' })).status).toBe(200);
    stored += 4;
  });

  it('an empty request succeeds', async () => {
    const response = await post('/v1/traces', new Uint8Array(0));
    expect(response.status).toBe(200);
    expect(response.body.length).toBe(0);
    const json = await post('/v1/logs', '{}', { 'content-type': 'application/json' });
    expect(json.status).toBe(200);
    expect(Buffer.from(json.body).toString()).toBe('{}');
  });

  it('nothing accepted before the refusals was lost or changed', async () => {
    expect(await spanCount()).toBe(stored);
    const names = await sluice.rows<{ SpanName: string; n: number }>(
      `SELECT SpanName, count() AS n FROM otel.otel_traces WHERE SpanName = 'accepted-before' GROUP BY SpanName`,
    );
    expect(names).toEqual([{ SpanName: 'accepted-before', n: 5 }]);
  });
});

describe('health and metrics', () => {
  it('GET /api/v1/health needs no key', async () => {
    const response = await fetch(sluice.baseUrl + '/api/v1/health');
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok', service: 'sluice-ingest' });
  });

  it('is served by the engine the test project asked for (vitest.config.ts runs this file on both)', async () => {
    const response = await fetch(sluice.baseUrl + '/api/v1/health');
    // uWebSockets.js marks every response with this header; node:http does not.
    expect(response.headers.has('uwebsockets')).toBe(sluice.config.http.engine === 'uws');
    expect(sluice.config.http.engine).toBe(process.env.SLUICE_TEST_HTTP_ENGINE ?? 'node');
  });

  it('GET /metrics counts accepted items and refusals per signal', async () => {
    const text = await (await fetch(sluice.baseUrl + '/metrics')).text();
    expect(text).toMatch(/sluice_items_accepted_total\{signal="traces",transport="http"\} \d+/);
    expect(text).toMatch(/sluice_requests_total\{protocol="http",signal="traces",status="401"\} \d+/);
    expect(text).toMatch(/sluice_requests_total\{protocol="http",signal="traces",status="413"\} \d+/);
  });
});
