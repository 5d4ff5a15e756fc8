/**
 * Where an embedded `sluice serve` spends its CPU, thread by thread, and where its latency tail
 * comes from, under an open loop of OTLP trace requests (the `otlp-http-protobuf-gzip` bodies):
 * each thread's CPU over the run, summed by thread name (Node's own threads are `node`; chDB
 * names its pools: ThreadPool, MergeMutate, BgSchPool...; `Unknown` are the libuv threads, which
 * run chDB's inserts and the local log's writes), the requests' latency, and the commit's
 * (`sluice_bus_publish_seconds`: the local log's write + fdatasync) beside it.
 *
 *   node --import tsx bench/embedded-threads.ts [--rate 320] [--duration 15] [--renice N] [--json]
 *
 * --renice N lowers the priority (nice N) of every thread chDB named, from outside, every half
 * second: what the request path gains when chDB's background work yields the cores to it.
 * Linux only (/proc).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parseArgs } from 'node:util';
import { openLoop, type OpenLoopResult } from './open-loop.ts';
import { SCENARIOS } from './scenarios.ts';
import { startTarget } from './target.ts';

/** Threads Node starts (main, V8 platform, workers) and libuv's, which chDB renames `Unknown` when its inserts run there. */
const NOT_ENGINE = new Set(['node', 'Unknown', 'libuv-worker']);

/** CPU ticks (1/100 s) of each thread of `pid`, by "tid name". */
function threadTicks(pid: number): Map<string, number> {
  const ticks = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks.set(`${tid} ${name}`, Number(fields[11]) + Number(fields[12])); // utime + stime
    } catch {
      // the thread ended
    }
  }
  return ticks;
}

/** Lowers the priority of chDB's threads as they appear; returns a stop function. */
function reniceEngineThreads(pid: number, nice: number): () => number {
  const done = new Set<string>();
  const sweep = () => {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      if (done.has(tid)) continue;
      try {
        if (NOT_ENGINE.has(readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim())) continue;
        setPriority(Number(tid), nice); // on Linux, one thread's
        done.add(tid);
      } catch {
        // the thread ended
      }
    }
  };
  sweep();
  const timer = setInterval(sweep, 500);
  return () => {
    clearInterval(timer);
    return done.size;
  };
}

/** The commit-time histogram's cumulative counts, by upper bound in seconds. */
async function commitBuckets(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const buckets = new Map<string, number>();
  for (const match of text.matchAll(/^sluice_bus_publish_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm)) buckets.set(match[1]!, Number(match[2]));
  return buckets;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '320' },
      duration: { type: 'string', default: '15' },
      renice: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const rate = Number(values.rate);
  const duration = Number(values.duration);
  const scenario = SCENARIOS['otlp-http-protobuf-gzip']!();
  const target = await startTarget('sluice');
  const stopRenice = values.renice === undefined ? undefined : reniceEngineThreads(target.pid, Number(values.renice));
  try {
    const load = (seconds: number): Promise<OpenLoopResult> =>
      openLoop({ url: target.url + scenario.path, headers: { ...scenario.headers, ...target.headers }, bodies: scenario.bodies, rate, duration: seconds, connections: 256 });
    await load(3); // warm-up: JIT, chDB's first parts
    const ticksBefore = threadTicks(target.pid);
    const commitsBefore = await commitBuckets(target.url);
    const result = await load(duration);
    const ticksAfter = threadTicks(target.pid);
    const commitsAfter = await commitBuckets(target.url);

    const byName = new Map<string, number>();
    for (const [thread, ticks] of ticksAfter) {
      const name = thread.slice(thread.indexOf(' ') + 1);
      byName.set(name, (byName.get(name) ?? 0) + ticks - (ticksBefore.get(thread) ?? 0));
    }
    const cores = [...byName].sort((a, b) => b[1] - a[1]).map(([name, t]) => [name, +(t / 100 / result.seconds).toFixed(2)] as const);
    const commits = [...commitsAfter].sort((a, b) => Number(a[0]) - Number(b[0])).map(([le, n]) => [le, n - (commitsBefore.get(le) ?? 0)] as const);
    const report = {
      rate,
      answeredRate: +result.achievedRate.toFixed(1),
      latencyMs: Object.fromEntries(Object.entries(result.latencyMs).map(([k, v]) => [k, +v.toFixed(1)])),
      statusCodes: result.statusCodes,
      coresByThreadName: Object.fromEntries(cores.filter(([, c]) => c > 0)),
      commitsWithin: Object.fromEntries(commits.map(([le, n]) => [le === '+Inf' ? 'any time' : `${le} s`, n])),
      ...(stopRenice ? { reniced: { nice: Number(values.renice), threads: stopRenice() } } : {}),
    };
    if (values.json) console.log(JSON.stringify(report));
    else console.log(JSON.stringify(report, null, 2));
  } finally {
    stopRenice?.();
    await target.stop();
  }
}

await main();
