/**
 * The `sluice` executable as a user runs it: admin commands with and without a running server
 * on the same data dir, and configuration errors.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

const run = promisify(execFile);
const SLUICE = fileURLToPath(new URL('../bin/sluice.mjs', import.meta.url));

let dataDir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-cli-'));
  env = { ...process.env, SLUICE_DATA_DIR: dataDir, SLUICE_OTLP_HTTP_PORT: '0', SLUICE_OTLP_GRPC_PORT: '0', SLUICE_LOG_LEVEL: 'info', SLUICE_WORKERS: '1' };
});
afterAll(async () => rm(dataDir, { recursive: true, force: true }));

const sluice = (args: string[], extraEnv: NodeJS.ProcessEnv = {}) => run(process.execPath, [SLUICE, ...args], { env: { ...env, ...extraEnv } });

describe('sluice CLI', () => {
  let created: { id: string; name: string; apiKey: string; keyId: string };

  it('creates a source without a running server and prints one JSON object', async () => {
    const { stdout } = await sluice(['sources', 'create', '--name', 'web']);
    created = JSON.parse(stdout);
    expect(created).toMatchObject({ name: 'web', id: expect.any(String), apiKey: expect.stringMatching(/^slk_/) });
  });

  it('reports every configuration problem and exits non-zero', async () => {
    const error = await sluice(['sources', 'list'], { SLUICE_OTLP_HTTP_PORT: 'http', SLUICE_LOG_LEVEL: 'chatty' }).catch((err) => err);
    expect(error.code).toBe(1);
    expect(error.stderr).toContain('http.port (SLUICE_OTLP_HTTP_PORT): must be integer');
    expect(error.stderr).toContain('logLevel (SLUICE_LOG_LEVEL)');
  });

  it('explains usage errors', async () => {
    const error = await sluice(['sources', 'create']).catch((err) => err);
    expect(error.code).toBe(2);
    expect(error.stderr).toContain('missing --name');
  });

  describe('while `sluice serve` runs on the same data dir', () => {
    let server: ChildProcess;
    let httpPort = 0;
    const logs: string[] = [];

    beforeAll(async () => {
      server = spawn(process.execPath, [SLUICE, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      server.stdout!.on('data', (chunk: Buffer) => logs.push(...chunk.toString().split('\n').filter(Boolean)));
      server.stderr!.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
      const serving = await eventually(() => logs.map((l) => { try { return JSON.parse(l); } catch { return {}; } }).find((l) => l.msg === 'sluice is serving'), 60_000);
      httpPort = serving.httpPort;
    });
    afterAll(async () => {
      server.kill('SIGTERM');
      await new Promise((resolve) => server.once('exit', resolve));
    });

    it('creates sources, lists them and queries storage through the control socket', async () => {
      const second = JSON.parse((await sluice(['sources', 'create', '--name', 'batch'])).stdout);
      const ingest = await fetch(`http://127.0.0.1:${httpPort}/v1/traces`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-protobuf', 'x-api-key': second.apiKey },
        body: encodeTraces(traceRequest({ spans: 3, name: 'from-cli-test' })),
      });
      expect(ingest.status).toBe(200);
      const { stdout } = await sluice(['query', "SELECT SourceId, count() AS n FROM otel.otel_traces WHERE SpanName = 'from-cli-test' GROUP BY SourceId"]);
      expect(stdout.trim().split('\n').map((l) => JSON.parse(l))).toEqual([{ SourceId: second.id, n: 3 }]);
      const list = JSON.parse((await sluice(['sources', 'list'])).stdout);
      expect(list.map((s: { name: string }) => s.name)).toEqual(['web', 'batch']);
      expect(JSON.stringify(list)).not.toContain(second.apiKey);
    });

    it('refuses writes through `sluice query`', async () => {
      const error = await sluice(['query', 'DROP TABLE otel.otel_traces']).catch((err) => err);
      expect(error.code).toBe(1);
      expect(error.stderr).toContain('read-only');
    });

    it('revokes a key: the running server refuses it within a second', async () => {
      const send = () =>
        fetch(`http://127.0.0.1:${httpPort}/v1/traces`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-protobuf', 'x-api-key': created.apiKey },
          body: encodeTraces(traceRequest({ spans: 1 })),
        });
      expect((await send()).status).toBe(200);
      await sluice(['sources', 'revoke-key', '--key', created.keyId]);
      const started = Date.now();
      let status = 0;
      while (status !== 401 && Date.now() - started < 1000) status = (await send()).status;
      expect(status).toBe(401);
      const added = JSON.parse((await sluice(['sources', 'add-key', '--source', created.id])).stdout);
      expect(added.apiKey).toMatch(/^slk_/);
    });

    it('never logs API keys', () => {
      expect(logs.join('\n')).not.toContain(created.apiKey);
    });
  });
});
