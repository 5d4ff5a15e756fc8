/**
 * The OTLP/gRPC port under hostile clients (issue 13), on loopback against `sluice serve` in a
 * child process: its RSS while N calls without a key stall one byte short of a 10 MiB message,
 * the connections still open after the idle and handshake timeouts, and an ordinary client's
 * success rate and p99 beside each; then, optionally, ordinary clients alone (calls/s, p50, p99,
 * server CPU per call).
 *
 *   node --import tsx bench/hostile-grpc.ts [--stalled 100,250] [--hold 10] [--idle 50] [--throughput 15] [--open-files 1024]
 *
 * Every SLUICE_* of the environment reaches the server; the idle timeout is 10 s unless given.
 * `--open-files` runs the server under that limit (ulimit -n): with `--idle 550`, more idle
 * connections than it has descriptors to spare.
 */
import * as grpc from '@grpc/grpc-js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { H2_PREFACE, h2Connect, partialCall, silentConnection, TRACES_PATH, type CallOutcome } from '../test/grpc-raw.ts';
import { runSluice, startSluiceProcess, type SluiceProcess } from '../test/sluice-processes.ts';
import { loadTraceTypes, traceBodies } from './payload.ts';
import { quantile } from './open-loop.ts';
import { cpuSeconds, rssMiB } from './target.ts';

const { values: args } = parseArgs({
  options: {
    stalled: { type: 'string', default: '100,250' },
    hold: { type: 'string', default: '10' },
    idle: { type: 'string', default: '50' },
    throughput: { type: 'string', default: '0' },
    'open-files': { type: 'string', default: '0' },
  },
});
const MiB = 1024 * 1024;
const DECLARED = 10 * MiB;
const idleTimeoutMs = Number(process.env.SLUICE_GRPC_IDLE_TIMEOUT_MS ?? 10_000);
const handshakeTimeoutMs = Number(process.env.SLUICE_GRPC_HANDSHAKE_TIMEOUT_MS ?? 10_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));



/** Calls of ordinary grpc-js clients, each one call at a time (at most one per `intervalMs`), until stopped. */
class OrdinaryClients {
  private readonly latencies: number[] = [];
  private ok = 0;
  private failed = 0;
  private running = true;
  private readonly loops: Array<Promise<void>>;

  constructor(address: string, apiKey: string, bodies: Buffer[], concurrency: number, intervalMs = 0) {
    const client = new grpc.Client(address, grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    metadata.set('x-api-key', apiKey);
    let next = 0;
    const call = () => new Promise<number>((resolve) => {
      const body = bodies[next++ % bodies.length]!;
      client.makeUnaryRequest(TRACES_PATH, (b: Buffer) => b, (b: Buffer) => b, body, metadata, { deadline: Date.now() + 10_000 }, (err) => resolve(err ? err.code : 0));
    });
    this.loops = Array.from({ length: concurrency }, async () => {
      while (this.running) {
        const started = performance.now();
        const code = await call();
        this.latencies.push(performance.now() - started);
        if (code === 0) this.ok++;
        else this.failed++;
        await sleep(intervalMs - (performance.now() - started));
      }
    });
    this.close = async () => {
      this.running = false;
      await Promise.all(this.loops);
      client.close();
    };
  }

  readonly close: () => Promise<void>;

  /** Figures since the last call, then starts counting anew. */
  take(): { calls: number; ok: number; p50Ms: number; p99Ms: number } {
    const sorted = this.latencies.splice(0).sort((a, b) => a - b);
    const figures = { calls: this.ok + this.failed, ok: this.ok, p50Ms: round(quantile(sorted, 0.5)), p99Ms: round(quantile(sorted, 0.99)) };
    this.ok = 0;
    this.failed = 0;
    return figures;
  }
}

const round = (value: number) => Math.round(value * 10) / 10;

/** The highest RSS of the server over `seconds`, sampled every 100 ms. */
async function peakRss(pid: number, seconds: number): Promise<number> {
  let peak = rssMiB(pid);
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    peak = Math.max(peak, rssMiB(pid));
    await sleep(100);
  }
  return peak;
}

/** The ordinary client alone for as long as an attack phase: what RSS does without the attack. */
async function controlPhase(pid: number, holdSeconds: number, ordinary: OrdinaryClients) {
  ordinary.take();
  const before = rssMiB(pid);
  const peak = await peakRss(pid, holdSeconds);
  return { rssBeforeMiB: round(before), rssPeakGrowthMiB: round(peak - before), beside: ordinary.take() };
}

