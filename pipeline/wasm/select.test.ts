/**
 * SLUICE_TRANSCODER (pipeline/wasm/select.ts, core/config.ts): which transcoder a worker thread
 * runs for auto, wasm and js, why not WebAssembly when it does not, the fallback to JavaScript
 * for a request the module could not serve, OTLP/JSON reaching the module as protobuf, and the
 * worker pool running the transcoder the setting names (the process's start-up summary and
 * sluice_build_info: test/metrics.test.ts, bin/terminal.test.ts, test/wasm-traps.test.ts).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../core/config.ts';
import { otlpJson, validRequest } from '../../test/otlp-arbitraries.ts';
import { transcodeOtlp } from '../otlp/index.ts';
import { attrs, encodeRequest } from '../../test/otlp-requests.ts';
import { PipelinePool } from '../pool.ts';
import { OtlpTranscoder, wasmTrapsAreExceptions, WASM_TRAP_FLAG } from './select.ts';
import { WasmTranscoder } from './transcoder.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ids = { traceId: Buffer.alloc(16, 7), spanId: Buffer.alloc(8, 9) };
const body = encodeRequest('traces', { resourceSpans: [{ resource: { attributes: attrs({ 'service.name': 'svc' }) }, scopeSpans: [{ spans: [{ ...ids, name: 'a', attributes: attrs({ d: 0.1, i: 3 }) }] }] }] });
const rows = (result: { tables: Array<{ data: Uint8Array }> }) => Buffer.concat(result.tables.map((t) => t.data)).toString('hex');
const expected = rows(transcodeOtlp('traces', 'protobuf', body, 'src'));
const notLoaded = () => {
  throw new Error('no module here');
};

describe('SLUICE_TRANSCODER', () => {
  it('is auto by default, and takes only auto, wasm and js', () => {
    expect(loadConfig({}).pipeline.transcoder).toBe('auto');
    expect(loadConfig({ SLUICE_TRANSCODER: 'js' }).pipeline.transcoder).toBe('js');
    expect(() => loadConfig({ SLUICE_TRANSCODER: 'rust' })).toThrow(ConfigError);
    try {
      loadConfig({ SLUICE_TRANSCODER: 'rust' });
    } catch (err) {
      expect((err as ConfigError).problems).toEqual(['pipeline.transcoder (SLUICE_TRANSCODER): must be equal to one of the allowed values (auto, wasm, js)']);
    }
  });

  it('auto runs the WebAssembly module where it loads and traps are exceptions, else JavaScript and says why', () => {
    let loads = 0;
    const load = () => (loads++, new WasmTranscoder());
    const wasm = new OtlpTranscoder('auto', load, true);
    expect(wasm.status).toEqual({ transcoder: 'wasm' });
    expect(rows(wasm.transcode('traces', 'protobuf', body, 'src'))).toBe(expected);
    expect(loads).toBe(1);

    const withoutFlag = new OtlpTranscoder('auto', load, false);
    expect(withoutFlag.status).toEqual({ transcoder: 'js', problem: expect.stringContaining(`Node runs without ${WASM_TRAP_FLAG}`) });
    expect(loads).toBe(1);
    const broken = new OtlpTranscoder('auto', notLoaded, true);
    expect(broken.status).toEqual({ transcoder: 'js', problem: 'the WebAssembly transcoder did not load: no module here' });
    for (const transcoder of [withoutFlag, broken]) {
      expect(rows(transcoder.transcode('traces', 'protobuf', body, 'src'))).toBe(expected);
      expect(transcoder.takeFallback()).toBeUndefined();
    }
  });

  it('js never loads the module', () => {
    const js = new OtlpTranscoder('js', notLoaded, true);
    expect(js.status).toEqual({ transcoder: 'js' });
    expect(rows(js.transcode('traces', 'protobuf', body, 'src'))).toBe(expected);
  });

  it('wasm that could not load serves every request with JavaScript, each reported as a fallback', () => {
    const wasm = new OtlpTranscoder('wasm', notLoaded, true);
    expect(wasm.status.transcoder).toBe('js');
    expect(rows(wasm.transcode('traces', 'protobuf', body, 'src'))).toBe(expected);
    expect(wasm.takeFallback()).toEqual({ fallback: 'not_loaded', detail: 'the WebAssembly transcoder did not load: no module here' });
    expect(wasm.takeFallback()).toBeUndefined();
  });

  it('a request the module could not serve is served by JavaScript, reported once, and the next one by the module', () => {
    const transcoder = new OtlpTranscoder('wasm', () => new WasmTranscoder(), true);
    const module = transcoder['wasm']!;
    (module['instance'].exports.__stack_pointer as WebAssembly.Global).value = 0; // as a bug could leave it
    expect(rows(transcoder.transcode('traces', 'protobuf', body, 'src'))).toBe(expected);
    expect(transcoder.takeFallback()).toMatchObject({ fallback: 'trap' });
    expect(transcoder.replacedInstances).toBe(1);
    expect(rows(transcoder.transcode('traces', 'protobuf', body, 'src'))).toBe(expected);
    expect(transcoder.takeFallback()).toBeUndefined();
  });

  it('OTLP/JSON goes to the module as protobuf: the same rows as the JavaScript path', () => {
    const transcoder = new OtlpTranscoder('wasm', () => new WasmTranscoder(), true);
    fc.assert(fc.property(fc.constantFrom('traces', 'logs', 'metrics' as const), fc.integer(), (signal, seed) => {
      const [{ request }] = fc.sample(validRequest(signal), { numRuns: 1, seed });
      const json = Buffer.from(otlpJson(request!));
      expect(rows(transcoder.transcode(signal, 'json', json, 'src'))).toBe(rows(transcodeOtlp(signal, 'json', json, 'src')));
      expect(transcoder.takeFallback()).toBeUndefined();
    }), { numRuns: 30, seed: 1 });
  });

  it('sees the trap flag on the command line or in NODE_OPTIONS', () => {
    expect(wasmTrapsAreExceptions([WASM_TRAP_FLAG], '')).toBe(true);
    expect(wasmTrapsAreExceptions([], `--max-old-space-size=100 ${WASM_TRAP_FLAG}`)).toBe(true);
    expect(wasmTrapsAreExceptions(['--no-memory-reducer'], '')).toBe(false);
  });
});

describe('the worker pool with SLUICE_TRANSCODER', () => {
  it('runs the transcoder the setting names in its threads, with the same rows', async () => {
    for (const [setting, transcoder] of [['wasm', 'wasm'], ['auto', 'wasm'], ['js', 'js']] as const) {
      const pool = new PipelinePool({ workers: 1, retryAfterSeconds: 1, transcoder: setting });
      try {
        await pool.start();
        expect(pool.transcoder, setting).toEqual({ transcoder });
        const result = await pool.run({ kind: 'otlp', signal: 'traces', format: 'protobuf', encoding: 'identity', body: Buffer.from(body), sourceId: 'src', maxBytes: 1 << 20, maxChunkBytes: Infinity });
        expect(result.ok && rows(result)).toBe(expected);
      } finally {
        await pool.shutdown();
      }
    }
  }, 60_000);

  it('does not start with SLUICE_TRANSCODER=wasm in a process without the trap flag; with auto it runs JavaScript', async () => {
    // A process of its own: this one runs with the flag (vitest.config.ts).
    const dir = await mkdtemp(join(tmpdir(), 'sluice-transcoder-'));
    const script = join(dir, 'pool.mts');
    await writeFile(script, `
      import { PipelinePool } from ${JSON.stringify(join(ROOT, 'pipeline/pool.ts'))};
      for (const transcoder of ['auto', 'wasm']) {
        const pool = new PipelinePool({ workers: 1, retryAfterSeconds: 1, transcoder });
        try { await pool.start(); console.log(transcoder, JSON.stringify(pool.transcoder)); }
        catch (err) { console.log(transcoder, 'refused:', err.message); }
        finally { await pool.shutdown(); }
      }`);
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME } })
      .finally(() => rm(dir, { recursive: true, force: true }));
    const [auto, wasm] = stdout.trim().split('\n');
    expect(JSON.parse(auto!.slice('auto '.length))).toEqual({ transcoder: 'js', problem: expect.stringContaining(`Node runs without ${WASM_TRAP_FLAG}`) });
    expect(wasm).toMatch(new RegExp(`^wasm refused: SLUICE_TRANSCODER=wasm, and Node runs without ${WASM_TRAP_FLAG}`));
  }, 60_000);
});
