/**
 * Micro-benchmark of the hot path on one core (one thread, CPU time): gunzip + transcode of 100-span trace export
 * requests (20 attributes per span, bench/payload.ts), in spans per second. Also reports
 * transcode alone, so the two costs can be told apart. Medians of several rounds.
 *
 *   npx tsx pipeline/otlp/transcode.bench.ts [rounds=7] [secondsPerRound=1.5]
 */
import { gunzipSync } from 'node:zlib';
import { loadTraceTypes, traceBodies } from '../../bench/payload.ts';
import { transcodeOtlp } from './index.ts';

const rounds = Number(process.argv[2] ?? 7);
const secondsPerRound = Number(process.argv[3] ?? 1.5);
const SPANS_PER_REQUEST = 100;

const { bodies, rawBytes, gzipBytes } = traceBodies(loadTraceTypes(), 200, SPANS_PER_REQUEST);
const raw = bodies.map((body) => gunzipSync(body));

/**
 * Runs `step` over the bodies for one round; returns spans per CPU second of this process
 * (CPU rather than wall time: the machine is shared, and a stolen time slice is not ours).
 */
function round(step: (i: number) => number): number {
  const deadline = performance.now() + secondsPerRound * 1000;
  const started = process.cpuUsage();
  let spans = 0;
  let i = 0;
  while (performance.now() < deadline) {
    for (let k = 0; k < 20; k++, i++) spans += step(i % bodies.length);
  }
  const cpu = process.cpuUsage(started);
  return spans / ((cpu.user + cpu.system) / 1e6);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function measure(name: string, step: (i: number) => number): number {
  round(step); // warm up: JIT and the pooled row buffers
  const results = Array.from({ length: rounds }, () => round(step));
  const spansPerSecond = median(results);
  console.log(`${name.padEnd(22)} ${Math.round(spansPerSecond).toLocaleString('en-US').padStart(10)} spans/s  (median of ${rounds}; min ${Math.round(Math.min(...results)).toLocaleString('en-US')}, max ${Math.round(Math.max(...results)).toLocaleString('en-US')})`);
  return spansPerSecond;
}

console.log(`${bodies.length} distinct requests of ${SPANS_PER_REQUEST} spans: ${rawBytes} B protobuf, ${gzipBytes} B gzip; RowBinary ${transcodeOtlp('traces', 'protobuf', raw[0]!, 'bench').tables[0]!.data.byteLength} B`);
measure('gunzip only', (i) => (gunzipSync(bodies[i]!), SPANS_PER_REQUEST));
measure('transcode only', (i) => transcodeOtlp('traces', 'protobuf', raw[i]!, 'bench').accepted);
measure('gunzip + transcode', (i) => transcodeOtlp('traces', 'protobuf', gunzipSync(bodies[i]!), 'bench').accepted);
