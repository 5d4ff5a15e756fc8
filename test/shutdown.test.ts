/**
 * A stop (SIGINT, SIGTERM) has a deadline (SLUICE_SHUTDOWN_TIMEOUT_MS): clients that hold a
 * gRPC stream or an upload open cannot keep the process, and with it the data dir, after it.
 * A restart on the same data dir and ports then starts, and a second signal exits at once.
 */
import { connect as connectHttp2 } from 'node:http2';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect as connectTcp } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './harness.ts';
import { runSluice, startSluiceProcess, type SluiceProcess } from './sluice-processes.ts';

const TIMEOUT_MS = 3000;

let dir: string;
let dataDir: string;
const running: SluiceProcess[] = [];
const env = () => ({ SLUICE_DATA_DIR: dataDir, SLUICE_SHUTDOWN_TIMEOUT_MS: String(TIMEOUT_MS), SLUICE_WORKERS: '1', SLUICE_LOG_LEVEL: 'info' });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-shutdown-'));
  dataDir = join(dir, 'data');
});
afterAll(async () => {
  for (const server of running) await server.stop('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

const exited = (server: SluiceProcess) => server.child.exitCode !== null || server.child.signalCode !== null;

/** A gRPC Export whose message is announced (1 MiB) and never finished. */
function holdGrpcStream(port: number, apiKey: string) {
  const session = connectHttp2(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  const stream = session.request({
    ':method': 'POST',
    ':path': '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
    'content-type': 'application/grpc',
    te: 'trailers',
    'x-api-key': apiKey,
  });
  stream.on('error', () => {});
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(1024 * 1024, 1);
  stream.write(Buffer.concat([prefix, Buffer.alloc(1000)]));
  let ended = false;
  stream.on('close', () => (ended = true));
  return { ended: () => ended, close: () => session.destroy() };
}

/** An OTLP/HTTP upload that announces 1 MiB and sends 1000 bytes. */
function holdUpload(port: number, apiKey: string) {
  const socket = connectTcp(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write(`POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\nx-api-key: ${apiKey}\r\nContent-Length: ${1024 * 1024}\r\n\r\n`);
  socket.write(Buffer.alloc(1000));
  return socket;
}

describe('shutdown', () => {
  it('ends within its deadline while clients hold a gRPC stream and an upload, and a restart can take the data dir', { timeout: 120_000 }, async () => {
    const first = await startSluiceProcess('serve', 'first', dir, env(), { dataDir });
    running.push(first);
    const apiKey = JSON.parse(await runSluice(['sources', 'create', '--name', 'held'], env())).apiKey as string;
    const stream = holdGrpcStream(first.grpcPort, apiKey);
    const upload = holdUpload(first.httpPort, apiKey);
    try {
      // Both requests are in: the server has read their first bytes.
      await new Promise((resolve) => setTimeout(resolve, 500));
      first.child.kill('SIGINT');
      // The deadline plus generous room for a loaded machine; on a process that waits for its
      // clients it never comes (they hold on until the test ends).
      await eventually(() => exited(first), TIMEOUT_MS + 30_000, 100);
      expect(stream.ended()).toBe(true);
      expect(await first.log()).toMatch(/"msg":"shutting down"/);

      const second = await startSluiceProcess('serve', 'second', dir, env(), { dataDir });
      running.push(second);
      expect((await fetch(`${second.baseUrl}/api/v1/health`)).status).toBe(200);
    } finally {
      stream.close();
      upload.destroy();
    }
  });

  it('exits at once on a second signal', { timeout: 120_000 }, async () => {
    const patient = { ...env(), SLUICE_DATA_DIR: join(dir, 'patient'), SLUICE_SHUTDOWN_TIMEOUT_MS: '600000' };
    const server = await startSluiceProcess('serve', 'patient', dir, patient, { dataDir: patient.SLUICE_DATA_DIR });
    running.push(server);
    const apiKey = JSON.parse(await runSluice(['sources', 'create', '--name', 'held-again'], patient)).apiKey as string;
    const stream = holdGrpcStream(server.grpcPort, apiKey);
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
      server.child.kill('SIGINT');
      await eventually(async () => (await server.log()).includes('"msg":"shutting down"'), 20_000, 50);
      server.child.kill('SIGINT');
      await eventually(() => exited(server), 20_000, 50);
      expect(await server.log()).toMatch(/second signal: exiting without finishing the shutdown/);
    } finally {
      stream.close();
    }
  });
});
