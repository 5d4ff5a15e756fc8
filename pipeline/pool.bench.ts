/**
 * The worker side of the gateway as a whole process: the real PipelinePool (piscina, N
 * threads) fed gzip requests as the HTTP front end hands them over (a body in a buffer of
 * its own, transferred), the rows coming back and handed back to the pool, as IngestService
 * does once the bus published them. No HTTP, no bus: what is left is decompression, transcoding, piscina and the two
 * threads' garbage. Prints items per CPU second of the whole process (every thread).
 *
 *   npx tsx pipeline/pool.bench.ts [traces|agent-logs] [seconds=10] [workers=2] [inFlight=8]
 *
 * With `node --cpu-prof --cpu-prof-dir=DIR --import tsx pipeline/pool.bench.ts ...` each
 * thread writes a profile; bench/cpu-profile-summary.ts adds them up (GC share, top functions).
 */
import { agentLogBodies, loadTraceTypes, traceBodies } from '../bench/payload.ts';
import { PipelinePool } from './pool.ts';
import type { PipelineTask } from './tasks.ts';

const kind = process.argv[2] ?? 'traces';
const seconds = Number(process.argv[3] ?? 10);
const workers = Number(process.argv[4] ?? 2);
const inFlight = Number(process.argv[5] ?? 8);

const { bodies, items } = kind === 'agent-logs'
  ? { bodies: agentLogBodies(64, 1000).bodies, items: 1000 }
  : { bodies: traceBodies(loadTraceTypes(), 64, 100).bodies, items: 100 };

function task(i: number): PipelineTask {
  const compressed = bodies[i % bodies.length]!;
  // A buffer of its own, as BodyCollector makes it: the pool transfers it to the worker.
  const body = Buffer.allocUnsafeSlow(compressed.byteLength);
  body.set(compressed);
  const common = { encoding: 'gzip' as const, body, sourceId: 'bench', maxBytes: 10 * 1024 * 1024, maxChunkBytes: 1024 * 1024 };
  return kind === 'agent-logs'
    ? { kind: 'agent', payload: 'logs', ...common, receivedAt: String(BigInt(Date.now()) * 1_000_000n) }
    : { kind: 'otlp', signal: 'traces', format: 'protobuf', ...common };
}

const pool = new PipelinePool({ workers, retryAfterSeconds: 1 });
await pool.start();

/** Keeps `inFlight` requests going until the deadline; returns items handled. */
async function load(durationMs: number): Promise<number> {
  const deadline = performance.now() + durationMs;
  let next = 0;
  let handled = 0;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (performance.now() < deadline) {
      const result = await pool.run(task(next++));
      if (!result.ok) throw new Error(`task failed: ${result.message}`);
      handled += result.accepted;
      pool.recycle(result.tables); // as IngestService does once the bus published the rows
    }
  }));
  return handled;
}

await load(2000); // warm up: JIT, pooled buffers
const started = process.cpuUsage();
const wallStarted = performance.now();
const handled = await load(seconds * 1000);
const cpu = process.cpuUsage(started);
const cpuSeconds = (cpu.user + cpu.system) / 1e6;
const wallSeconds = (performance.now() - wallStarted) / 1000;
await pool.shutdown();

const unit = kind === 'agent-logs' ? 'entries' : 'spans';
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
console.log(`${kind}: ${fmt(handled / cpuSeconds)} ${unit} per CPU-second (${fmt(handled / items)} requests of ${items}, ${cpuSeconds.toFixed(1)} CPU-s over ${wallSeconds.toFixed(1)} s: ${(cpuSeconds / wallSeconds).toFixed(2)} cores; ${workers} workers, ${inFlight} in flight)`);
