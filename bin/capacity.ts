/**
 * `sluice capacity`: the processes and cores a cluster needs for a span rate, from what the bench
 * measured on a machine (bench/results/<timestamp>.json of `npm run bench -- --targets
 * cluster-gateway,cluster-consumer`): each role's CPU-seconds per million spans, times the rate,
 * over the share of a core each may use (the headroom), in processes of a given size.
 * docs/guides/capacity.md explains the figures and what lies beyond one region.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What a report row holds that the plan reads (bench/measure.ts Row). */
interface ReportRow {
  target: string;
  transcoder?: string;
  cpu?: { items: number; processes: Array<{ name: string; perItems: number; cpuSeconds: number; server?: boolean }> };
  /** cluster-consumer: its CPU until it answered health, and the spans stored by then. */
  startupCpuSeconds?: number;
  startupItems?: number;
}
export interface BenchReport {
  date: string;
  scenario: string;
  rows: ReportRow[];
}

/** CPU-seconds per million spans of each part of a cluster, as one bench run measured them. */
export interface RoleCosts {
  gateway: number;
  consumer: number;
  /** nats-server's, publishes and pulls together. */
  nats: number;
  /** The storage the bench ran (chDB behind a facade: a stand-in, not a ClickHouse server). */
  storage?: number;
  /** Where the figures come from: the report's date and scenario. */
  measured: string;
}

/** The row's process of a role: `sluice gateway`, `sluice consume`, `nats-server`, `storage (facade)`. */
const processOf = (row: ReportRow | undefined, role: string) => row?.cpu?.processes.find((one) => one.name.replace(/^sluice /, '').startsWith(role));
const processCost = (row: ReportRow | undefined, role: string) => processOf(row, role)?.perItems;

/** The consumer's cost once running: its start-up (CPU and spans until it answered health) left out. */
function steadyConsumerCost(row: ReportRow | undefined): number | undefined {
  const consumer = processOf(row, 'consume');
  if (!consumer || row?.startupCpuSeconds === undefined || row.startupItems === undefined || !row.cpu) return consumer?.perItems;
  const items = row.cpu.items - row.startupItems;
  return items > 0 ? ((consumer.cpuSeconds - row.startupCpuSeconds) / items) * 1e6 : consumer.perItems;
}

/** A report's per-role costs; throws naming what the report lacks. */
export function costsOf(report: BenchReport): RoleCosts {
  if (report.scenario !== 'otlp-http-protobuf-gzip') throw new Error(`the report is of ${report.scenario}: capacity needs the span scenario (otlp-http-protobuf-gzip)`);
  // With --transcoders, the row of the transcoder Sluice runs by default (WebAssembly).
  const row = (target: string) => report.rows.find((one) => one.target === target && (one.transcoder ?? 'wasm') === 'wasm') ?? report.rows.find((one) => one.target === target);
  const gatewayRow = row('cluster-gateway');
  const consumerRow = row('cluster-consumer');
  const gateway = processCost(gatewayRow, 'gateway');
  const consumer = steadyConsumerCost(consumerRow);
  if (gateway === undefined || consumer === undefined) {
    throw new Error('the report has no cluster-gateway and cluster-consumer rows with CPU figures: run `npm run bench -- --targets cluster-gateway,cluster-consumer`');
  }
  const nats = (processCost(gatewayRow, 'nats-server') ?? 0) + (processCost(consumerRow, 'nats-server') ?? 0);
  const storage = processCost(consumerRow, 'storage');
  return { gateway, consumer, nats, ...(storage !== undefined ? { storage } : {}), measured: `${report.date}, ${report.scenario}` };
}

export interface PlanOptions {
  spansPerSecond: number;
  /** The share of each core a role may use at the rate (default 0.6: room for bursts and a lost node). */
  utilisation?: number;
  /** Cores of one process of each role (default: gateway 2, consumer 1, nats-server 4). */
  coresPerProcess?: Partial<Record<'gateway' | 'consumer' | 'nats', number>>;
}

export interface RolePlan {
  role: string;
  cpuSecondsPerMillion: number;
  /** Cores busy at the rate, before headroom. */
  busyCores: number;
  /** Cores to provide: busy over utilisation. */
  cores: number;
  processes: number;
  coresPerProcess: number;
}

const DEFAULT_CORES = { gateway: 2, consumer: 1, nats: 4 };

/** The cores and processes of each role for the rate. */
export function capacityPlan(costs: RoleCosts, options: PlanOptions): RolePlan[] {
  const utilisation = options.utilisation ?? 0.6;
  if (!(options.spansPerSecond > 0)) throw new Error('the span rate must be above 0');
  if (!(utilisation > 0 && utilisation <= 1)) throw new Error('the utilisation must be above 0 and at most 1');
  const sizes = { ...DEFAULT_CORES, ...options.coresPerProcess };
  const plan = (role: keyof typeof DEFAULT_CORES, label: string, perMillion: number, minimum: number): RolePlan => {
    const busyCores = (options.spansPerSecond / 1e6) * perMillion;
    const cores = busyCores / utilisation;
    // At least two of a stateless role (one can go), and three NATS nodes (a JetStream quorum).
    const processes = Math.max(minimum, Math.ceil(cores / sizes[role]));
    return { role: label, cpuSecondsPerMillion: perMillion, busyCores, cores, processes, coresPerProcess: sizes[role] };
  };
  return [
    plan('gateway', 'gateway', costs.gateway, 2),
    plan('consumer', 'consumer', costs.consumer, 2),
    plan('nats', 'nats-server', costs.nats, 3),
  ];
}

/** The plan as the command prints it. */
export function formatPlan(costs: RoleCosts, options: PlanOptions, rows: RolePlan[]): string {
  const number = (value: number, digits = 1) => value.toLocaleString('en-US', { maximumFractionDigits: digits });
  const lines = [
    `Capacity for ${number(options.spansPerSecond, 0)} spans/s at ${Math.round((options.utilisation ?? 0.6) * 100)} % of each core (costs measured ${costs.measured}):`,
    '',
    '| role | CPU-s per million spans | busy cores | cores | processes × cores |',
    '|---|---:|---:|---:|---|',
    ...rows.map((row) => `| ${row.role} | ${number(row.cpuSecondsPerMillion, 2)} | ${number(row.busyCores)} | ${number(row.cores)} | ${row.processes} × ${row.coresPerProcess} |`),
    '',
    `Total: ${number(rows.reduce((sum, row) => sum + row.processes * row.coresPerProcess, 0), 0)} cores for Sluice and NATS.`,
    costs.storage !== undefined
      ? `Storage: the bench's stand-in used ${number(costs.storage, 2)} CPU-s per million spans; size a ClickHouse server from its own figures (docs/guides/capacity.md).`
      : 'Storage (ClickHouse) is not in the report: size it from its own figures (docs/guides/capacity.md).',
  ];
  return lines.join('\n');
}

/** The newest report of `dir` (bench/results) that has the cluster rows, or undefined. */
export function newestReport(dir: string): { path: string; report: BenchReport } | undefined {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith('.json')).sort().reverse();
  } catch {
    return undefined;
  }
  for (const name of names) {
    const report = JSON.parse(readFileSync(join(dir, name), 'utf8')) as BenchReport;
    try {
      costsOf(report);
      return { path: join(dir, name), report };
    } catch {
      // Another scenario, or no cluster rows: an older one may have them.
    }
  }
  return undefined;
}
