/**
 * The bench runner: starts each target's processes, drives them from this process — a
 * closed-loop run at saturation (autocannon), then, in latency mode, an open-loop run at a
 * fraction of that rate (bench/open-loop.ts) — reads every process's CPU time around each run,
 * checks that what was acknowledged was stored, and writes a report to bench/results/.
 *
 * usage: tsx bench/run.ts [--scenario otlp-http-protobuf-gzip] [--targets sluice,sluice-uws,naive]
 *                         [--duration 20] [--warmup 10] [--connections 32] [--load-fraction 0.7]
 *                         [--open-connections 256] [--delivery-timeout 120] [--rounds 1]
 *                         [--transcoders js,wasm]
 *   targets: sluice, sluice-uws, naive, cluster-gateway, cluster-consumer, cluster
 *   transcoders: measure Sluice's targets once with each SLUICE_TRANSCODER, side by side (naive once)
 */
import { parseArgs } from 'node:util';
import { measureCluster, measureGatewayThenConsumer } from './measure-cluster.ts';
import { measureWebhooks } from './measure-webhooks.ts';
import { measure, type Options, type Row } from './measure.ts';
import { markdown, runInfo, writeReport } from './report.ts';
import { medianRounds } from './rounds.ts';
import { SCENARIOS, type Scenario } from './scenarios.ts';
import { CLUSTER_TARGETS, TARGETS, type TargetName } from './target.ts';
import { measureWakeups } from './wakeups.ts';

const ALL_TARGETS: readonly TargetName[] = [...TARGETS, ...CLUSTER_TARGETS];

function options(): Options {
  const { values } = parseArgs({
    options: {
      scenario: { type: 'string', default: 'otlp-http-protobuf-gzip' },
      targets: { type: 'string', default: TARGETS.join(',') },
      duration: { type: 'string', default: process.env.BENCH_DURATION ?? '20' },
      warmup: { type: 'string', default: process.env.BENCH_WARMUP ?? '10' },
      connections: { type: 'string', default: '32' },
      'load-fraction': { type: 'string', default: '0.7' },
      'open-connections': { type: 'string', default: '256' },
      'delivery-timeout': { type: 'string', default: '120' },
      rounds: { type: 'string', default: '1' },
      transcoders: { type: 'string', default: '' },
    },
    strict: true,
  });
  const targets = values.targets.split(',').map((t) => t.trim()) as TargetName[];
  const unknown = targets.filter((t) => !ALL_TARGETS.includes(t));
  if (unknown.length) throw new Error(`unknown target ${unknown.join(', ')} (known: ${ALL_TARGETS.join(', ')})`);
  const transcoders = values.transcoders.split(',').map((t) => t.trim()).filter(Boolean);
  const badTranscoder = transcoders.find((t) => t !== 'js' && t !== 'wasm');
  if (badTranscoder) throw new Error(`unknown transcoder ${badTranscoder} (known: js, wasm)`);
  if (!SCENARIOS[values.scenario]) throw new Error(`unknown scenario ${values.scenario} (known: ${Object.keys(SCENARIOS).join(', ')})`);
  const number = (name: string, v: string, min: number, max = Infinity) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name} must be a number from ${min}${max < Infinity ? ` to ${max}` : ''}`);
    return n;
  };
  return {
    scenario: values.scenario,
    targets,
    duration: number('duration', values.duration, 1),
    warmup: number('warmup', values.warmup, 0),
    connections: number('connections', values.connections, 1),
    loadFraction: number('load-fraction', values['load-fraction'], 0, 1),
    openConnections: number('open-connections', values['open-connections'], 1),
    deliveryTimeout: number('delivery-timeout', values['delivery-timeout'], 1),
    rounds: number('rounds', values.rounds, 1, 9),
    transcoders,
  };
}

async function main(): Promise<void> {
  const opts = options();
  const info = runInfo();
  // Before any target starts, on a machine at rest: what the figures below pay per wake-up.
  info.wakeups = await measureWakeups(300, 3);
  const scenario = SCENARIOS[opts.scenario]!();
  process.stderr.write(`${opts.scenario}: ${scenario.description}\n`);

  // cluster-gateway and cluster-consumer are one sequence: the consumer drains what the gateway published.
  let gatewayThenConsumer: ReturnType<typeof measureGatewayThenConsumer> | undefined;
  const measureTarget = async (name: TargetName, scenario: Scenario): Promise<Row> => {
    if (name === 'cluster') return measureCluster(scenario, opts);
    if (name === 'cluster-gateway' || name === 'cluster-consumer') {
      gatewayThenConsumer ??= measureGatewayThenConsumer(scenario, opts);
      const { gateway, consumer } = await gatewayThenConsumer;
      return name === 'cluster-gateway' ? gateway : consumer;
    }
    return (scenario.webhooks ? measureWebhooks : measure)(name, scenario, opts);
  };

  const unsupported = opts.targets.filter((name) => scenario.targets && !scenario.targets.includes(name));
  if (unsupported.length) process.stderr.write(`skipping ${unsupported.join(', ')}: ${scenario.skipReason ?? `no ${scenario.path} endpoint`}\n`);
  const rounds: Row[][] = [];
  for (let round = 1; round <= opts.rounds; round++) {
    if (opts.rounds > 1) process.stderr.write(`round ${round} of ${opts.rounds}\n`);
    const rows: Row[] = [];
    // Sluice's processes inherit SLUICE_TRANSCODER; naive has no transcoder and runs once.
    const passes = opts.transcoders.length > 0 ? opts.transcoders : [undefined];
    for (const [pass, transcoder] of passes.entries()) {
      if (transcoder) process.env.SLUICE_TRANSCODER = transcoder;
      gatewayThenConsumer = undefined;
      for (const name of opts.targets.filter((t) => !unsupported.includes(t) && (pass === 0 || t !== 'naive'))) {
        const variant = transcoder && name !== 'naive' ? { transcoder } : {};
        try {
          rows.push({ ...(await measureTarget(name, scenario)), ...variant });
        } catch (err) {
          process.stderr.write(`[${name}${transcoder ? ` ${transcoder}` : ''}] failed: ${(err as Error).message}\n`);
          rows.push({ target: name, error: (err as Error).message, ...variant } as Row);
        }
      }
    }
    rounds.push(rows);
  }
  const rows = medianRounds(rounds);

  const md = markdown(opts.scenario, scenario, opts, rows, info);
  process.stdout.write('\n' + md);
  process.stderr.write(`report: ${writeReport(opts.scenario, scenario, opts, rows, info, md)}.{json,md}\n`);
  if (rows.some((r) => r.error || !r.verified)) process.exitCode = 1;
}

await main();
