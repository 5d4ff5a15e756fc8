/**
 * Measuring a target: a closed-loop run at saturation (autocannon: `connections` requests in
 * flight, the next one sent when an answer comes), then, in latency mode, an open-loop run at a
 * fraction of the rate it reached (bench/open-loop.ts). Each process's CPU is read over each run,
 * and what was acknowledged is checked against what the target stored.
 */
import { performance } from 'node:perf_hooks';
import autocannon, { type Result } from 'autocannon';
import { openLoop, openLoopPool, type OpenLoopResult } from './open-loop.ts';
import type { Scenario } from './scenarios.ts';
import { cpuWindow, startTarget, type BenchProcess, type CpuFigures, type EmbeddedTarget, type RunningTarget, type TargetName } from './target.ts';

export interface WebhookFigures {
  /** Submissions answered 201 per second of load. */
  acceptedPerSec: number;
  /** Webhooks of the measured run received per second, from the load's start to the last one. */
  deliveredPerSec: number;
  /** Seconds from the end of the load to the last webhook. */
  tailSeconds: number;
  /** Submission (its receivedAt) to webhook received, over the measured run's submissions. */
  p50Ms: number;
  p99Ms: number;
  /** Accepted submissions (warm-up included) whose webhook did not arrive by the deadline, and a few of their ids. */
  missing: number;
  missingIds: string[];
  /** Webhooks for submissions never answered (requests cut off when a load ended). */
  unacknowledged: number;
  /** Calls repeating a webhook-id already received. */
  repeats: number;
  signaturesChecked: number;
  badSignatures: number;
}

export interface Options {
  scenario: string;
  targets: TargetName[];
  duration: number;
  warmup: number;
  connections: number;
  /** Latency mode: the open-loop run's rate as a fraction of the saturating rate; 0 skips the open-loop run. */
  loadFraction: number;
  /** Keep-alive connections the open-loop generator may open. */
  openConnections: number;
  /** relay-webhooks: seconds to wait for the last webhooks after the load. */
  deliveryTimeout: number;
  /** Times every target is measured, the targets taking turns (rounds.ts). */
  rounds: number;
  /** SLUICE_TRANSCODER values to measure Sluice's targets with, one after the other in each round; empty: as the environment says. */
  transcoders: string[];
}

/** Where a load goes: a base URL and the headers every request needs (authentication). */
export interface Endpoint {
  url: string;
  headers: Record<string, string>;
}

export function endpointOf(target: RunningTarget, scenario: Scenario): Endpoint {
  return { url: scenario.port === 'relay' ? target.relayUrl : target.url, headers: target.headers };
}

/** Drives the endpoint for `duration` seconds, rotating through the scenario's bodies; `accepted` collects the ids of 201 answers. */
export function load(endpoint: Endpoint, scenario: Scenario, duration: number, connections: number, accepted?: string[]): Promise<Result> {
  let next = 0;
  return autocannon({
    url: endpoint.url + scenario.path,
    method: 'POST',
    headers: { ...scenario.headers, ...endpoint.headers },
    connections,
    duration,
    requests: [{
      setupRequest: (req) => {
        const n = next++;
        const extra = scenario.perRequestHeaders?.(n);
        return { ...req, body: scenario.bodies[n % scenario.bodies.length], ...(extra ? { headers: { ...req.headers, ...extra } } : {}) };
      },
      ...(accepted ? {
        onResponse: (status: number, body: string) => {
          if (status === 201) accepted.push((JSON.parse(body) as { submissionId: string }).submissionId);
        },
      } : {}),
    }],
  });
}

