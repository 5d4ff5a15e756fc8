/**
 * Run by test/wasm-traps.test.ts as a process of its own (`node [--disable-wasm-trap-handler]
 * --import tsx --import test/wasm-trap-preload.mjs test/wasm-trap-child.ts`): opens chDB as
 * `sluice serve` does (storage/chdb-session.ts: its signal handlers taken, the default
 * dispositions put back), then transcodes a request in a pipeline worker thread with the
 * WebAssembly module, whose first instance the preload broke so that it traps. Prints what the
 * worker answered, if the process is still there to print it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BundledPool } from '../pipeline/bundled-pool.ts';
import { openChdbSession } from '../storage/chdb-session.ts';

const dir = await mkdtemp(join(tmpdir(), 'sluice-wasm-trap-'));
const session = await openChdbSession(join(dir, 'engine'));
const pool = new BundledPool({ entry: fileURLToPath(new URL('./wasm-trap-worker.ts', import.meta.url)), name: 'the trap test pool', minThreads: 1, maxThreads: 1 });
try {
  await pool.start();
  console.log(JSON.stringify(await pool.run({})));
} finally {
  await pool.shutdown();
  session.close();
  await rm(dir, { recursive: true, force: true });
}
