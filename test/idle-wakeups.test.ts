/**
 * An idle `sluice serve` lets its main thread sleep: no timer of its own wakes it many times a
 * second. Each wake-up costs CPU whether or not there is work (some 70 µs on the 2-core VMs
 * measured), and a fleet's gateways and consumers spend much of their life idle or waiting on
 * storage. Before, the memory guard read the resident set every 50 ms and prom-client sampled the
 * event-loop lag every 10 ms: 119 wake-ups a second and 13 ms of CPU a second, idle; now 14 and 5.
 * Counted as the main thread's voluntary context switches (/proc, Linux): each one is the thread
 * going back to sleep after a wake-up. A loaded machine fires timers late, never more often.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mainThreadWakeups } from '../bench/target.ts';
import { startSluiceProcess, type SluiceProcess } from './sluice-processes.ts';

/** Well above what it does now (about 14), well below what it did (119). */
const MOST_WAKEUPS_PER_SECOND = 40;
const SETTLE_MS = 3_000;
const WINDOW_MS = 5_000;

let dir: string;
let server: SluiceProcess;

describe.runIf(process.platform === 'linux')('an idle sluice serve', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-idle-'));
    server = await startSluiceProcess('serve', 'serve', dir, {});
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it(`wakes its main thread fewer than ${MOST_WAKEUPS_PER_SECOND} times a second`, async () => {
    // Start-up's own work (the first merges, compiling) is done by then.
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const pid = server.child.pid!;
    const before = mainThreadWakeups(pid);
    const startedAt = performance.now();
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
    const perSecond = (mainThreadWakeups(pid) - before) / ((performance.now() - startedAt) / 1000);
    console.log(`idle sluice serve: ${perSecond.toFixed(1)} main-thread wake-ups a second`);
    expect(perSecond).toBeLessThan(MOST_WAKEUPS_PER_SECOND);
  }, 30_000);
});
