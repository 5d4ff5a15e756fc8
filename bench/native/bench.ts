/**
 * The C prototype of the trace transcoder (traces.c, not part of Sluice) against the
 * JavaScript one, on the bench's requests (bench/payload.ts: 100 spans, 20 attributes each):
 * first that both write the same bytes for every request, then spans per CPU second of each,
 * in this thread, the C one called once per request through Node-API.
 *
 *   bench/native/build.sh && npx tsx bench/native/bench.ts [rounds=7] [secondsPerRound=1.5]
 */
import { createRequire } from 'node:module';
import { gunzipSync } from 'node:zlib';
import { benchOptions, measure } from '../../pipeline/bench-rounds.ts';
import { transcodeOtlp } from '../../pipeline/otlp/index.ts';
import { loadTraceTypes, traceBodies } from '../payload.ts';

const native = createRequire(import.meta.url)('./build/traces.node') as {
  transcode(request: Uint8Array, sourceId: Uint8Array, out: Uint8Array): number;
};
const options = benchOptions();
const SPANS = 100;
const requests = traceBodies(loadTraceTypes(), 200, SPANS).bodies.map((body) => gunzipSync(body));
const sourceId = Buffer.from('bench');
const out = Buffer.allocUnsafeSlow(4 * 1024 * 1024);

for (const [i, request] of requests.entries()) {
  const js = transcodeOtlp('traces', 'protobuf', request, 'bench').tables[0]!.data;
  const written = native.transcode(request, sourceId, out);
  if (written < 0 || !out.subarray(0, written).equals(js)) throw new Error(`request ${i}: the C transcoder wrote ${written < 0 ? 'nothing' : 'other bytes'}`);
}
console.log(`${requests.length} requests: the C and JavaScript transcoders write the same bytes`);

const js = await measure('JavaScript transcode', 'spans', (i) => transcodeOtlp('traces', 'protobuf', requests[i % requests.length]!, 'bench').accepted, options);
const c = await measure('C transcode (Node-API)', 'spans', (i) => (native.transcode(requests[i % requests.length]!, sourceId, out), SPANS), options);
console.log(`C / JavaScript: ${(c / js).toFixed(1)}x; per span ${(1e6 / js).toFixed(2)} µs against ${(1e6 / c).toFixed(2)} µs`);
