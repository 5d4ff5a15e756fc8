/**
 * The bench report: Markdown tables (printed, and written with the JSON to
 * bench/results/<timestamp>.{json,md}), headed by how and where the figures were taken.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { relative } from 'node:path';
import type { Options, Row, RunCpu } from './measure.ts';
import { rowLabel, type RoundedRow } from './rounds.ts';
import type { Scenario } from './scenarios.ts';
import type { WakeupCost } from './wakeups.ts';

/** Where and how the figures were taken. */
export interface RunInfo {
  date: string;
  command: string;
  commit: string;
  node: string;
  cores: number;
  cpuModel: string;
  memoryGiB: number;
  /** What waking a sleeping thread costs this machine (bench/wakeups.ts), measured before the targets. */
  wakeups?: WakeupCost;
}

export function runInfo(): RunInfo {
  const git = (...args: string[]) => {
    try {
      return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return '';
    }
  };
  const commit = git('rev-parse', '--short', 'HEAD') || 'unknown';
  return {
    date: new Date().toISOString(),
    command: ['node', ...process.execArgv, relative(process.cwd(), process.argv[1]!), ...process.argv.slice(2)].join(' '),
    commit: git('status', '--porcelain', '--untracked-files=no') ? `${commit} + uncommitted changes` : commit,
    node: process.version,
    cores: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 1024 ** 3),
  };
}

const fixed = (n: number | undefined, digits = 0) => (n !== undefined && Number.isFinite(n) ? n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '–');

const machineLine = (info: RunInfo) =>
  `\`${info.command}\` at commit \`${info.commit}\`, ${info.date}; Node ${info.node}, ${info.cores} cores (${info.cpuModel}), ${info.memoryGiB} GiB.` +
  (info.wakeups
    ? ` Thread wake-ups here (\`bench/wakeups.ts\`, at 300/s): ${info.wakeups.timerMicros} µs of CPU per empty timer tick, ${info.wakeups.workerRoundTripMicros} µs per round trip to a worker thread (figures taken where these differ are not comparable: bench/HISTORY.md, *Worker wake-ups*).`
    : '');

export function markdown(name: string, scenario: Scenario, opts: Options, rows: Row[], info: RunInfo): string {
  if (scenario.webhooks) return webhookMarkdown(name, scenario.description, opts, rows, info);
  const { unit } = scenario;
  const per = (scenario.cpuPer ?? 1e6) === 1e6 ? 'M' : 'k';
  const digits = per === 'k' ? 3 : 1;
  const latency = opts.loadFraction > 0;
  const pct = `${Math.round(opts.loadFraction * 100)} %`;
  const lines = [
    `## ${name}`,
    '',
    `${scenario.description}.`,
    '',
    `Closed loop (saturation): autocannon, ${opts.connections} connections, ${opts.duration} s per target after ${opts.warmup} s warm-up.` +
      (latency
        ? ` Open loop (latency): ${pct} of the saturating rate, requests evenly spaced for ${opts.duration} s (after ${opts.warmup} s of the same, not measured) ` +
          `over up to ${opts.openConnections} keep-alive connections, latency from each request's scheduled send time.`
        : ' No open-loop run (--load-fraction 0).'),
    machineLine(info) + ' Load generator, servers and Sluice share the cores.' + roundsLine(opts, unit, per),
    '',
    `| target | req/s | ${unit}/s | p50 ms | p99 ms |` + (latency ? ` at ${pct}: req/s asked / answered | p50 ms | p90 ms | p99 ms | max ms |` : '') +
      ` errors | CPU-s / ${per} ${unit} | Sluice cores | other cores | stored = acked |`,
    '|---|---:|---:|---:|---:|' + (latency ? '---:|---:|---:|---:|---:|' : '') + '---:|---:|---:|---:|---|',
  ];
  for (const r of rows) {
    if (r.error) {
      lines.push(`| ${rowLabel(r)} | failed: ${r.error.split('\n')[0]} |`);
      continue;
    }
    const o = r.open?.result;
    const openErrors = o ? o.answered - o.ok + o.sent - o.answered : 0;
    lines.push(
      `| ${rowLabel(r)} | ${fixed(r.reqPerSec)} | ${fixed(r.itemsPerSec)} | ${fixed(r.p50Ms)} | ${fixed(r.p99Ms)} |` +
        (latency ? ` ${o ? `${fixed(o.rate, 1)} / ${fixed(o.achievedRate, 1)}` : '–'} | ${fixed(o?.latencyMs.p50)} | ${fixed(o?.latencyMs.p90)} | ${fixed(o?.latencyMs.p99)} | ${fixed(o?.latencyMs.max)} |` : '') +
        ` ${r.errors + openErrors} | ${fixed(r.cpuSecondsPerItems, digits)} | ${fixed(r.serverCores, 2)} | ${fixed(r.otherCores, 2)} | ` +
        `${r.verified ? 'yes' : `NO (${r.storedItems} / ${r.acknowledgedItems})`} |`,
    );
  }
  lines.push('', ...processTable(rows, unit, per, digits, latency ? pct : undefined), '', ...notes(rows, unit, per, digits, opts.openConnections));
  if (rows.some((r) => r.otherCores > 0.1 || (r.open?.cpu.otherCores ?? 0) > 0.1)) {
    lines.push('', '**Other processes used CPU during the runs** (other cores > 0.1): throughput, latency and even CPU per item are disturbed.');
  }
  return lines.join('\n') + '\n';
}

