/**
 * The C prototype of the trace transcoder (traces.c, not part of Sluice) against the
 * JavaScript one, on the bench's requests (bench/payload.ts: 100 spans, 20 attributes each):
 * first that every build writes the same bytes as JavaScript for every request, then spans per
 * CPU second of each, in this thread, one call per request, in rounds taken in turns
 * (bench-rounds.ts, interleaved):
 * - C through Node-API (build.sh: gcc, -march=native), reading the request where it lies and
 *   writing into a buffer of ours;
 * - the same C as WebAssembly (build-wasm.sh: clang, wasm32), measured three ways: the call
 *   alone (request already in the module's memory, rows left there), with the request copied
 *   in, and with the rows copied out too into a buffer of ours (what a product would pay: the
 *   module cannot read or write outside its memory).
 * A build that is missing is skipped with its build command.
 *
 *   bench/native/build.sh; bench/native/build-wasm.sh; npx tsx bench/native/bench.ts [rounds=7] [secondsPerRound=1.5]
 *   (rounds of 0.3 s, 40 of them, tell small differences apart better: ... bench.ts 40 0.3)
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { gunzipSync } from 'node:zlib';
import { benchOptions, interleaved, type Step } from '../../pipeline/bench-rounds.ts';
import { transcodeOtlp } from '../../pipeline/otlp/index.ts';
import { loadTraceTypes, traceBodies } from '../payload.ts';

type Transcode = (request: Uint8Array, sourceId: Uint8Array, out: Uint8Array) => number;

const options = benchOptions();
const SPANS = 100;
const requests = traceBodies(loadTraceTypes(), 200, SPANS).bodies.map((body) => gunzipSync(body));
const sourceId = Buffer.from('bench');
const out = Buffer.allocUnsafeSlow(4 * 1024 * 1024);
const expected = requests.map((request) => transcodeOtlp('traces', 'protobuf', request, 'bench').tables[0]!.data);

/** Checks that `transcode` writes into `out` what the JavaScript transcoder writes, for every request. */
function sameBytes(name: string, transcode: Transcode): void {
  for (const [i, request] of requests.entries()) {
    const n = transcode(request, sourceId, out);
    if (n < 0 || !out.subarray(0, n).equals(expected[i]!)) throw new Error(`request ${i}: ${name} wrote ${n < 0 ? 'nothing' : 'other bytes'}`);
  }
  console.log(`${requests.length} requests: ${name} and JavaScript write the same bytes`);
}

const steps: Array<[string, Step]> = [['JavaScript', (i) => transcodeOtlp('traces', 'protobuf', requests[i % requests.length]!, 'bench').accepted]];

const nodeApi = new URL('./build/traces.node', import.meta.url);
if (existsSync(nodeApi)) {
  const native = createRequire(import.meta.url)(nodeApi.pathname) as { transcode: Transcode };
  sameBytes('C (Node-API)', native.transcode);
  steps.push(['C (Node-API)', (i) => (native.transcode(requests[i % requests.length]!, sourceId, out), SPANS)]);
} else console.log('C (Node-API): not built (bench/native/build.sh)');

const wasmFile = new URL('./build/traces.wasm', import.meta.url);
if (existsSync(wasmFile)) {
  const { exports } = (await WebAssembly.instantiate(readFileSync(wasmFile))).instance;
  const memory = exports.memory as WebAssembly.Memory;
  const wasmTranscode = exports.transcode as (request: number, n: number, source: number, sourceLength: number, out: number, cap: number) => number;
  // The module's memory: its own data up to __heap_base, then the source id, the request and the rows.
  // The first request is also kept apart, for the call alone.
  const sourceAt = (exports.__heap_base as WebAssembly.Global).value as number;
  const requestAt = sourceAt + 64;
  const keptAt = requestAt + 1024 * 1024;
  const outAt = keptAt + 1024 * 1024;
  const cap = 4 * 1024 * 1024;
  memory.grow(Math.ceil((outAt + cap - memory.buffer.byteLength) / 65536));
  const heap = new Uint8Array(memory.buffer);
  heap.set(sourceId, sourceAt);
  heap.set(requests[0]!, keptAt);
  const copyIn = (request: Uint8Array) => heap.set(request, requestAt);
  const call = (request: Uint8Array, at = requestAt) => wasmTranscode(at, request.byteLength, sourceAt, sourceId.byteLength, outAt, cap);
  const wasm: Transcode = (request, _source, into) => {
    copyIn(request);
    const n = call(request);
    if (n > 0) into.set(heap.subarray(outAt, outAt + n));
    return n;
  };
  sameBytes('C (WebAssembly)', wasm);
  steps.push(
    ['WebAssembly, the call alone', () => (call(requests[0]!, keptAt), SPANS)],
    ['WebAssembly, request copied in', (i) => (copyIn(requests[i % requests.length]!), call(requests[i % requests.length]!), SPANS)],
    ['WebAssembly, request in, rows out', (i) => (wasm(requests[i % requests.length]!, sourceId, out), SPANS)],
  );
} else console.log('C (WebAssembly): not built (bench/native/build-wasm.sh)');

await interleaved('spans', steps, options);
