/**
 * One `sluice gateway` in cluster mode under OTLP/HTTP load (the `otlp-http-protobuf-gzip`
 * bodies of payload.ts), with no consumer: CPU seconds of the gateway process per span, and of
 * the nats-server (one of its own, with streams large enough for the whole run).
 *
 *   node --import tsx bench/cluster-gateway.ts [--duration 15] [--warmup 10] [--connections 64] [--rate R] [--idle S] [--profile DIR] [--json]
 *
 * --rate measures an open loop of R requests per second, evenly spaced (open-loop.ts), instead of
 * autocannon's closed loop: the cost per span when requests come one by one, not in a crowd.
 * --warmup seconds of the closed loop come first (and as many of the open loop before --rate's).
 * --idle leaves the gateway idle S seconds after the closed loop's warm-up (before the open loop's,
 * as the report's consumer drain does); the open loop's warm-up prints its seconds' p99s.
 * --profile starts the gateway with --cpu-prof into DIR (its main thread and each worker).
 * BENCH_NODE_ARGS are the gateway's Node options (as in run.ts): V8 flags to try, say.
 *
 * Nothing consumes the stream: the run purges it every second, or a fast gateway fills it
 * within a run and refuses the rest with 503 (cheap refusals, which are not the cost of a span).
 * nats-server's CPU includes the purges.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import autocannon from 'autocannon';
import { streamOf } from '../bus/jetstream-names.ts';
import { startNatsServer } from '../test/sluice-processes.ts';
import { openLoop, openLoopPool } from './open-loop.ts';
import { loadTraceTypes, traceBodies } from './payload.ts';
import { cpuSeconds, machineBusySeconds, sluiceCli, startSluiceRole, type RoleProcess } from './target.ts';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    rate: { type: 'string' },
    idle: { type: 'string', default: '0' },
    profile: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});

const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-gateway-'));
const nats = await startNatsServer(join(dir, 'jetstream'));
const env = {
  NATS_URL: nats.url,
  SLUICE_NATS_MAX_STREAM_BYTES: String(3 * 1024 ** 3), // per table stream (14), reserved on disk: holds a 15 s run
  SLUICE_RATE_LIMIT_PER_MINUTE: '100000000',
  SLUICE_RATE_LIMIT_BURST: '100000000',
  SLUICE_LOG_LEVEL: 'error',
};
const profile = values.profile ? ['--cpu-prof', '--cpu-prof-dir', values.profile] : [];
const nc = await connect({ servers: nats.url });
const jsm = await jetstreamManager(nc);
const purger = setInterval(() => void jsm.streams.purge(streamOf('SLUICE', 'otel_traces').stream).catch(() => {}), 1000);
const agent = openLoopPool(256); // the open loop's, its warm-up's too
let started: RoleProcess | undefined;
try {
  const gateway = (started = await startSluiceRole('gateway', env, profile));
  const { apiKey } = JSON.parse(await sluiceCli({ ...process.env, ...env, SLUICE_DATA_DIR: join(dir, 'data') }, 'sources', 'create', '--name', 'bench')) as { apiKey: string };
  await new Promise((resolve) => setTimeout(resolve, 1000)); // the gateway's mirror of the sources sees the key
  const { bodies, spansPerRequest } = traceBodies(loadTraceTypes(), 64, 100);
  const headers = { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip', 'x-api-key': apiKey };
  let next = 0;
  const load = (seconds: number) =>
    autocannon({
      url: `${gateway.url}/v1/traces`,
      method: 'POST',
      connections: Number(values.connections),
      duration: seconds,
      headers,
      requests: [{ setupRequest: (request) => ({ ...request, body: bodies[next++ % bodies.length] }) }],
    });
  const warmup = Number(values.warmup);
  if (warmup > 0) await load(warmup); // JIT, worker pool, streams
  const open = (seconds: number) =>
    openLoop({ url: `${gateway.url}/v1/traces`, headers, bodies, rate: Number(values.rate), duration: seconds, connections: 256, agent });
  const idle = Number(values.idle);
  if (idle > 0) await new Promise((resolve) => setTimeout(resolve, idle * 1000));
  // An open loop is warmed by one too: the first seconds of even arrivals after a closed loop
  // were slow (the generator's client and the gateway's new connections not yet compiled).
  if (values.rate && warmup > 0) {
    const warm = await open(warmup);
    console.error(`open loop's warm-up: p99 ${warm.latencyMs.p99.toFixed(0)} ms; by second ${warm.p99BySecondMs.map((ms) => ms.toFixed(0)).join(', ')}`);
  }
  const gatewayCpu = cpuSeconds(gateway.pid);
  const natsCpu = cpuSeconds(nats.child.pid!);
  const machine = machineBusySeconds();
  const runner = process.cpuUsage();
  const seconds = Number(values.duration);
  const result = values.rate
    ? await open(seconds).then((r) => ({ ok: r.ok, refused: r.sent - r.ok, p99: r.latencyMs.p99 }))
    : await load(seconds).then((r) => ({ ok: r['2xx'], refused: r.non2xx, p99: r.latency.p99 }));
  const spans = result.ok * spansPerRequest;
  const usedByGateway = cpuSeconds(gateway.pid) - gatewayCpu;
  const usedByNats = cpuSeconds(nats.child.pid!) - natsCpu;
  const { user, system } = process.cpuUsage(runner);
  const others = machineBusySeconds() - machine - usedByGateway - usedByNats - (user + system) / 1e6;
  const row = {
    'spans/s': Math.round(spans / seconds),
    'non-2xx': result.refused,
    'p99 ms': result.p99,
    'gateway spans per CPU-s': Math.round(spans / usedByGateway),
    'gateway CPU-s per M spans': +((usedByGateway / spans) * 1e6).toFixed(2),
    'nats-server CPU-s per M spans': +((usedByNats / spans) * 1e6).toFixed(2),
    // Other processes' cores: above ~0.1 they disturbed the run.
    'other cores': +(others / seconds).toFixed(2),
  };
  if (values.json) console.log(JSON.stringify(row));
  else console.table([row]);
} finally {
  agent.destroy();
  clearInterval(purger);
  await nc.close();
  await started?.stop();
  await nats.stop();
  rmSync(dir, { recursive: true, force: true });
}
