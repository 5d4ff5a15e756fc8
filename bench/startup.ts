/**
 * How long `sluice serve` takes to start, and what the start costs: the time until it logs
 * "sluice is serving", its CPU seconds (every thread) and resident set at that moment, and the
 * time from SIGTERM to its exit. Each run gets a fresh data dir and free ports.
 *
 * usage: node --import tsx bench/startup.ts [--runs 5] [--root DIR ...]
 *   --root: a checkout to start `sluice serve` from (default: this one). With several, the runs
 *   take turns, so a before/after pair shares the machine's state (compare against a worktree:
 *   `git worktree add /tmp/before <commit> && ln -s $PWD/node_modules /tmp/before/`).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { SLUICE_NODE_FLAGS } from '../bin/node-flags.ts';
import { cpuSeconds, rssMiB } from './target.ts';

interface Start {
  readyMs: number;
  cpuSeconds: number;
  rssMiB: number;
  stopMs: number;
}

async function startOnce(root: string): Promise<Start> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-bench-startup-'));
  const env = {
    ...process.env,
    SLUICE_DATA_DIR: dataDir,
    SLUICE_OTLP_HTTP_PORT: '0',
    SLUICE_OTLP_GRPC_PORT: '0',
    SLUICE_RELAY_PORT: '0',
    SLUICE_CONSOLE_PORT: '0',
    MALLOC_MMAP_THRESHOLD_: '131072', // as `npm start`
  };
  const startedAt = performance.now();
  const child = spawn(process.execPath, [...SLUICE_NODE_FLAGS, join(root, 'bin/sluice.mjs'), 'serve'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  try {
    let output = '';
    const readyMs = await new Promise<number>((ready, fail) => {
      child.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('"msg":"sluice is serving"')) ready(performance.now() - startedAt);
      });
      child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.once('exit', (code) => fail(new Error(`sluice serve exited (${code}) before serving:\n${output.slice(-2000)}`)));
    });
    const figures = { readyMs, cpuSeconds: cpuSeconds(child.pid!), rssMiB: rssMiB(child.pid!) };
    const stoppingAt = performance.now();
    child.kill('SIGTERM');
    await exited;
    return { ...figures, stopMs: performance.now() - stoppingAt };
  } finally {
    child.kill('SIGKILL');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' }, root: { type: 'string', multiple: true } } });
  const roots = (values.root ?? [fileURLToPath(new URL('..', import.meta.url))]).map((root) => resolve(root));
  const results = new Map<string, Start[]>(roots.map((root) => [root, []]));
  for (let run = 0; run < Number(values.runs); run++) {
    for (const root of roots) {
      const start = await startOnce(root);
      results.get(root)!.push(start);
      console.log(`${root}: ready ${start.readyMs.toFixed(0)} ms, ${start.cpuSeconds.toFixed(2)} CPU-s, RSS ${start.rssMiB.toFixed(0)} MiB; stopped in ${start.stopMs.toFixed(0)} ms`);
    }
  }
  for (const [root, starts] of results) {
    const of = (key: keyof Start) => median(starts.map((start) => start[key]));
    console.log(`median of ${starts.length}, ${root}: ready ${of('readyMs').toFixed(0)} ms, ${of('cpuSeconds').toFixed(2)} CPU-s, RSS ${of('rssMiB').toFixed(0)} MiB, stop ${of('stopMs').toFixed(0)} ms`);
  }
}
