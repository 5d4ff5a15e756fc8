/**
 * Bench targets: each server (and each cluster role) runs as its own child process, so its CPU
 * time can be read from /proc/<pid>/stat (utime + stime cover every thread: event loop, piscina
 * workers, chDB).
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { SLUICE_NODE_FLAGS } from '../bin/node-flags.ts';
import { freePort } from '../test/free-port.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SLUICE = join(ROOT, 'bin/sluice.mjs');
const NAIVE = join(ROOT, 'bench/naive-server.ts');
const run = promisify(execFile);

/** Clock ticks per second of /proc/<pid>/stat times (100 on Linux). */
const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system, all threads) the process has used so far. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which is in parentheses and may contain spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]); // field 14 of proc(5)
  const stime = Number(fields[12]); // field 15
  return (utime + stime) / CLK_TCK;
}

/**
 * Times the process's main thread went to sleep after a wake-up so far: its voluntary context
 * switches (/proc, Linux). Per second of an idle process, its wake-ups.
 */
export function mainThreadWakeups(pid: number): number {
  const status = readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
  return Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)![1]);
}

/** CPU seconds the whole machine has been busy (all cores, all processes), from /proc/stat. */
export function machineBusySeconds(): number {
  const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  const [user, nice, system, , , irq, softirq, steal] = ticks.map(Number) as number[];
  return (user! + nice! + system! + irq! + softirq! + steal!) / CLK_TCK;
}

/**
 * Node options for the measured Node processes only (the servers, gateways, consumers; not the CLI
 * runs around them, nor this runner), from BENCH_NODE_ARGS: `--cpu-prof` profiles the targets.
 * They go on the command line: Node refuses --cpu-prof in NODE_OPTIONS.
 */
export function measuredNodeArgs(): string[] {
  return (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
}

/** A process whose CPU the bench reads. */
export interface BenchProcess {
  name: string;
  pid: number;
  /** A server Sluice needs (nats-server, the storage), reported apart from Sluice's own processes. */
  server?: boolean;
}

/** CPU seconds over a window: each process's, this process's (the load generator), and the rest of the machine's. */
export interface CpuFigures {
  seconds: number;
  /** peakRssMiB: the process's highest resident set since it started (VmHWM), read at the window's end. */
  processes: Array<BenchProcess & { cpuSeconds: number; peakRssMiB: number }>;
  runnerSeconds: number;
  /** Every other process on the machine (other people's work): above ~0.1 core the figures are disturbed. */
  otherSeconds: number;
}

/**
 * Starts a CPU window over `processes` now. add() takes in a process started inside the window
 * (counted from zero: all its CPU is the window's); end() reads every figure.
 */
export function cpuWindow(processes: BenchProcess[]): { add(p: BenchProcess): void; end(): CpuFigures } {
  const watched = processes.map((p) => ({ p, from: cpuSeconds(p.pid) }));
  const ours = process.cpuUsage();
  const machine = machineBusySeconds();
  const start = performance.now();
  return {
    add: (p) => void watched.push({ p, from: 0 }),
    end() {
      const figures = watched.map(({ p, from }) => ({ ...p, cpuSeconds: cpuSeconds(p.pid) - from, peakRssMiB: peakRssMiB(p.pid) }));
      const used = process.cpuUsage(ours);
      const runnerSeconds = (used.user + used.system) / 1e6;
      const measured = figures.reduce((sum, p) => sum + p.cpuSeconds, 0);
      return {
        seconds: (performance.now() - start) / 1000,
        processes: figures,
        runnerSeconds,
        otherSeconds: Math.max(0, machineBusySeconds() - machine - measured - runnerSeconds),
      };
    },
  };
}

/** VmHWM of /proc/<pid>/status in MiB: the highest resident set since start (NaN once the process is gone). */
export function peakRssMiB(pid: number): number {
  return statusMiB(pid, 'VmHWM');
}

/** VmRSS of /proc/<pid>/status in MiB: the resident set now (NaN once the process is gone). */
export function rssMiB(pid: number): number {
  return statusMiB(pid, 'VmRSS');
}

function statusMiB(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  try {
    const kib = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kib === undefined ? NaN : Number(kib) / 1024;
  } catch {
    return NaN;
  }
}

/** A server under test, started and healthy. */
export interface RunningTarget {
  name: string;
  pid: number;
  /** Its processes: the server alone for these targets. */
  processes: BenchProcess[];
  /** Base URL, e.g. http://127.0.0.1:40123 */
  url: string;
  /** Base URL of the relay port (Sluice targets only). */
  relayUrl: string;
  /** The OTLP/gRPC port (Sluice targets only; 0 otherwise). */
  grpcPort: number;
  /** Runs `sluice <args>` against the target (its control socket); prints JSON (Sluice targets only). */
  cli(...args: string[]): Promise<unknown>;
  /** Headers every request needs (authentication). */
  headers: Record<string, string>;
  /** Rows of a table stored so far, as the target's own storage reports them. */
  countRows(table: string): Promise<number>;
  /**
   * Resolves once everything the target acknowledged is in storage, without disturbing it:
   * Sluice's local log is empty (`sluice_bus_backlog_bytes` 0; a query would make it insert at
   * once); the naive receiver stores before it answers.
   */
  drained(): Promise<void>;
  /** Stops the server (SIGTERM, then SIGKILL) and deletes its data dir. */
  stop(): Promise<void>;
}

/** Targets of one process each, started by startTarget. */
export const TARGETS = ['sluice', 'sluice-uws', 'naive'] as const;
/** The cluster roles on NATS (bench/cluster.ts). */
export const CLUSTER_TARGETS = ['cluster-gateway', 'cluster-consumer', 'cluster'] as const;
export type EmbeddedTarget = (typeof TARGETS)[number];
export type TargetName = EmbeddedTarget | (typeof CLUSTER_TARGETS)[number];

/** Keeps the last lines a child wrote, to show why it failed. */
function captureTail(child: ChildProcess, lines: string[]): void {
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString().split('\n').filter(Boolean));
    lines.splice(0, Math.max(0, lines.length - 40));
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
}

