/**
 * Micro-benchmark of the hot path on one core (one thread, CPU time): gunzip + transcode of 100-span trace export
 * requests (20 attributes per span, bench/payload.ts), in spans per second. Also reports
 * transcode alone, so the two costs can be told apart, and the worker's whole task (what a
 * pipeline thread runs per request). Medians of several rounds; then what one request costs
 * in fresh buffers, JS heap and GC (bench-rounds.ts). Then the JavaScript transcoder against the
 * WebAssembly one (pipeline/wasm, the rows copied out included), in rounds taken in turns, on
 * the same trace requests and on logs and metrics requests made here, and the worker's task
 * with each.
 *
 *   node --disable-wasm-trap-handler --import tsx bench/transcode.ts [rounds=7] [secondsPerRound=1.5]
 */
import { gunzipSync } from 'node:zlib';
import { loadTraceTypes, traceBodies } from './payload.ts';
import { allocations, benchOptions, interleaved, measure, workerTaskStep } from '../pipeline/bench-rounds.ts';
import type { OtlpTask } from '../pipeline/tasks.ts';
import { isFallback, WasmTranscoder } from '../pipeline/wasm/transcoder.ts';
import { transcodeOtlp, type Signal } from '../pipeline/otlp/index.ts';
import { encodeRequest } from '../test/otlp-requests.ts';

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

/** Logs and metrics requests like the traces': 100 items, 20 attributes each (strings, ints, doubles, bools). */
function attributesOf(i: number, n = 20): object[] {
  return Array.from({ length: n }, (_, k) => ({
    key: `attribute.${k}`,
    value: [{ stringValue: `value ${i} ${k}` }, { intValue: String(i * k) }, { doubleValue: i / (k + 1) }, { boolValue: (i + k) % 2 === 0 }][k % 4],
  }));
}
const now = BigInt(Date.now()) * 1_000_000n;
const resource = { attributes: [{ key: 'service.name', value: { stringValue: 'bench' } }, ...attributesOf(0, 8)] };
function otherRequest(signal: 'logs' | 'metrics', r: number): Uint8Array {
  const items = Array.from({ length: SPANS_PER_REQUEST }, (_, i) => i + r * SPANS_PER_REQUEST);
  if (signal === 'logs') {
    return encodeRequest('logs', { resourceLogs: [{ resource, scopeLogs: [{ scope: { name: 'bench' }, logRecords: items.map((i) => ({
      timeUnixNano: String(now + BigInt(i)), severityNumber: 9, severityText: 'INFO', body: { stringValue: `request ${i} served in ${i % 97} ms` },
      attributes: attributesOf(i), traceId: Buffer.alloc(16, i % 251), spanId: Buffer.alloc(8, i % 241),
    })) }] }] });
  }
  const point = (i: number) => ({ timeUnixNano: String(now + BigInt(i)), startTimeUnixNano: String(now), attributes: attributesOf(i, 5) });
  return encodeRequest('metrics', { resourceMetrics: [{ resource, scopeMetrics: [{ scope: { name: 'bench' }, metrics: [
    { name: 'gauge', gauge: { dataPoints: items.slice(0, 40).map((i) => ({ ...point(i), asDouble: i / 3 })) } },
    { name: 'sum', sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: items.slice(40, 80).map((i) => ({ ...point(i), asInt: String(i) })) } },
    { name: 'histogram', histogram: { aggregationTemporality: 2, dataPoints: items.slice(80).map((i) => ({ ...point(i), count: '10', sum: i, bucketCounts: ['1', '2', '3', '4'], explicitBounds: [1, 5, 10] })) } },
  ] }] }] });
}

const wasm = new WasmTranscoder();
const requests: Record<Signal, Uint8Array[]> = {
  traces: raw,
  logs: Array.from({ length: 50 }, (_, r) => otherRequest('logs', r)),
  metrics: Array.from({ length: 50 }, (_, r) => otherRequest('metrics', r)),
};
for (const [signal, bodiesOf] of Object.entries(requests) as Array<[Signal, Uint8Array[]]>) {
  for (const body of bodiesOf) {
    const js = Buffer.concat(transcodeOtlp(signal, 'protobuf', body, 'bench').tables.map((t) => t.data));
    const outcome = wasm.transcode(signal, body, 'bench');
    if (isFallback(outcome) || !Buffer.concat(outcome.tables.map((t) => t.data)).equals(js)) throw new Error(`${signal}: the WebAssembly transcoder wrote other rows`);
  }
  console.log(`${signal}, transcode only (${bodiesOf.length} requests, the same rows from both):`);
  const unit = { traces: 'spans', logs: 'records', metrics: 'points' }[signal];
  await interleaved(unit, [
    ['JavaScript', (i) => transcodeOtlp(signal, 'protobuf', bodiesOf[i % bodiesOf.length]!, 'bench').accepted],
    ['WebAssembly (rows copied out)', (i) => (wasm.transcode(signal, bodiesOf[i % bodiesOf.length]!, 'bench') as { accepted: number }).accepted],
  ], options);
}

// The worker's whole task (gunzip, transcode, the rows' buffers recycled as the pool does) with each.
const wasmTask = workerTaskStep((i) => ({ ...task(i), transcoder: 'wasm' }));
console.log('traces, worker task, rows recycled:');
await interleaved('spans', [
  ['JavaScript', (i) => workerTask(i, true)],
  ['WebAssembly', (i) => wasmTask(i, true)],
], options);