/** Reads the stored count until it stops changing: cut-off requests may still be committing. */
async function settledCount(target: RunningTarget, table: string): Promise<number> {
  let last = -1;
  for (let i = 0; i < 40; i++) {
    const count = await target.countRows(table);
    if (count === last) return count;
    last = count;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return last;
}

/** One process's CPU over a run. */
export interface ProcessCpu extends BenchProcess {
  cpuSeconds: number;
  /** CPU seconds / wall seconds of the run. */
  cores: number;
  /** CPU seconds per Scenario.cpuPer (a million, or a thousand) items of the run. */
  perItems: number;
  /** Highest resident set since the process started, at the end of the run. */
  peakRssMiB: number;
}

/** A run's CPU, process by process. */
export interface RunCpu {
  seconds: number;
  /** The items the run is counted in: acknowledged with 2xx, or (a consumer) stored. */
  items: number;
  processes: ProcessCpu[];
  /** Sluice's own processes together (servers excluded). */
  sluicePerItems: number;
  sluiceCores: number;
  /** The bench runner: autocannon or the open-loop generator (and the webhook receiver). */
  runnerCores: number;
  otherCores: number;
}

export const perOf = (scenario: Scenario) => scenario.cpuPer ?? 1e6;

export function runCpu(cpu: CpuFigures, items: number, per: number): RunCpu {
  // Sluice's processes first, then the servers.
  const processes = cpu.processes
    .map((p) => ({ ...p, server: p.server ?? false, cores: p.cpuSeconds / cpu.seconds, perItems: p.cpuSeconds / (items / per) }))
    .sort((a, b) => Number(a.server) - Number(b.server));
  const sluice = processes.filter((p) => !p.server).reduce((sum, p) => sum + p.cpuSeconds, 0);
  return {
    seconds: cpu.seconds,
    items,
    processes,
    sluicePerItems: items ? sluice / (items / per) : NaN,
    sluiceCores: sluice / cpu.seconds,
    runnerCores: cpu.runnerSeconds / cpu.seconds,
    otherCores: cpu.otherSeconds / cpu.seconds,
  };
}

/** The open-loop run of latency mode. */
export interface OpenRun {
  fraction: number;
  /**
   * The same open loop for `--warmup` seconds first, not measured (its requests are counted
   * as acknowledged like the closed loop's warm-up): the generator's HTTP client and the
   * target's paths for the new connections are compiled there, not in the measured seconds.
   */
  warmup?: OpenLoopResult;
  result: OpenLoopResult;
  cpu: RunCpu;
  /** Seconds from the end of the load until everything acknowledged was stored (cluster). */
  tailSeconds?: number;
}

export interface Row {
  target: string;
  /** The transcoder Sluice's processes ran with (--transcoders), where the run compared them. */
  transcoder?: string;
  /** The closed-loop run at saturation: responses (any status) per second... */
  reqPerSec: number;
  /** ...items acknowledged per second (cluster: stored, until all were; cluster-consumer: stored by the consumer). */
  itemsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** non-2xx responses plus socket errors and timeouts. */
  errors: number;
  statusCodes: Record<string, number>;
  /** Sluice's processes' CPU (user + system, all threads) per Scenario.cpuPer items. */
  cpuSecondsPerItems: number;
  /** Sluice's processes' CPU seconds / wall seconds: how many cores they kept busy. */
  serverCores: number;
  /** This process (the load generator) CPU seconds / wall seconds. */
  loadgenCores: number;
  /** Every other process on the machine: above ~0.1 the figures are disturbed. */
  otherCores: number;
  /** Each process's CPU over the closed-loop run. */
  cpu?: RunCpu;
  /** Latency mode: the open-loop run. */
  open?: OpenRun;
  /** cluster: items acknowledged per second during the closed-loop load, and seconds from its end until all were stored. */
  ackedPerSec?: number;
  tailSeconds?: number;
  /** cluster-consumer: the consumer's CPU until it answered health (counted in its figures), and the items stored by then. */
  startupCpuSeconds?: number;
  startupItems?: number;
  /** Items acknowledged with 2xx (warm-up included) and items the target says it stored. */
  acknowledgedItems: number;
  storedItems: number;
  verified: boolean;
  /** relay-webhooks only. */
  webhooks?: WebhookFigures;
  error?: string;
}

/** Closed loop for `opts.duration`, the CPU of `processes` read around it. */
export async function closedLoop(endpoint: Endpoint, scenario: Scenario, opts: Options, processes: BenchProcess[]): Promise<{ result: Result; cpu: CpuFigures }> {
  const window = cpuWindow(processes);
  const result = await load(endpoint, scenario, opts.duration, opts.connections);
  return { result, cpu: window.end() };
}

/** A Row's closed-loop figures. */
export function closedLoopFigures(result: Result, cpu: CpuFigures, scenario: Scenario) {
  const items = result['2xx'] * scenario.itemsPerRequest;
  const figures = runCpu(cpu, items, perOf(scenario));
  return {
    reqPerSec: result.requests.total / result.duration,
    itemsPerSec: items / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    errors: result.non2xx + result.errors,
    statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count])),
    cpuSecondsPerItems: figures.sluicePerItems,
    serverCores: figures.sluiceCores,
    loadgenCores: figures.runnerCores,
    otherCores: figures.otherCores,
    cpu: figures,
  };
}

/**
 * Open loop at `opts.loadFraction` × `saturatingRate` (requests/s) for `opts.duration`, the CPU of
 * `processes` read around it; `untilStored` extends the window until everything is stored.
 */
