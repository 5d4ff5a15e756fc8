/**
 * What the pipeline micro-benchmarks share: rounds timed in CPU seconds (the machine is
 * shared: a stolen time slice is not ours), their median, and what one step costs in fresh
 * buffers and garbage collection.
 */
import { GCProfiler, getHeapStatistics } from 'node:v8';
import { runTask, type PipelineTask, type TaskSuccess } from './tasks.ts';

export interface BenchOptions {
  rounds: number;
  secondsPerRound: number;
}

export function benchOptions(argv = process.argv): BenchOptions {
  return { rounds: Number(argv[2] ?? 7), secondsPerRound: Number(argv[3] ?? 1.5) };
}

/** One unit of work (a request); says how many items (spans, entries) it handled. */
export type Step = (i: number) => number | Promise<number>;

/**
 * Runs `step` for one round; returns items per CPU second of this process. Steps may be
 * async (the worker's task is): awaiting a plain number costs a microtask, nothing next to a
 * request.
 */
async function round(step: Step, seconds: number): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  const started = process.cpuUsage();
  let items = 0;
  let i = 0;
  while (performance.now() < deadline) {
    for (let k = 0; k < 20; k++, i++) items += await step(i);
  }
  const cpu = process.cpuUsage(started);
  return items / ((cpu.user + cpu.system) / 1e6);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/** Measures `step` (it returns how many items it handled) and prints items per CPU second. */
export async function measure(name: string, unit: string, step: Step, options: BenchOptions): Promise<number> {
  await round(step, options.secondsPerRound); // warm up: JIT and the pooled buffers
  const results: number[] = [];
  for (let r = 0; r < options.rounds; r++) results.push(await round(step, options.secondsPerRound));
  const perSecond = median(results);
  console.log(`${name.padEnd(26)} ${fmt(perSecond).padStart(10)} ${unit}/s  (median of ${options.rounds}; min ${fmt(Math.min(...results))}, max ${fmt(Math.max(...results))})`);
  return perSecond;
}

/**
 * Several steps measured in turns: round r of every step, then round r + 1. On the shared
 * machines the bench runs on, a step's speed drifts by up to 3x over seconds (another tenant's
 * load), and steps measured one after the other would compare moments, not code; rounds taken
 * in turns meet the same moments. Prints each step's median and the median, over rounds, of
 * its ratio to the first step's round next to it; returns those ratios.
 */
export async function interleaved(unit: string, steps: ReadonlyArray<[string, Step]>, options: BenchOptions): Promise<number[]> {
  for (const [, step] of steps) await round(step, options.secondsPerRound); // warm up
  const rates = steps.map(() => [] as number[]);
  for (let r = 0; r < options.rounds; r++) {
    // Each round starts with another step, so that none always follows the same one.
    for (let k = 0; k < steps.length; k++) {
      const s = (r + k) % steps.length;
      rates[s]!.push(await round(steps[s]![1], options.secondsPerRound));
    }
  }
  const ratios = rates.map((own) => median(own.map((rate, r) => rate / rates[0]![r]!)));
  for (const [s, [name]] of steps.entries()) {
    const versus = s === 0 ? '' : `, ${ratios[s]!.toFixed(2)}x ${steps[0]![0]} (median of the rounds' ratios)`;
    console.log(`${name.padEnd(34)} ${fmt(median(rates[s]!)).padStart(10)} ${unit}/s  (median of ${options.rounds}; min ${fmt(Math.min(...rates[s]!))}, max ${fmt(Math.max(...rates[s]!))})${versus}`);
  }
  return ratios;
}

/**
 * Per call of `step`: bytes of fresh Node buffers (every Buffer.alloc* and Buffer.concat goes
 * through the patched functions, zlib's output chunks included), bytes allocated on the JS
 * heap (used size before each GC minus after the previous one) and the share of CPU time
 * spent in GC pauses on this thread.
 */
export async function allocations(name: string, step: Step, calls = 2000): Promise<void> {
  for (let i = 0; i < 200; i++) await step(i); // warm up
  let bufferBytes = 0;
  const originals = { alloc: Buffer.alloc, allocUnsafe: Buffer.allocUnsafe, allocUnsafeSlow: Buffer.allocUnsafeSlow };
  Buffer.alloc = ((size: number, ...rest: never[]) => ((bufferBytes += size), originals.alloc(size, ...rest))) as typeof Buffer.alloc;
  Buffer.allocUnsafe = ((size: number) => ((bufferBytes += size), originals.allocUnsafe(size))) as typeof Buffer.allocUnsafe;
  Buffer.allocUnsafeSlow = ((size: number) => ((bufferBytes += size), originals.allocUnsafeSlow(size))) as typeof Buffer.allocUnsafeSlow;
  const profiler = new GCProfiler();
  profiler.start();
  const heapAtStart = getHeapStatistics().used_heap_size;
  const started = process.cpuUsage();
  try {
    for (let i = 0; i < calls; i++) await step(i);
  } finally {
    Object.assign(Buffer, originals);
  }
  const cpu = process.cpuUsage(started);
  const heapAtEnd = getHeapStatistics().used_heap_size;
  const { statistics } = profiler.stop()!;
  // Allocated = what the heap grew by between collections (a collection frees, never allocates).
  let heapBytes = 0;
  let usedAfterLast = heapAtStart;
  let gcMicros = 0;
  let full = 0;
  for (const gc of statistics) {
    gcMicros += gc.cost;
    if (gc.gcType === 'MarkSweepCompact') full++;
    heapBytes += gc.beforeGC.heapStatistics.usedHeapSize - usedAfterLast;
    usedAfterLast = gc.afterGC.heapStatistics.usedHeapSize;
  }
  heapBytes += heapAtEnd - usedAfterLast;
  const cpuMicros = cpu.user + cpu.system;
  console.log(`${name.padEnd(26)} ${fmt(bufferBytes / calls).padStart(8)} B fresh buffers, ${fmt(heapBytes / calls).padStart(8)} B JS heap per call; GC ${(100 * gcMicros / cpuMicros).toFixed(1)}% of CPU (${full} full GCs in ${calls} calls)`);
}

/**
 * The worker's task as a pipeline thread runs it (piscina's move() wrapper unwrapped), as a step.
 * With `recycle`, the rows' buffers come back with the next task, as the pool sends them once
 * the bus published the rows.
 */
export function workerTaskStep(task: (i: number) => PipelineTask): (i: number, recycle?: boolean) => Promise<number> {
  let returned: ArrayBuffer[] = [];
  return async (i, recycle = false) => {
    const result = (await runTask({ ...task(i), spares: recycle ? returned : undefined })) as { [key: symbol]: TaskSuccess };
    const value = result[Object.getOwnPropertySymbols(result).find((s) => s.description?.includes('value'))!]!;
    if (!value?.ok) throw new Error(`task failed: ${JSON.stringify(result)}`);
    returned = value.tables.map((t) => t.data.buffer as ArrayBuffer);
    return value.accepted;
  };
}
