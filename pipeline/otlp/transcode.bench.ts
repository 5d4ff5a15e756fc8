/**
 * Micro-benchmark of the hot path on one core (one thread, CPU time): gunzip + transcode of 100-span trace export
 * requests (20 attributes per span, bench/payload.ts), in spans per second. Also reports
 * transcode alone, so the two costs can be told apart, and the worker's whole task (what a
 * pipeline thread runs per request). Medians of several rounds; then what one request costs
 * in fresh buffers, JS heap and GC (bench-rounds.ts).
 *
 *   npx tsx pipeline/otlp/transcode.bench.ts [rounds=7] [secondsPerRound=1.5]
 */
import { gunzipSync } from 'node:zlib';
import { loadTraceTypes, traceBodies } from '../../bench/payload.ts';
import { allocations, benchOptions, measure, workerTaskStep } from '../bench-rounds.ts';
import type { OtlpTask } from '../tasks.ts';
import { transcodeOtlp } from './index.ts';

const options = benchOptions();
const SPANS_PER_REQUEST = 100;

const { bodies, rawBytes, gzipBytes } = traceBodies(loadTraceTypes(), 200, SPANS_PER_REQUEST);
const raw = bodies.map((body) => gunzipSync(body));
const task = (i: number): OtlpTask => ({
  kind: 'otlp', signal: 'traces', format: 'protobuf', encoding: 'gzip', body: bodies[i % bodies.length]!,
  sourceId: 'bench', maxBytes: 10 * 1024 * 1024, maxChunkBytes: Infinity,
});
const workerTask = workerTaskStep(task);

console.log(`${bodies.length} distinct requests of ${SPANS_PER_REQUEST} spans: ${rawBytes} B protobuf, ${gzipBytes} B gzip; RowBinary ${transcodeOtlp('traces', 'protobuf', raw[0]!, 'bench').tables[0]!.data.byteLength} B`);
await measure('gunzip only', 'spans', (i) => (gunzipSync(bodies[i % bodies.length]!), SPANS_PER_REQUEST), options);
await measure('transcode only', 'spans', (i) => transcodeOtlp('traces', 'protobuf', raw[i % raw.length]!, 'bench').accepted, options);
await measure('gunzip + transcode', 'spans', (i) => transcodeOtlp('traces', 'protobuf', gunzipSync(bodies[i % bodies.length]!), 'bench').accepted, options);
await measure('worker task', 'spans', (i) => workerTask(i), options);
console.log('per request:');
await allocations('transcode only', (i) => transcodeOtlp('traces', 'protobuf', raw[i % raw.length]!, 'bench').accepted);
await allocations('worker task', (i) => workerTask(i));
await allocations('worker task, rows recycled', (i) => workerTask(i, true));
