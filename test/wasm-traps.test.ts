/**
 * A trap in the WebAssembly transcoder, in a worker thread of a process that opened chDB, is an
 * exception: the request is served by the JavaScript transcoder, logged and counted, the module's
 * instance is replaced, and the process keeps serving. That takes Node's
 * --disable-wasm-trap-handler (bin/node-flags.ts): without it V8 turns an out-of-bounds access
 * into an exception from a SIGSEGV handler, which chDB took (storage/chdb-session.ts gives the
 * signal its default action back), and the process dies.
 *
 * The module is correct, so the trap is caused: test/wasm-trap-preload.mjs (preloaded with
 * `node --import`) breaks the first instance of the module in each worker thread.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './harness.ts';
import { runSluice, startSluiceProcess, type SluiceProcess } from './sluice-processes.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PRELOAD = join(ROOT, 'test/wasm-trap-preload.mjs');
const CHILD = join(ROOT, 'test/wasm-trap-child.ts');

let dir: string;
let server: SluiceProcess | undefined;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-wasm-traps-'));
});
afterAll(async () => {
  await server?.stop('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

/** Runs test/wasm-trap-child.ts with these Node flags; how it ended and what it printed. */
function child(flags: string[]): Promise<{ code: number | null; signal: string | null; stdout: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...flags, '--import', 'tsx', '--import', PRELOAD, CHILD], { cwd: ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME }, timeout: 60_000 }, (err, stdout) => {
      const failure = err as (Error & { code?: number | string; signal?: string }) | null;
      resolve({ code: failure ? (typeof failure.code === 'number' ? failure.code : null) : 0, signal: failure?.signal ?? null, stdout });
    });
  });
}

describe('a trap in the WebAssembly transcoder, with chDB in the process', () => {
  it('is an exception in a pipeline worker thread with --disable-wasm-trap-handler, and ends the process without it', { timeout: 120_000 }, async () => {
    const caught = await child(['--disable-wasm-trap-handler']);
    expect(caught.code).toBe(0);
    expect(JSON.parse(caught.stdout)).toEqual({ first: 'trap', replaced: 1, second: 'the same rows as JavaScript' });

    const killed = await child([]);
    expect(killed.signal).toBe('SIGSEGV');
    expect(killed.stdout).toBe('');
  });

  it('in `sluice serve`: the request is stored by the JavaScript transcoder, logged and counted, the next ones by the module', { timeout: 120_000 }, async () => {
    const dataDir = join(dir, 'serve');
    const env = { SLUICE_DATA_DIR: dataDir, SLUICE_WORKERS: '1', SLUICE_LOG_LEVEL: 'info', SLUICE_TRANSCODER: 'wasm' };
    server = await startSluiceProcess('serve', 'serve', dir, env, { dataDir, nodeFlags: ['--import', PRELOAD] });
    const apiKey = JSON.parse(await runSluice(['sources', 'create', '--name', 'traps'], env)).apiKey as string;
    const post = (service: string) => fetch(`${server!.baseUrl}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify({ resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] }, scopeSpans: [{ spans: [1, 2, 3].map((i) => ({ traceId: '5b8efff798038103d269b633813fc60c', spanId: `eee19b7ec3c1b17${i}`, name: `span ${i}`, startTimeUnixNano: String(BigInt(Date.now()) * 1_000_000n) })) }] }] }),
    });

    const trapped = await post('trapped');
    expect(trapped.status).toBe(200);
    const metrics = await server.metrics();
    expect(metrics).toMatch(/^sluice_transcoder_fallbacks_total\{reason="trap"\} 1$/m);
    expect(metrics).toMatch(/^sluice_build_info\{[^}]*transcoder="wasm"[^}]*\} 1$/m);
    expect(await server.log()).toMatch(/"reason":"trap","detail":"RuntimeError: memory access out of bounds".*"msg":"the WebAssembly transcoder could not serve a request; the JavaScript transcoder did \(a bug in the module; its instance was replaced\)"/);

    for (let i = 0; i < 3; i++) expect((await post(`served ${i}`)).status).toBe(200);
    expect(await server.metrics()).toMatch(/^sluice_transcoder_fallbacks_total\{reason="trap"\} 1$/m);
    const counts = async () => Object.fromEntries((await runSluice(['query', 'SELECT ServiceName AS service, count() AS n FROM otel.otel_traces GROUP BY service ORDER BY service'], env))
      .trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as { service: string; n: string }).map(({ service, n }) => [service, Number(n)]));
    await eventually(async () => Object.keys(await counts()).length === 4, 30_000, 200);
    expect(await counts()).toEqual({ 'served 0': 3, 'served 1': 3, 'served 2': 3, trapped: 3 });
    expect(server.child.exitCode).toBe(null);
  });
});
