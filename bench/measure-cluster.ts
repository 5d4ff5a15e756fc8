/**
 * The cluster targets (bench/cluster.ts), each process's CPU read on its own:
 * - cluster-gateway: one `sluice gateway` and no consumer, so the streams fill;
 * - cluster-consumer: one `sluice consume` started on those filled streams, measured from its
 *   start until the streams are empty (everything stored and acknowledged);
 * - cluster: gateway + consumer + storage end to end, each run measured until all it published
 *   is stored.
 * cluster-gateway and cluster-consumer are one sequence: the consumer drains what the gateway
 * published in its closed loop, which is also how the gateway's acknowledgements are checked.
 */
import { performance } from 'node:perf_hooks';
import { startBenchCluster, type BenchCluster } from './cluster.ts';
import { closedLoop, closedLoopFigures, load, openAcknowledged, openLoopRun, perOf, runCpu, unanswered, type Options, type OpenRun, type Row } from './measure.ts';
import type { Scenario } from './scenarios.ts';
import { cpuSeconds, cpuWindow, type BenchProcess, type CpuFigures } from './target.ts';

/** How long a backlog may take to be stored before the run fails. */
const DRAIN_TIMEOUT_MS = 15 * 60_000;

/** Waits until the table's stream is empty: every message published was stored and acknowledged. */
async function untilDrained(cluster: BenchCluster, table: string): Promise<void> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  while ((await cluster.backlog(table)) > 0) {
    if (Date.now() > deadline) throw new Error(`the ${table} stream still holds ${await cluster.backlog(table)} messages after ${DRAIN_TIMEOUT_MS / 60_000} min`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Starts a consumer on the streams as they are and waits until they are empty; its CPU counts from its start. */
async function drainWithConsumer(cluster: BenchCluster, table: string): Promise<{ cpu: CpuFigures; startupCpuSeconds: number; startupItems: number; stored: number }> {
  const window = cpuWindow(cluster.servers);
  const consumer = await cluster.start('consume');
  const consuming: BenchProcess = { name: 'sluice consume', pid: consumer.pid };
  window.add(consuming);
  const startupCpuSeconds = cpuSeconds(consuming.pid);
  const startupItems = await cluster.stored(table);
  await untilDrained(cluster, table);
  const cpu = window.end();
  await consumer.stop();
  return { cpu, startupCpuSeconds, startupItems, stored: await cluster.stored(table) };
}

const within = (stored: number, acknowledged: number, slack: number) => stored >= acknowledged && stored <= acknowledged + slack;

export async function measureGatewayThenConsumer(scenario: Scenario, opts: Options): Promise<{ gateway: Row; consumer: Row }> {
  const log = (msg: string) => process.stderr.write(`[cluster-gateway/consumer] ${msg}\n`);
  const cluster = await startBenchCluster();
  try {
    const [nats] = cluster.servers;
    const gateway = await cluster.start('gateway');
    const measured: BenchProcess[] = [{ name: 'sluice gateway', pid: gateway.pid }, nats!];
    const endpoint = { url: gateway.url, headers: { 'x-api-key': cluster.apiKey } };
    const per = scenario.itemsPerRequest;
    log(`prefix ${cluster.prefix}, gateway pid ${gateway.pid} at ${gateway.url}, no consumer; warm-up ${opts.warmup} s (its rows purged from the stream), then ${opts.duration} s × ${opts.connections} connections`);
    if (opts.warmup > 0) await load(endpoint, scenario, opts.warmup, opts.connections);
    // The warm-up's rows leave the stream (never stored, not counted): the measured run alone
    // must fit in it, or the gateway's last requests are refused as the stream fills.
    await cluster.purge(scenario.table);
    const { result, cpu } = await closedLoop(endpoint, scenario, opts, measured);
    const acknowledged = result['2xx'];
    // Requests cut off when a closed-loop run ends may be published without being acknowledged.
    const slack = 2 * opts.connections;
    log(`closed loop: ${result['2xx']} requests 2xx, ${await cluster.backlog(scenario.table)} messages in the stream; a consumer drains them`);

    const drain = await drainWithConsumer(cluster, scenario.table);
    const consumerVerified = within(drain.stored, acknowledged * per, slack * per);
    log(`consumer: ${drain.stored} ${scenario.unit} stored in ${drain.cpu.seconds.toFixed(1)} s for ${acknowledged * per} acknowledged: ${consumerVerified ? 'ok' : 'MISMATCH'}`);
    const consumerCpu = runCpu(drain.cpu, drain.stored, perOf(scenario));
    const consumer: Row = {
      target: 'cluster-consumer',
      reqPerSec: NaN,
      itemsPerSec: drain.stored / drain.cpu.seconds,
      p50Ms: NaN,
      p99Ms: NaN,
      errors: 0,
      statusCodes: {},
      cpuSecondsPerItems: consumerCpu.sluicePerItems,
      serverCores: consumerCpu.sluiceCores,
      loadgenCores: consumerCpu.runnerCores,
      otherCores: consumerCpu.otherCores,
      cpu: consumerCpu,
      startupCpuSeconds: drain.startupCpuSeconds,
      startupItems: drain.startupItems,
      acknowledgedItems: acknowledged * per,
      storedItems: drain.stored,
      verified: consumerVerified,
    };

    // The open loop's rows are purged from the stream every second, as a consumer keeping up
    // would take them: a stream growing by gigabytes with no consumer made nats-server's acks
    // stall in the run's later seconds (p99 76-1,003 ms against 31-43 ms purged, bench/HISTORY.md,
    // *The gateway alone at 70 %*), which is not the gateway's latency. Its rows are not stored;
    // the closed loop's, drained above, are what checks the gateway's acknowledgements.
    let open: OpenRun | undefined;
    if (opts.loadFraction > 0) {
      const purging = setInterval(() => void cluster.purge(scenario.table).catch(() => {}), 1000);
      try {
        open = await openLoopRun(endpoint, scenario, opts, result['2xx'] / result.duration, measured);
      } finally {
        clearInterval(purging);
      }
      log(`open loop at ${open.result.rate.toFixed(1)} req/s: ${openAcknowledged(open)} requests 2xx (warm-up included), p99 ${open.result.latencyMs.p99.toFixed(0)} ms; their rows purged from the stream`);
    }
    return {
      gateway: { target: 'cluster-gateway', ...closedLoopFigures(result, cpu, scenario), open, acknowledgedItems: acknowledged * per, storedItems: drain.stored, verified: consumerVerified },
      consumer,
    };
  } finally {
    await cluster.stop();
  }
}

export async function measureCluster(scenario: Scenario, opts: Options): Promise<Row> {
  const log = (msg: string) => process.stderr.write(`[cluster] ${msg}\n`);
  const cluster = await startBenchCluster();
  try {
    const consumer = await cluster.start('consume');
    const gateway = await cluster.start('gateway');
    const measured: BenchProcess[] = [{ name: 'sluice gateway', pid: gateway.pid }, { name: 'sluice consume', pid: consumer.pid }, ...cluster.servers];
    const endpoint = { url: gateway.url, headers: { 'x-api-key': cluster.apiKey } };
    const per = scenario.itemsPerRequest;
    const table = scenario.table;
    log(`prefix ${cluster.prefix}, gateway pid ${gateway.pid} at ${gateway.url}, consumer pid ${consumer.pid}; warm-up ${opts.warmup} s, then ${opts.duration} s × ${opts.connections} connections`);
    const warm = opts.warmup > 0 ? await load(endpoint, scenario, opts.warmup, opts.connections) : undefined;
    await untilDrained(cluster, table);

    // The window runs from the start of the load until all it published is stored.
    const storedBefore = await cluster.stored(table);
    const window = cpuWindow(measured);
    const result = await load(endpoint, scenario, opts.duration, opts.connections);
    const loadEnd = performance.now();
    await untilDrained(cluster, table);
    const tailSeconds = (performance.now() - loadEnd) / 1000;
    const cpu = window.end();
    const storedInRun = (await cluster.stored(table)) - storedBefore;
    const closed = closedLoopFigures(result, cpu, scenario);
    let acknowledged = (warm?.['2xx'] ?? 0) + result['2xx'];
    let slack = 2 * opts.connections;
    log(`closed loop: ${result['2xx']} requests 2xx; all stored ${tailSeconds.toFixed(1)} s after the load`);

    let open: OpenRun | undefined;
    if (opts.loadFraction > 0) {
      // Sustainable is what is stored as fast as it comes: the slower of the two roles.
      const sustained = Math.min(result['2xx'] / result.duration, storedInRun / per / cpu.seconds);
      open = await openLoopRun(endpoint, scenario, opts, sustained, measured, () => untilDrained(cluster, table));
      acknowledged += openAcknowledged(open);
      slack += unanswered(open);
      log(`open loop at ${open.result.rate.toFixed(1)} req/s: ${open.result.ok} requests 2xx, p99 ${open.result.latencyMs.p99.toFixed(0)} ms; all stored ${open.tailSeconds!.toFixed(1)} s after the load`);
    }
    const stored = await cluster.stored(table);
    const verified = within(stored, acknowledged * per, slack * per);
    log(`${stored} ${scenario.unit} stored for ${acknowledged * per} acknowledged: ${verified ? 'ok' : 'MISMATCH'}`);
    return {
      target: 'cluster',
      ...closed,
      itemsPerSec: storedInRun / cpu.seconds,
      ackedPerSec: closed.itemsPerSec,
      tailSeconds,
      open,
      acknowledgedItems: acknowledged * per,
      storedItems: stored,
      verified,
    };
  } finally {
    await cluster.stop();
  }
}