/** Every process's CPU, per run: Sluice's processes, the servers, the load generator and the rest of the machine. */
function processTable(rows: Row[], unit: string, per: string, digits: number, pct?: string): string[] {
  const lines = [
    `| target | process | CPU-s / ${per} ${unit} | cores |` + (pct ? ` at ${pct}: CPU-s / ${per} ${unit} | cores |` : '') + ' peak RSS MiB |',
    '|---|---|---:|---:|' + (pct ? '---:|---:|' : '') + '---:|',
  ];
  for (const r of rows.filter((row) => row.cpu)) {
    const runs: Array<RunCpu | undefined> = pct ? [r.cpu, r.open?.cpu] : [r.cpu];
    const cells = (pick: (run: RunCpu) => { perItems?: number; cores: number }) =>
      runs.map((run) => (run ? `${fixed(pick(run).perItems, digits)} | ${fixed(pick(run).cores, 2)}` : '– | –')).join(' | ');
    const line = (label: string, pick: (run: RunCpu) => { perItems?: number; cores: number }, rss?: number) =>
      lines.push(`| ${rowLabel(r)} | ${label} | ${cells(pick)} | ${rss === undefined || Number.isNaN(rss) ? '–' : fixed(rss)} |`);
    const last = r.open?.cpu ?? r.cpu!;
    for (const [i, p] of r.cpu!.processes.entries()) {
      line(p.server ? `${p.name} (server)` : p.name, (run) => run.processes[i] ?? { perItems: NaN, cores: NaN }, last.processes[i]?.peakRssMiB);
    }
    if (r.cpu!.processes.filter((p) => !p.server).length > 1) line('**Sluice processes together**', (run) => ({ perItems: run.sluicePerItems, cores: run.sluiceCores }));
    line('bench runner', (run) => ({ cores: run.runnerCores }));
    line('other processes', (run) => ({ cores: run.otherCores }));
  }
  return lines;
}

const roundsLine = (opts: Options, unit: string, per: string) =>
  opts.rounds > 1
    ? ` ${opts.rounds} rounds, the targets taking turns: each row is a target's median round by CPU-s / ${per} ${unit}, whole; the range over the rounds is below.`
    : '';

