/**
 * What Sluice's processes cost while nothing arrives: `sluice serve` (embedded, chDB inside),
 * `sluice gateway` and `sluice consume` (on a nats-server and storage facade of the bench's own),
 * each left idle after start-up, then measured: CPU per second of the whole process, and the
 * main thread's wake-ups per second (its voluntary context switches, /proc; Linux).
 *
 *   node --import tsx bench/idle.ts [--settle 10] [--window 30]
 */
import { parseArgs } from 'node:util';
import { startBenchCluster } from './cluster.ts';
import { cpuSeconds, mainThreadWakeups, startTarget } from './target.ts';

const { values } = parseArgs({ options: { settle: { type: 'string', default: '10' }, window: { type: 'string', default: '30' } } });
const settleMs = Number(values.settle) * 1000;
const windowMs = Number(values.window) * 1000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function measure(name: string, pid: number): Promise<void> {
  await sleep(settleMs);
  const [cpu, wakes, at] = [cpuSeconds(pid), mainThreadWakeups(pid), performance.now()];
  await sleep(windowMs);
  const seconds = (performance.now() - at) / 1000;
  console.log(`| ${name} | ${(((cpuSeconds(pid) - cpu) * 1000) / seconds).toFixed(1)} | ${((mainThreadWakeups(pid) - wakes) / seconds).toFixed(1)} |`);
}

console.log(`idle for ${windowMs / 1000} s after ${settleMs / 1000} s of start-up\n\n| process | CPU ms / s | main-thread wake-ups / s |\n|---|---:|---:|`);
const serve = await startTarget('sluice');
try {
  await measure('sluice serve', serve.pid);
} finally {
  await serve.stop();
}
const cluster = await startBenchCluster();
try {
  for (const role of ['gateway', 'consume'] as const) await measure(`sluice ${role}`, (await cluster.start(role)).pid);
} finally {
  await cluster.stop();
}