async function stalledPhase(pid: number, address: string, calls: number, holdSeconds: number, ordinary: OrdinaryClients) {
  ordinary.take();
  const before = rssMiB(pid);
  const sessions = Array.from({ length: Math.ceil(calls / 10) }, () => h2Connect(address));
  const outcomes: CallOutcome[] = [];
  for (let i = 0; i < calls; i++) void partialCall(sessions[i % sessions.length]!, { declared: DECLARED, send: DECLARED - 1 }).then((o) => outcomes.push(o));
  const peak = await peakRss(pid, holdSeconds);
  const answered = outcomes.filter((o) => o.status !== undefined).length;
  for (const session of sessions) session.destroy();
  await sleep(1000);
  return { calls, rssBeforeMiB: round(before), rssPeakGrowthMiB: round(peak - before), answeredWithin: `${answered}/${calls} in ${holdSeconds} s`, beside: ordinary.take() };
}

/** A sample of the server's /metrics, 0 when absent. */
async function sample(metrics: string, name: string): Promise<number> {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

async function idlePhase(serve: SluiceProcess, count: number, ordinary: OrdinaryClients) {
  const port = serve.grpcPort;
  ordinary.take();
  const mute = Array.from({ length: count }, () => silentConnection(port));
  const quiet = Array.from({ length: count }, () => silentConnection(port, H2_PREFACE));
  let muteClosed = 0;
  let quietClosed = 0;
  for (const c of mute) void c.closed.then(() => muteClosed++);
  for (const c of quiet) void c.closed.then(() => quietClosed++);
  const waitMs = Math.max(idleTimeoutMs, handshakeTimeoutMs) + 5000;
  await sleep(waitMs);
  for (const c of [...mute, ...quiet]) c.socket.destroy();
  const metrics = await serve.metrics().catch(() => '');
  return {
    waitedSeconds: waitMs / 1000,
    stillOpenNoPreface: `${count - muteClosed}/${count}`,
    stillOpenAfterPreface: `${count - quietClosed}/${count}`,
    refusedAtAccept: await sample(metrics, 'sluice_grpc_limited_total{limit="max_connections"}'),
    logLinesAboutIt: (await serve.log()).split('\n').filter((line) => line.includes('"limit":"max_connections"')).length,
    beside: ordinary.take(),
  };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-hostile-grpc-'));
  const env: Record<string, string> = { SLUICE_RATE_LIMIT_PER_MINUTE: '100000000', SLUICE_RATE_LIMIT_BURST: '100000000', SLUICE_GRPC_IDLE_TIMEOUT_MS: String(idleTimeoutMs) };
  for (const [name, value] of Object.entries(process.env)) if (name.startsWith('SLUICE_') && value !== undefined) env[name] = value;
  const serve = await startSluiceProcess('serve', 'serve', dir, env, { openFiles: Number(args['open-files']) || undefined });
  try {
    const { apiKey } = JSON.parse(await runSluice(['sources', 'create', '--name', 'hostile-bench'], { SLUICE_DATA_DIR: serve.dataDir })) as { apiKey: string };
    const pid = serve.child.pid!;
    const address = `127.0.0.1:${serve.grpcPort}`;
    const bodies = traceBodies(loadTraceTypes(), 64, 100).bodies.map((body) => gunzipSync(body));
    const results: Record<string, unknown> = { rssAtStartMiB: round(rssMiB(pid)) };

    // 20 calls a second beside each phase.
    const ordinary = new OrdinaryClients(address, apiKey, bodies, 1, 50);
    await sleep(2000);
    results.control = await controlPhase(pid, Number(args.hold), ordinary);
    for (const calls of args.stalled.split(',').map(Number).filter(Boolean)) {
      results[`stalled${calls}`] = await stalledPhase(pid, address, calls, Number(args.hold), ordinary);
    }
    if (Number(args.idle) > 0) results.idle = await idlePhase(serve, Number(args.idle), ordinary);
    await ordinary.close();

    const seconds = Number(args.throughput);
    if (seconds > 0) {
      const load = new OrdinaryClients(address, apiKey, bodies, 16);
      await sleep(3000);
      load.take();
      const cpuBefore = cpuSeconds(pid);
      await sleep(seconds * 1000);
      const figures = load.take();
      const cpu = cpuSeconds(pid) - cpuBefore;
      await load.close();
      results.throughput = { ...figures, callsPerSecond: Math.round(figures.calls / seconds), serverCpuMsPerCall: round((cpu * 1000) / figures.calls) };
    }
    console.log(JSON.stringify(results, null, 2));
  } finally {
    await serve.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