/** The spread of a target's rounds, when there were several. */
function roundsNote(r: RoundedRow, unit: string, per: string, digits: number): string | undefined {
  if (!r.rounds || r.rounds.length < 2) return undefined;
  const range = (values: number[], places = 0) => `${fixed(Math.min(...values), places)}–${fixed(Math.max(...values), places)}`;
  const p99s = r.rounds.flatMap((round) => (round.openP99Ms === undefined ? [] : [round.openP99Ms]));
  return `- ${rowLabel(r)}: over ${r.rounds.length} rounds, CPU-s / ${per} ${unit} ${range(r.rounds.map((round) => round.cpuSecondsPerItems), digits)}, ` +
    `${unit}/s ${range(r.rounds.map((round) => round.itemsPerSec))}` + (p99s.length ? `, open-loop p99 ${range(p99s)} ms` : '') +
    (r.rounds.every((round) => round.verified) ? '' : `; stored ≠ acknowledged in ${r.rounds.filter((round) => !round.verified).length} of them`) + '.';
}

function notes(rows: RoundedRow[], unit: string, per: string, digits: number, pool: number): string[] {
  const lines: string[] = [];
  const naive = rows.find((r) => r.target === 'naive' && !r.error);
  for (const r of rows.filter((row) => !row.error)) {
    const spread = roundsNote(r, unit, per, digits);
    if (spread) lines.push(spread);
    if (naive && (r.target === 'sluice' || r.target === 'sluice-uws')) {
      lines.push(`- ${rowLabel(r)}: ${fixed(naive.cpuSecondsPerItems / r.cpuSecondsPerItems, 2)}× the ${unit} per CPU-second of naive, ${fixed(r.itemsPerSec / naive.itemsPerSec, 2)}× its ${unit}/s.`);
    }
    if ((r.target === 'sluice' || r.target === 'sluice-uws') && r.tailSeconds !== undefined) {
      lines.push(`- ${rowLabel(r)}: acknowledged ${fixed(r.ackedPerSec)} ${unit}/s during the closed-loop load (into its local log); all of it was in chDB ${fixed(r.tailSeconds, 1)} s after the load ended ` +
        `(${unit}/s and CPU cover the load and that tail)` + (r.open?.tailSeconds !== undefined ? `; after the open-loop load, ${fixed(r.open.tailSeconds, 1)} s.` : '.'));
    }
    if (r.target === 'cluster') {
      lines.push(`- cluster: the gateway acknowledged ${fixed(r.ackedPerSec)} ${unit}/s during the closed-loop load; all of it was stored ${fixed(r.tailSeconds, 1)} s after the load ended ` +
        `(${unit}/s and CPU cover the load and that tail)` + (r.open ? `; after the open-loop load, ${fixed(r.open.tailSeconds, 1)} s.` : '.'));
    }
    if (r.target === 'cluster-consumer') {
      const consumer = r.cpu!.processes.find((p) => !p.server)!;
      const steady = (r.storedItems - r.startupItems!) / (consumer.cpuSeconds - r.startupCpuSeconds!);
      lines.push(`- cluster-consumer: ${fixed(r.storedItems)} ${unit} stored in ${fixed(r.cpu!.seconds, 1)} s from the consumer's start: ${fixed(r.storedItems / consumer.cpuSeconds)} ${unit} per CPU-second of the consumer alone, ` +
        `its start-up included (${fixed(r.startupCpuSeconds, 2)} CPU-s until it answered health, ${fixed(r.startupItems)} ${unit} stored by then); ${fixed(steady)} ${unit} per CPU-second after it.`);
    }
    const o = r.open?.result;
    if (o) {
      const waited = o.peakInFlight > pool ? ' (more than the pool: some waited for a connection, counted in latency)' : '';
      const warm = r.open?.warmup;
      lines.push(`- ${rowLabel(r)} open loop: ${o.sent} requests at ${fixed(o.rate, 1)}/s, at most ${o.peakInFlight} in flight${waited}, generator timer at most ${fixed(o.maxTimerLagMs)} ms late; ` +
        `statuses ${JSON.stringify(o.statusCodes)}` + (Object.keys(o.errors).length ? `, no answer: ${JSON.stringify(o.errors)}` : '') + '; ' +
        `p99 by second ${bySecond(o.p99BySecondMs)}` + (warm ? `; its warm-up (not measured): p99 ${fixed(warm.latencyMs.p99)} ms, by second ${bySecond(warm.p99BySecondMs)}` : '') + '.');
    }
  }
  return lines;
}

