/**
 * The workers' bundle: plain JavaScript that a Node process without tsx loads, whose modules
 * still find the files beside their sources, private to this user and gone with its pool.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { PipelinePool } from './pool.ts';
import { bundleWorker, type WorkerBundle } from '../core/worker-bundle.ts';

const run = promisify(execFile);
const PIPELINE_WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

/** An OTLP/JSON trace request of one span: decoding JSON reads the .proto files beside pipeline/otlp/json.ts. */
const jsonTraces = JSON.stringify({
  resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', name: 'bundled', startTimeUnixNano: '1', endTimeUnixNano: '2' }] }] }],
});

describe('bundleWorker', () => {
  let bundle: WorkerBundle | undefined;
  afterEach(async () => {
    await bundle?.remove();
    bundle = undefined;
  });

  it('is plain JavaScript: Node without tsx runs its tasks, and its modules read the files beside their sources', async () => {
    bundle = await bundleWorker(PIPELINE_WORKER);
    // A child process with no loader hooks (vitest's own are not inherited by a plain `node`).
    // The .proto files beside pipeline/otlp/json.ts decode the JSON; the module beside
    // pipeline/wasm/transcoder.ts turns it into rows.
    const script = `
      const worker = await import(process.argv[1]);
      const body = Buffer.from(process.argv[2]);
      const result = await worker.default({ kind: 'otlp', signal: 'traces', format: 'json', encoding: 'identity', body, sourceId: 'src', maxBytes: 1 << 20, maxChunkBytes: Infinity, transcoder: 'wasm' });
      const value = result[Symbol.for('Piscina.valueOf')] ?? result;
      console.log(JSON.stringify({ warm: worker.warm('wasm'), ok: value.ok, accepted: value.accepted, message: value.message, fallback: value.fallback }));
    `;
    const { stdout } = await run(process.execPath, ['--disable-wasm-trap-handler', '--input-type=module', '-e', script, bundle.url, jsonTraces], { env: { PATH: process.env.PATH } });
    expect(JSON.parse(stdout)).toEqual({ warm: { transcoder: 'wasm' }, ok: true, accepted: 1 });
  });

  it('is written where only this user can read it, and removed', async () => {
    bundle = await bundleWorker(PIPELINE_WORKER);
    const file = fileURLToPath(bundle.url);
    expect((await stat(dirname(file))).mode & 0o777).toBe(0o700);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    await bundle.remove();
    await expect(stat(dirname(file))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('PipelinePool', () => {
  const savedTmp = process.env.TMPDIR;
  afterEach(() => {
    if (savedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmp;
  });

  it('removes its bundle when it shuts down, also when stopped while it starts', async () => {
    // A temporary directory of this test's own: others' pools write theirs beside it.
    const tmp = await mkdtemp(join(tmpdir(), 'sluice-pool-test-'));
    process.env.TMPDIR = tmp;
    try {
      const pool = new PipelinePool({ workers: 1, retryAfterSeconds: 1 });
      await pool.start();
      expect(await readdir(tmp)).toHaveLength(1);
      await pool.shutdown();
      expect(await readdir(tmp)).toEqual([]);

      const stoppedEarly = new PipelinePool({ workers: 1, retryAfterSeconds: 1 });
      const started = stoppedEarly.start();
      await stoppedEarly.shutdown();
      await started;
      expect(await readdir(tmp)).toEqual([]);
      expect(stoppedEarly.status()).toMatchObject({ ok: false });
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  });
});