export async function openLoopRun(
  endpoint: Endpoint,
  scenario: Scenario,
  opts: Options,
  saturatingRate: number,
  processes: BenchProcess[],
  untilStored?: () => Promise<void>,
): Promise<OpenRun> {
  if (!(saturatingRate > 0)) throw new Error('no request was acknowledged at saturation: no rate for the open-loop run');
  const agent = openLoopPool(opts.openConnections);
  const run = (duration: number) => openLoop({
    url: endpoint.url + scenario.path,
    headers: { ...scenario.headers, ...endpoint.headers },
    bodies: scenario.bodies,
    perRequestHeaders: scenario.perRequestHeaders,
    rate: opts.loadFraction * saturatingRate,
    duration,
    connections: opts.openConnections,
    agent,
  });
  try {
    const warmup = opts.warmup > 0 ? await run(opts.warmup) : undefined;
    // The warm-up's own rows are stored before the measured window opens.
    if (warmup) await untilStored?.();
    const window = cpuWindow(processes);
    const result = await run(opts.duration);
    const loadEnd = performance.now();
    await untilStored?.();
    const tailSeconds = untilStored ? (performance.now() - loadEnd) / 1000 : undefined;
    return { fraction: opts.loadFraction, warmup, result, cpu: runCpu(window.end(), result.ok * scenario.itemsPerRequest, perOf(scenario)), tailSeconds };
  } finally {
    agent.destroy();
  }
}

/** Requests of an open-loop run (its warm-up included) answered 2xx. */
export const openAcknowledged = (open: OpenRun) => open.result.ok + (open.warmup?.ok ?? 0);

/** Requests of an open-loop run (its warm-up included) that got no answer: each may have been stored all the same. */
export const unanswered = (open: OpenRun | undefined) =>
  [open?.warmup, open?.result].reduce((sum, run) => sum + Object.values(run?.errors ?? {}).reduce((n, count) => n + count, 0), 0);

/**
 * sluice, sluice-uws, naive: one process each. Warm-up, the closed-loop run until everything is
 * stored, then (latency mode) the open-loop run at a fraction of that stored rate; the stored
 * count is checked after each.
 */
export async function measure(name: EmbeddedTarget, scenarioOf: Scenario, opts: Options): Promise<Row> {
  let scenario = scenarioOf;
  const log = (msg: string) => process.stderr.write(`[${name}] ${msg}\n`);
  const target = await startTarget(name, scenario.env);
  try {
    if (scenario.prepare) {
      const prepared = await scenario.prepare(target);
      scenario = { ...scenario, bodies: prepared.bodies };
      target.headers = { ...target.headers, ...prepared.headers };
    }
    const endpoint = endpointOf(target, scenario);
    log(`pid ${target.pid} at ${endpoint.url}; warm-up ${opts.warmup} s, then ${opts.duration} s × ${opts.connections} connections`);
    const warm = opts.warmup > 0 ? await load(endpoint, scenario, opts.warmup, opts.connections) : undefined;
    await target.drained();
    // The window runs from the start of the load until all of it is stored: Sluice acknowledges
    // once rows are in its local log and inserts them into chDB after, so the load alone would
    // leave the inserts (and their CPU) out.
    const window = cpuWindow(target.processes);
    const result = await load(endpoint, scenario, opts.duration, opts.connections);
    const loadEnd = performance.now();
    await target.drained();
    const tailSeconds = (performance.now() - loadEnd) / 1000;
    const cpu = window.end();
    const closed = closedLoopFigures(result, cpu, scenario);
    const storedPerSec = (result['2xx'] * scenario.itemsPerRequest) / cpu.seconds;
    let acknowledged = (warm?.['2xx'] ?? 0) + result['2xx'];
    // Requests cut off when a closed-loop run ends may be stored without being acknowledged: at
    // most one in flight per connection, per run.
    let slack = 2 * opts.connections;
    let stored = await settledCount(target, scenario.table);
    log(`closed loop: ${result['2xx']} requests 2xx; ${stored} ${scenario.unit} stored for ${acknowledged * scenario.itemsPerRequest} acknowledged`);

    let open: OpenRun | undefined;
    if (opts.loadFraction > 0) {
      // Sustainable is what is stored as fast as it comes, not what the log takes in a burst.
      open = await openLoopRun(endpoint, scenario, opts, storedPerSec / scenario.itemsPerRequest, target.processes, () => target.drained());
      acknowledged += openAcknowledged(open);
      slack += unanswered(open);
      stored = await settledCount(target, scenario.table);
      log(`open loop at ${open.result.rate.toFixed(1)} req/s: ${open.result.ok} requests 2xx, p99 ${open.result.latencyMs.p99.toFixed(0)} ms`);
    }
    const acknowledgedItems = acknowledged * scenario.itemsPerRequest;
    const verified = stored >= acknowledgedItems && stored <= acknowledgedItems + slack * scenario.itemsPerRequest;
    log(`${stored} ${scenario.unit} stored for ${acknowledgedItems} acknowledged: ${verified ? 'ok' : 'MISMATCH'}`);
    return { target: name, ...closed, itemsPerSec: storedPerSec, ackedPerSec: closed.itemsPerSec, tailSeconds, open, acknowledgedItems, storedItems: stored, verified };
  } finally {
    await target.stop();
  }
}