async function waitHealthy(url: string, child: ChildProcess, tail: string[], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    // The first line a failing server prints is usually its reason.
    if (child.exitCode !== null) throw new Error(`exited with code ${child.exitCode}: ${tail.join('\n')}`);
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`server not healthy at ${url} after ${timeoutMs} ms:\n${tail.join('\n')}`);
}

async function stopChild(child: ChildProcess, tail: string[]): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => {
    process.stderr.write(`server ${child.pid} did not stop in 30 s, killing it:\n${tail.slice(-10).join('\n')}\n`);
    child.kill('SIGKILL');
  }, 30_000);
  await exited;
  clearTimeout(timer);
}

export async function sluiceCli(env: NodeJS.ProcessEnv, ...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [SLUICE, ...args], { env, cwd: ROOT, maxBuffer: 16 << 20 });
  return stdout;
}

/**
 * Starts a target on free ports with a fresh data dir and waits until it answers health checks.
 * `extraEnv` is added to a Sluice target's environment (a scenario's settings).
 */
export async function startTarget(name: EmbeddedTarget, extraEnv: Record<string, string> = {}): Promise<RunningTarget> {
  const dataDir = mkdtempSync(join(tmpdir(), `sluice-bench-${name}-`));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const tail: string[] = [];
  let child: ChildProcess;
  let headers: Record<string, string> = {};
  let countRows: (table: string) => Promise<number>;
  let relayUrl = '';
  let grpcPort = 0;
  let cli: (...args: string[]) => Promise<unknown> = async () => {
    throw new Error(`${name} has no sluice CLI`);
  };

  if (name === 'naive') {
    child = spawn(process.execPath, [...measuredNodeArgs(), '--import', 'tsx', NAIVE, '--port', String(port), '--data-dir', dataDir], { cwd: ROOT });
    countRows = async () => Number(await (await fetch(`${url}/count`)).text()); // its one table: otel_traces
  } else {
    const relayPort = await freePort();
    relayUrl = `http://127.0.0.1:${relayPort}`;
    grpcPort = await freePort();
    const env = {
      ...process.env,
      SLUICE_DATA_DIR: dataDir,
      SLUICE_OTLP_HTTP_PORT: String(port),
      SLUICE_OTLP_GRPC_PORT: String(grpcPort),
      SLUICE_RELAY_PORT: String(relayPort),
      SLUICE_CONSOLE_PORT: '0',
      SLUICE_HTTP_ENGINE: name === 'sluice-uws' ? 'uws' : 'node',
      // The default limits per IP (600 ingestion requests, 10 submissions, 300 notifications a
      // minute) would throttle the bench, which sends everything from one address.
      SLUICE_RATE_LIMIT_PER_MINUTE: '100000000',
      SLUICE_RATE_LIMIT_BURST: '100000000',
      SLUICE_RELAY_SUBMISSIONS_PER_MINUTE: '100000000',
      SLUICE_RELAY_NOTIFICATIONS_PER_MINUTE: '100000000',
      SLUICE_LOG_LEVEL: 'warn',
      ...extraEnv,
    };
    cli = async (...args) => JSON.parse(await sluiceCli(env, ...args));
    const { apiKey } = JSON.parse(await sluiceCli(env, 'sources', 'create', '--name', 'bench')) as { apiKey: string };
    headers = { 'x-api-key': apiKey };
    child = spawn(process.execPath, [...measuredNodeArgs(), ...SLUICE_NODE_FLAGS, SLUICE, 'serve'], { cwd: ROOT, env });
    countRows = async (table) => {
      const out = await sluiceCli(env, 'query', `SELECT count() AS n FROM otel.${table}`);
      return Number((JSON.parse(out.split('\n')[0]!) as { n: number | string }).n);
    };
  }
  captureTail(child, tail);

  try {
    await waitHealthy(`${url}/api/v1/health`, child, tail);
  } catch (err) {
    await stopChild(child, tail);
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    name,
    pid: child.pid!,
    processes: [{ name: name === 'naive' ? 'naive' : 'sluice serve', pid: child.pid! }],
    url,
    relayUrl,
    grpcPort,
    cli,
    headers,
    countRows,
    async drained() {
      if (name === 'naive') return;
      const deadline = Date.now() + 600_000;
      for (;;) {
        const metrics = await (await fetch(`${url}/metrics`)).text();
        if (/^sluice_bus_backlog_bytes 0$/m.test(metrics)) return;
        if (Date.now() > deadline) throw new Error(`${name}: rows still waiting in the local log after 10 minutes`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async stop() {
      await stopChild(child, tail);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A process of a cluster target, started and healthy. */
export interface RoleProcess {
  pid: number;
  /** Base URL of its OTLP/HTTP port (health, /metrics; the gateway's ingestion). */
  url: string;
  /** SIGTERM (then SIGKILL), and its data dir deleted. */
  stop(): Promise<void>;
}

/**
 * Starts `sluice gateway` or `sluice consume` with the bench's environment and `env` on free ports
 * with a fresh data dir, and waits until it answers health checks. `nodeArgs` come first on its
 * command line (a profiler's, say).
 */
export async function startSluiceRole(role: 'gateway' | 'consume', env: Record<string, string>, nodeArgs: string[] = []): Promise<RoleProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), `sluice-bench-${role}-`));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const tail: string[] = [];
  const child = spawn(process.execPath, [...nodeArgs, ...measuredNodeArgs(), ...SLUICE_NODE_FLAGS, SLUICE, role], {
    cwd: ROOT,
    env: {
      ...process.env,
      SLUICE_LOG_LEVEL: 'warn',
      ...env,
      SLUICE_DATA_DIR: dataDir,
      SLUICE_OTLP_HTTP_PORT: String(port),
      SLUICE_OTLP_GRPC_PORT: String(await freePort()),
      SLUICE_RELAY_PORT: String(await freePort()),
      SLUICE_CONSOLE_PORT: '0',
    },
  });
  captureTail(child, tail);
  const stop = async () => {
    await stopChild(child, tail);
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await waitHealthy(`${url}/api/v1/health`, child, tail);
  } catch (err) {
    await stop();
    throw new Error(`sluice ${role}: ${(err as Error).message}`);
  }
  return { pid: child.pid!, url, stop };
}
