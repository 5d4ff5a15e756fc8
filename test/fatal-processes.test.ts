/**
 * A `sluice serve` that meets a fatal error exits at once with a status that says why, and its
 * ports and data dir are free for the next one; a worker thread that reaches its heap limit
 * fails its request with 503 and is replaced, and the process keeps serving.
 *
 * The main thread's fatal errors are caused by test/fatal-preload.mjs, preloaded with
 * `node --import` (Sluice itself has no such switch), on SIGUSR2 once chDB is open: on the
 * embedded default chDB's crash handlers held such a process for five minutes (storage/chdb-session.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT_UNCAUGHT_EXCEPTION } from '../bin/exit-codes.ts';
import { eventually } from './harness.ts';
import { runSluice, startSluiceProcess, type SluiceProcess } from './sluice-processes.ts';

const PRELOAD = fileURLToPath(new URL('./fatal-preload.mjs', import.meta.url));
/** Room for a loaded 2-core machine; a process held by chDB's handlers takes 300 s. */
const EXIT_DEADLINE_MS = 20_000;

let dir: string;
const running: SluiceProcess[] = [];
const env = (dataDir: string, extra: Record<string, string> = {}) => ({ SLUICE_DATA_DIR: dataDir, SLUICE_WORKERS: '1', SLUICE_LOG_LEVEL: 'info', ...extra });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-fatal-'));
});
afterAll(async () => {
  for (const server of running) await server.stop('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

const exited = (server: SluiceProcess) => server.child.exitCode !== null || server.child.signalCode !== null;

async function serve(name: string, dataDir: string, extra: Record<string, string> = {}, options: Parameters<typeof startSluiceProcess>[4] = {}): Promise<SluiceProcess> {
  const server = await startSluiceProcess('serve', name, dir, env(dataDir, extra), { dataDir, ...options });
  running.push(server);
  return server;
}

/** A second `sluice serve` on the same data dir and ports starts and answers. */
async function takeOver(first: SluiceProcess): Promise<void> {
  const second = await serve(`${first.name}-after`, first.dataDir, {}, { ports: first });
  expect((await fetch(`${second.baseUrl}/api/v1/health`)).status).toBe(200);
  expect(second.httpPort).toBe(first.httpPort);
  await second.stop();
}

describe('a fatal error on the main thread', () => {
  it('of heap: the process exits at once with SIGABRT, and a restart takes its data dir and ports', { timeout: 120_000 }, async () => {
    const dataDir = join(dir, 'heap');
    const server = await serve('heap', dataDir, { FATAL_TEST_ACTION: 'heap' }, { nodeFlags: ['--max-old-space-size=256', '--import', PRELOAD] });
    server.child.kill('SIGUSR2');
    await eventually(() => exited(server), EXIT_DEADLINE_MS, 100);
    expect(server.child.signalCode).toBe('SIGABRT');
    expect(await server.log()).toMatch(/JavaScript heap out of memory/);
    await takeOver(server);
  });

  it('an exception nothing caught: logged as fatal, exit code 70', { timeout: 120_000 }, async () => {
    const dataDir = join(dir, 'throw');
    const server = await serve('throw', dataDir, { FATAL_TEST_ACTION: 'throw' }, { nodeFlags: ['--import', PRELOAD] });
    server.child.kill('SIGUSR2');
    await eventually(() => exited(server), EXIT_DEADLINE_MS, 100);
    expect(server.child.exitCode).toBe(EXIT_UNCAUGHT_EXCEPTION);
    expect(await server.log()).toMatch(/"level":60,.*"msg":"uncaught exception \(a bug\); exiting"/);
    await takeOver(server);
  });

  it('a crash signal (what a fault in chDB\'s code raises) ends the process at once', { timeout: 120_000 }, async () => {
    const server = await serve('segv', join(dir, 'segv'));
    server.child.kill('SIGSEGV');
    await eventually(() => exited(server), EXIT_DEADLINE_MS, 100);
    expect(server.child.signalCode).toBe('SIGSEGV');
    await takeOver(server);
  });
});

/** An OTLP/JSON logs request of about `bytes` of tiny records: decoding it takes about ten times its size in heap. */
function tinyLogRecords(bytes: number): string {
  const now = String(BigInt(Date.now()) * 1_000_000n);
  const record = `{"timeUnixNano":"${now}","body":{"stringValue":"x"},"attributes":[{"key":"a","value":{"intValue":"1"}}]}`;
  const count = Math.floor((bytes - 200) / (record.length + 1));
  return `{"resourceLogs":[{"resource":{},"scopeLogs":[{"scope":{},"logRecords":[${Array(count).fill(record).join(',')}]}]}]}`;
}

describe('a worker thread at its heap limit (SLUICE_WORKER_HEAP_MB)', () => {
  it('fails its request with 503, is replaced, and the next request is stored', { timeout: 120_000 }, async () => {
    const dataDir = join(dir, 'worker');
    const server = await serve('worker', dataDir, { SLUICE_WORKER_HEAP_MB: '64' });
    const apiKey = JSON.parse(await runSluice(['sources', 'create', '--name', 'heavy'], env(dataDir))).apiKey as string;
    const post = (body: string) => fetch(`${server.baseUrl}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': apiKey }, body });

    const heavy = await post(tinyLogRecords(10 * 1024 * 1024 - 1024));
    expect(heavy.status).toBe(503);
    expect(heavy.headers.get('retry-after')).toBe('1');
    expect(await heavy.text()).toMatch(/ran out of memory \(its heap limit is 64 MiB\)/);

    const light = await post(tinyLogRecords(4096));
    expect(light.status).toBe(200);
    const ready = await (await fetch(`${server.baseUrl}/api/v1/ready`)).json() as { status: string; components: Record<string, { ok: boolean; figures?: Record<string, number> }> };
    expect(ready.status).toBe('ready');
    expect(ready.components.pool).toMatchObject({ ok: true, figures: { threads: 1, outOfMemory: 1 } });
    expect(await server.metrics()).toMatch(/^sluice_worker_out_of_memory_total\{pool="pool"\} 1$/m);
    expect(await server.log()).toMatch(/a worker thread reached its heap limit/);
    expect(exited(server)).toBe(false);
  });
});
