/**
 * This checkout's trace transcoder against another checkout's (a `git worktree` at the commit
 * before a change), in one thread, in rounds taken in turns (bench-rounds.ts, interleaved): on
 * the shared machines the bench runs on, two runs minutes apart differ by more than most
 * changes to the transcoder, rounds side by side do not. Both transcode the same requests
 * (bench/payload.ts: 100 spans, 20 attributes each) and must write the same bytes.
 *
 *   git worktree add ../before HEAD~1 && ln -s "$PWD/node_modules" ../before/node_modules
 *   taskset -c 1 npx tsx bench/transcode-ab.ts ../before [rounds=60] [secondsPerRound=0.2]
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { loadTraceTypes, traceBodies } from './payload.ts';
import { interleaved } from '../pipeline/bench-rounds.ts';
import { transcodeOtlp } from '../pipeline/otlp/index.ts';

const [other, rounds = '60', seconds = '0.2'] = process.argv.slice(2);
if (!other) throw new Error('usage: transcode-ab.bench.ts <other checkout> [rounds] [secondsPerRound]');
const before = (await import(pathToFileURL(resolve(other, 'pipeline/otlp/index.ts')).href)) as { transcodeOtlp: typeof transcodeOtlp };

const requests = traceBodies(loadTraceTypes(), 200, 100).bodies.map((body) => gunzipSync(body));
for (const [i, request] of requests.entries()) {
  const ours = transcodeOtlp('traces', 'protobuf', request, 'bench').tables[0]!.data;
  const theirs = before.transcodeOtlp('traces', 'protobuf', request, 'bench').tables[0]!.data;
  if (!Buffer.from(ours).equals(theirs)) throw new Error(`request ${i}: the two transcoders write different bytes`);
}
console.log(`${requests.length} requests: both transcoders write the same bytes`);
await interleaved('spans', [
  [`before (${other})`, (i) => before.transcodeOtlp('traces', 'protobuf', requests[i % requests.length]!, 'bench').accepted],
  ['this checkout', (i) => transcodeOtlp('traces', 'protobuf', requests[i % requests.length]!, 'bench').accepted],
], { rounds: Number(rounds), secondsPerRound: Number(seconds) });
