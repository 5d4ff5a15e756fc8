/**
 * The worker side of the gateway as a whole process: the real PipelinePool (piscina, N
 * threads) fed gzip requests as the HTTP front end hands them over (a body in a buffer of
 * its own, transferred), the rows coming back and handed back to the pool, as IngestService
 * does once the bus published them. No HTTP, no bus: what is left is decompression, transcoding, piscina and the two
 * threads' garbage. Prints items per CPU second of the whole process (every thread).
 *
 *   node --disable-wasm-trap-handler --import tsx bench/pipeline-pool.ts [traces|agent-logs] [seconds=10] [workers=2] [inFlight=8] [transcoders=auto] [encoding=gzip]
 *
 * `encoding` zstd sends the same requests compressed with zstd (level 3, as the Collector's
 * `compression: zstd`) instead of gzip.
 *
 * `transcoders` (SLUICE_TRANSCODER, comma-separated: js,wasm) runs a pool of each, measured in
 * turns (three rounds each, every round starting with another), and prints each one's median
 * and its ratio to the first. WebAssembly needs Node's --disable-wasm-trap-handler, as Sluice
 * runs (bin/node-flags.ts; NODE_OPTIONS=--disable-wasm-trap-handler npx tsx ... works too).
 *
 * With `node --cpu-prof --cpu-prof-dir=DIR --import tsx bench/pipeline-pool.ts ...` each
 * thread writes a profile; bench/cpu-profile-summary.ts adds them up (GC share, top functions).
 */
import { gunzipSync } from 'node:zlib';
import { compress as zstdCompress } from '@mongodb-js/zstd';
import { agentLogBodies, loadTraceTypes, traceBodies } from './payload.ts';
import { PipelinePool } from '../pipeline/pool.ts';
import type { PipelineTask } from '../pipeline/tasks.ts';
import type { TranscoderSetting } from '../pipeline/wasm/select.ts';

const kind = process.argv[2] ?? 'traces';
const seconds = Number(process.argv[3] ?? 10);
const workers = Number(process.argv[4] ?? 2);
const inFlight = Number(process.argv[5] ?? 8);
const transcoders = (process.argv[6] ?? 'auto').split(',') as TranscoderSetting[];
const encoding = (process.argv[7] ?? 'gzip') as 'gzip' | 'zstd';
if (encoding !== 'gzip' && encoding !== 'zstd') throw new Error(`encoding: gzip or zstd, not ${encoding}`);

const { bodies: gzipped, items } = kind === 'agent-logs'
  ? { bodies: agentLogBodies(64, 1000).bodies, items: 1000 }
  : { bodies: traceBodies(loadTraceTypes(), 64, 100).bodies, items: 100 };
const bodies = encoding === 'gzip' ? gzipped : await Promise.all(gzipped.map((body) => zstdCompress(gunzipSync(body), 3)));

function task(i: number): PipelineTask {
  const compressed = bodies[i % bodies.length]!;
  // A buffer of its own, as BodyCollector makes it: the pool transfers it to the worker.
  const body = Buffer.allocUnsafeSlow(compressed.byteLength);
  body.set(compressed);
  const common = { encoding, body, sourceId: 'bench', maxBytes: 10 * 1024 * 1024, maxChunkBytes: 1024 * 1024 };
  return kind === 'agent-logs'
    ? { kind: 'agent', payload: 'logs', ...common, receivedAt: String(BigInt(Date.now()) * 1_000_000n) }
    : { kind: 'otlp', signal: 'traces', format: 'protobuf', ...common };
}

/** Keeps `inFlight` requests going through `pool` until the deadline; returns items handled. */
async function load(pool: PipelinePool, durationMs: number): Promise<number> {
  const deadline = performance.now() + durationMs;
  let next = 0;
  let handled = 0;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (performance.now() < deadline) {
      const result = await pool.run(task(next++));
      if (!result.ok) throw new Error(`task failed: ${result.message}`);
      if (result.fallback) throw new Error(`the WebAssembly transcoder fell back: ${result.fallback.fallback} (${result.fallback.detail})`);
      handled += result.accepted;
      pool.recycle(result.tables); // as IngestService does once the bus published the rows
    }
  }));
  return handled;
}

interface Round {
  handled: number;
  cpuSeconds: number;
  wallSeconds: number;
}

/** One measured round of `pool`: items, and the whole process's CPU and wall seconds. */
async function round(pool: PipelinePool): Promise<Round> {
  const started = process.cpuUsage();
  const wallStarted = performance.now();
  const handled = await load(pool, seconds * 1000);
  const cpu = process.cpuUsage(started);
  return { handled, cpuSeconds: (cpu.user + cpu.system) / 1e6, wallSeconds: (performance.now() - wallStarted) / 1000 };
}

const pools = transcoders.map((transcoder) => new PipelinePool({ workers, retryAfterSeconds: 1, transcoder }));
for (const pool of pools) await pool.start();
for (const pool of pools) await load(pool, 2000); // warm up: JIT, pooled buffers

// Several transcoders: rounds in turns, so that each meets the same moments of a shared machine.
const roundsEach = pools.length > 1 ? 3 : 1;
const rounds: Round[][] = pools.map(() => []);
for (let r = 0; r < roundsEach; r++) {
  for (let k = 0; k < pools.length; k++) {
    const p = (r + k) % pools.length;
    rounds[p]!.push(await round(pools[p]!));
  }
}
for (const pool of pools) await pool.shutdown();

const unit = kind === 'agent-logs' ? 'entries' : 'spans';
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const rates = rounds.map((own) => own.map((r) => r.handled / r.cpuSeconds));
for (const [p, own] of rounds.entries()) {
  const label = `${transcoders[p]} (${pools[p]!.transcoder?.transcoder === 'wasm' ? 'WebAssembly' : 'JavaScript'})`;
  const middle = own.find((r) => r.handled / r.cpuSeconds === median(rates[p]!))!;
  const versus = p === 0 ? '' : `, ${median(rates[p]!.map((rate, r) => rate / rates[0]![r]!)).toFixed(2)}x ${transcoders[0]}`;
  const of = own.length > 1 ? `median of ${own.length} rounds; ` : '';
  console.log(`${kind} (${encoding}), ${label}: ${fmt(median(rates[p]!))} ${unit} per CPU-second${versus} (${of}${fmt(middle.handled / items)} requests of ${items}, ${middle.cpuSeconds.toFixed(1)} CPU-s over ${middle.wallSeconds.toFixed(1)} s: ${(middle.cpuSeconds / middle.wallSeconds).toFixed(2)} cores; ${workers} workers, ${inFlight} in flight)`);
}
