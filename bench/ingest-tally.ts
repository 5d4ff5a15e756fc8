/**
 * What counting a request in the IngestTally costs the event loop, beside what every request
 * already pays for sluice_requests_total (prom-client, labels hashed per call): nanoseconds per
 * call, and garbage collections during the calls (none: nothing is allocated per call), for a
 * mix of sources, signals and outcomes as a gateway sees it. A flush between runs of
 * FLUSH_EVERY calls encodes the rows (a bus that takes them).
 *
 *   node --expose-gc --import tsx bench/ingest-tally.ts [calls=5000000] [sources=50]
 */
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { SluiceError } from '../core/errors.ts';
import { createLogger } from '../core/log.ts';
import { SluiceMetrics, type SignalLabel } from '../core/metrics.ts';
import { IngestTally } from '../pipeline/ingest-tally.ts';

const calls = Number(process.argv[2] ?? 5_000_000);
const sourceCount = Number(process.argv[3] ?? 50);
const FLUSH_EVERY = 1_000_000;

const sources = Array.from({ length: sourceCount }, (_, i) => `src_${i.toString(36).padStart(8, '0')}`);
const signals: SignalLabel[] = ['traces', 'logs', 'metrics', 'agent_logs', 'heartbeats'];
const refusal = new SluiceError('unavailable', 'busy');
let rowsPublished = 0;
const tally = new IngestTally({ bus: { publish: async (chunks) => void (rowsPublished += chunks.reduce((n, c) => n + c.rows, 0)) }, log: createLogger('silent') });
const metrics = new SluiceMetrics();
const gc = (globalThis as { gc?: () => void }).gc;
/** Start times of every garbage collection (delivered a little later than they happen). */
const collections: number[] = [];
new PerformanceObserver((list) => collections.push(...list.getEntries().map((entry) => entry.startTime))).observe({ entryTypes: ['gc'] });

/** Every source sends every signal; one request in every 53 refused, as a loaded gateway might. */
function tallyRun(n: number): void {
  for (let i = 0; i < n; i++) {
    const source = sources[i % sourceCount]!;
    const signal = signals[Math.floor(i / sourceCount) % signals.length]!;
    if (i % 53 === 0) tally.refused(source, signal, refusal);
    else tally.accepted(source, signal, 100);
  }
}

function metricsRun(n: number): void {
  for (let i = 0; i < n; i++) metrics.requests.inc({ protocol: 'http', signal: signals[i % signals.length]!, status: i % 50 === 0 ? '503' : '200' });
}

/** ns per call, and collections that started while the calls ran (flushes left out). */
async function measure(name: string, run: (n: number) => void): Promise<void> {
  run(100_000); // warm up the JIT
  let ns = 0;
  const windows: Array<[number, number]> = [];
  for (let done = 0; done < calls; done += FLUSH_EVERY) {
    const n = Math.min(FLUSH_EVERY, calls - done);
    gc?.();
    const from = performance.now();
    const started = process.hrtime.bigint();
    run(n);
    ns += Number(process.hrtime.bigint() - started);
    windows.push([from, performance.now()]);
    await tally.flush();
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  const during = collections.filter((at) => windows.some(([from, to]) => at >= from && at <= to)).length;
  console.log(`${name}: ${(ns / calls).toFixed(1)} ns per call, ${during} garbage collections during ${calls} calls`);
}

await measure('IngestTally (accepted / refused)', tallyRun);
await measure('sluice_requests_total.inc (already paid per request)', metricsRun);
console.log(`rows published: ${rowsPublished} in ${Math.ceil(calls / FLUSH_EVERY) + 1} flushes (${sourceCount} sources x ${signals.length} signals, accepted and refused)`);
if (!gc) console.log('(run with node --expose-gc: each run then starts from a collected heap)');
