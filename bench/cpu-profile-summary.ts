/**
 * Adds up the .cpuprofile files `node --cpu-prof --cpu-prof-dir=DIR` wrote (one per thread):
 * the share of samples in garbage collection, per thread and in all, and the functions with
 * the most self time. Samples of a thread waiting for work are left out of the shares: the
 * event loop's `(idle)` and a piscina worker blocked in Atomics.wait (`atomicsWaitLoop`: the
 * profiler samples wall time, and the thread's stack says it is waiting).
 *
 *   node --import tsx bench/cpu-profile-summary.ts DIR [top=15]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
}

const dir = process.argv[2];
if (!dir) throw new Error('usage: cpu-profile-summary.ts DIR [top]');
const top = Number(process.argv[3] ?? 15);

const selfTime = new Map<string, number>();
let busy = 0;
let gc = 0;
for (const file of readdirSync(dir).filter((name) => name.endsWith('.cpuprofile')).sort()) {
  const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
  const names = new Map(profile.nodes.map((node) => {
    const { functionName, url, lineNumber } = node.callFrame;
    return [node.id, `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber + 1}`];
  }));
  let threadBusy = 0;
  let threadGc = 0;
  for (const id of profile.samples) {
    const name = names.get(id)!;
    if (name.startsWith('(idle)') || name.startsWith('atomicsWaitLoop ')) continue;
    threadBusy++;
    if (name.startsWith('(garbage collector)')) threadGc++;
    selfTime.set(name, (selfTime.get(name) ?? 0) + 1);
  }
  busy += threadBusy;
  gc += threadGc;
  if (threadBusy > 0) console.log(`${file}: ${threadBusy} busy samples, GC ${(100 * threadGc / threadBusy).toFixed(1)}%`);
}
console.log(`all threads: GC ${(100 * gc / busy).toFixed(1)}% of ${busy} busy samples`);
for (const [name, samples] of [...selfTime].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`${(100 * samples / busy).toFixed(1).padStart(5)}%  ${name}`);
}
