/**
 * What it costs this machine to wake a sleeping thread: the CPU time (every thread of this
 * process) of an empty timer, and of a round trip to a worker thread that does nothing,
 * each at a low even rate, so that every one finds its thread asleep. The development machine,
 * a 2-vCPU virtual machine whose idle vCPUs halt, measured 73 and 190 µs (2026-11-24). A request
 * that goes from the event loop to a worker and back pays such wake-ups, so where they are dear
 * a span costs more at low rates than at saturation, and figures from two machines cannot be
 * compared without these beside them.
 *
 *   node --import tsx bench/wakeups.ts [--rate 300] [--seconds 5]
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';

export interface WakeupCost {
  /** CPU µs per tick of an empty timer. */
  timerMicros: number;
  /** CPU µs per round trip to a worker thread that answers at once (the timer that sends it included). */
  workerRoundTripMicros: number;
}

/** `ticks` evenly spaced at `rate` per second, each calling `tick`; CPU µs per tick. */
async function cpuPerTick(rate: number, ticks: number, tick: () => Promise<void> | void): Promise<number> {
  const started = process.cpuUsage();
  await new Promise<void>((resolve, reject) => {
    let n = 0;
    const timer = setInterval(() => {
      if (++n === ticks) clearInterval(timer);
      Promise.resolve(tick()).then(() => n === ticks && resolve(), reject);
    }, 1000 / rate);
  });
  const { user, system } = process.cpuUsage(started);
  return (user + system) / ticks;
}

export async function measureWakeups(rate = 300, seconds = 5): Promise<WakeupCost> {
  const ticks = Math.max(1, Math.round(rate * seconds));
  const timerMicros = await cpuPerTick(rate, ticks, () => {});
  const worker = new Worker("require('node:worker_threads').parentPort.on('message', (n) => require('node:worker_threads').parentPort.postMessage(n))", { eval: true });
  try {
    let answered: (() => void) | undefined;
    worker.on('message', () => answered?.());
    const roundTrip = () => new Promise<void>((resolve) => {
      answered = resolve;
      worker.postMessage(0);
    });
    await roundTrip(); // the worker is up
    const workerRoundTripMicros = await cpuPerTick(rate, ticks, roundTrip);
    return { timerMicros: Math.round(timerMicros), workerRoundTripMicros: Math.round(workerRoundTripMicros) };
  } finally {
    await worker.terminate();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { rate: { type: 'string', default: '300' }, seconds: { type: 'string', default: '5' } } });
  console.log(JSON.stringify(await measureWakeups(Number(values.rate), Number(values.seconds))));
}