/** The seconds' p99s in short: their median and the worst, with when it was. */
function bySecond(p99s: number[]): string {
  const answered = p99s.map((p99, second) => ({ p99, second })).filter(({ p99 }) => !Number.isNaN(p99));
  if (!answered.length) return '–';
  const worst = answered.reduce((a, b) => (b.p99 > a.p99 ? b : a));
  const median = answered.map(({ p99 }) => p99).sort((a, b) => a - b)[answered.length >> 1]!;
  return `median ${fixed(median)} ms, worst ${fixed(worst.p99)} ms (second ${worst.second + 1} of ${p99s.length})`;
}

export function webhookMarkdown(scenario: string, description: string, opts: Options, rows: Row[], info: RunInfo): string {
  const lines = [
    `## ${scenario}`,
    '',
    `${description}. autocannon, ${opts.connections} connections, ${opts.duration} s of load per target after ${opts.warmup} s warm-up ` +
      `(whose webhooks are awaited first); load generator, receiver and server share the cores.`,
    machineLine(info) + roundsLine(opts, 'webhooks', 'k'),
    '',
    '| target | submissions/s | webhooks/s | delivery p50 ms | delivery p99 ms | errors | CPU-s / k webhooks | server cores | runner cores | other cores | delivered = accepted |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const r of rows) {
    const w = r.webhooks;
    if (r.error || !w) {
      lines.push(`| ${rowLabel(r)} | failed: ${r.error?.split('\n')[0]} | | | | | | | | | |`);
      continue;
    }
    lines.push(
      `| ${rowLabel(r)} | ${fixed(w.acceptedPerSec)} | ${fixed(w.deliveredPerSec)} | ${fixed(w.p50Ms)} | ${fixed(w.p99Ms)} | ${r.errors} | ${fixed(r.cpuSecondsPerItems, 3)} | ` +
        `${fixed(r.serverCores, 2)} | ${fixed(r.loadgenCores, 2)} | ${fixed(r.otherCores, 2)} | ${r.verified ? 'yes' : `NO (${w.missing} missing)`} |`,
    );
  }
  lines.push('');
  for (const r of rows.filter((row) => row.webhooks)) {
    const w = r.webhooks!;
    const spread = roundsNote(r, 'webhooks', 'k', 3);
    if (spread) lines.push(spread);
    lines.push(
      `- ${rowLabel(r)}: submit p50 ${fixed(r.p50Ms)} ms, p99 ${fixed(r.p99Ms)} ms; last webhook ${fixed(w.tailSeconds, 1)} s after the load; ` +
        `${r.storedItems} webhooks for ${r.acknowledgedItems} accepted submissions (warm-up included), ${w.unacknowledged} of them for requests cut off unanswered; ` +
        `${w.repeats} repeated webhook-ids; ${w.signaturesChecked} signatures checked, ${w.badSignatures} bad.`,
    );
  }
  if (rows.some((r) => r.otherCores > 0.1)) {
    lines.push('', '**Other processes used CPU during the run** (other cores > 0.1): throughput and latency are disturbed.');
  }
  return lines.join('\n') + '\n';
}

/** Writes bench/results/<timestamp>.{json,md}; returns the path without the extension. */
export function writeReport(name: string, scenario: Scenario, opts: Options, rows: Row[], info: RunInfo, md: string): string {
  const stamp = info.date.replace(/[:.]/g, '-');
  const dir = new URL('results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  const report = { scenario: name, description: scenario.description, ...info, options: opts, rows };
  writeFileSync(new URL(`${stamp}.json`, dir), JSON.stringify(report, null, 2) + '\n');
  writeFileSync(new URL(`${stamp}.md`, dir), md);
  return `bench/results/${stamp}`;
}
