/**
 * The process's memory budget (SLUICE_MEMORY_BUDGET_MB) divided among what holds memory in it:
 * the front end's in-flight bytes, the worker threads' heaps, the embedded engine (chDB) and,
 * inside chDB's share, the query endpoint's per-query limit. An option set explicitly keeps its
 * value and the others share what is left; chDB, which has no option of its own, takes the rest.
 * A budget too small for the process to work is refused at start-up, naming what took it.
 *
 * The split is made once, from the configuration and what runs in the process (the role), and
 * the options it decides are written back into the configuration the process is built from, so
 * every part reads one set of values. A budget of 0 keeps each option's own default (no budget).
 *
 * The figures below were measured on the reference machine (2 cores, Node 20, chDB 3.4; see the
 * README's Memory section): a split is only as good as them, which is why core/memory-guard.ts
 * also watches the process's resident set and refuses work at the budget whatever the cause.
 */
import { totalmem } from 'node:os';
import { ConfigError, type SluiceConfig } from './config.ts';

const MiB = 1024 * 1024;

/** The least default budget: fits a machine of 1 GiB beside its OS. */
export const DEFAULT_BUDGET_MB = 768;
/** The largest default budget: past it a process takes what it needs (its own figures, not a share of the machine). */
const DEFAULT_BUDGET_MAX_MB = 4096;

/** The memory this process may have: the machine's, or its cgroup's limit (a container) where that is less. */
export function machineMemoryBytes(total = totalmem(), constrained = process.constrainedMemory?.() ?? 0): number {
  // Without a limit, the cgroup's "max" reads as 2^64 - 1 (or 0 outside a cgroup).
  return constrained > 0 && constrained < total ? constrained : total;
}

/**
 * The budget when SLUICE_MEMORY_BUDGET_MB is not set: a quarter of the machine's memory, at least
 * 768 MiB (a machine of 1 GiB) and at most 4 GiB. A fixed 768 MiB held `sluice serve` at a tenth
 * of its throughput at saturation on a machine of 24 GiB (docs/guides/operating.md#memory).
 */
export function defaultBudgetMb(machineBytes: number): number {
  return Math.min(DEFAULT_BUDGET_MAX_MB, Math.max(DEFAULT_BUDGET_MB, Math.floor(machineBytes / 4 / MiB)));
}

/**
 * Resident memory of a Sluice process before it does any work: Node, Sluice's code, the main
 * thread's heap, and the idle threads of the worker pool and the render pool. `sluice gateway`
 * with the relay measured 185 MiB right after start.
 */
export const PROCESS_BASE_BYTES = 192 * MiB;

/**
 * What the embedded engine adds before it does any work: libchdb's code pages (about 180 MiB of
 * the resident set are the library's, read from its file), the engine's threads and tables, and
 * the read threads. `sluice serve` measured 410–466 MiB right after start, `sluice consume` with
 * chDB 370.
 */
export const CHDB_BASE_BYTES = 256 * MiB;

/**
 * The least chDB's share may be. Idle, its tracker counted 36–44 MiB here (tables, marks); an
 * insert of the smallest batch and a merge beside it take about 55 and 85 more.
 */
export const MIN_CHDB_SHARE_BYTES = 128 * MiB;

/** The smallest and largest insert batch of the local log (bytes of rows per insert into chDB). */
const MIN_INSERT_BATCH_BYTES = 4 * MiB;
const MAX_INSERT_BATCH_BYTES = 64 * MiB;

/** Without a budget (SLUICE_MEMORY_BUDGET_MB=0) the options keep these defaults, those they had before the budget. */
export const UNBUDGETED = {
  maxInFlightBytes: 256 * MiB,
  workerHeapMb: 512,
  queryMaxMemoryBytes: 512 * MiB,
  insertBatchBytes: MAX_INSERT_BATCH_BYTES,
} as const;

/** Bounds of the shares an option left at 0 gets. */
const IN_FLIGHT_MAX_BYTES = 256 * MiB;
const WORKER_HEAP_MIN_MB = 32;
const WORKER_HEAP_MAX_MB = 512;
const QUERY_MIN_MEMORY_BYTES = 16 * MiB;

/** What runs in the process, by role (bin/app.ts says which). */
export interface ProcessParts {
  /** The embedded engine: `serve` and `consume` without CLICKHOUSE_URL. */
  chdb: boolean;
  /** The ingest front end and its worker pool: `serve`, `gateway`. */
  frontEnd: boolean;
  /** Threads of the relay's render pool (their heap limit is SLUICE_WORKER_HEAP_MB too); 0 where the relay does not run. */
  renderThreads: number;
}

/** chDB's engine settings that bound its memory (storage/chdb-engine.ts writes them for the engine). */
export interface ChdbMemoryLimits {
  /** max_server_memory_usage: every allocation of the engine past it fails (inserts are retried, queries fail with MEMORY_LIMIT_EXCEEDED). */
  maxServerMemoryBytes: number;
  /** merges_mutations_memory_usage_soft_limit: no new merge starts while merges hold more. */
  mergesSoftLimitBytes: number;
  /** mark_cache_size, index_mark_cache_size, primary_index_cache_size, query_condition_cache_size (ClickHouse's defaults are 5 GiB each but the last). */
  markCacheBytes: number;
  indexMarkCacheBytes: number;
  primaryIndexCacheBytes: number;
  queryConditionCacheBytes: number;
}

/** How the budget was divided; every figure in bytes. */
export interface MemoryPlan {
  /** 0: no budget. */
  budgetBytes: number;
  /** Set when the budget is the default grown to fit the process (its threads, options set explicitly): the default it grew from, in MiB. */
  grownFromMb?: number;
  baseBytes: number;
  inFlightBytes: number;
  /** Threads whose heap is limited (pool and render threads), and the limit of each. */
  workerThreads: number;
  workerHeapBytes: number;
  /** chDB's share of the resident set, and what it is told; undefined where chDB does not run or without a budget. */
  chdbBytes: number;
  chdb: ChdbMemoryLimits | undefined;
  /** The query endpoint's per-statement limit (inside chDB's share). */
  queryMaxMemoryBytes: number;
  /** Rows the local log inserts into chDB at most at once. */
  insertBatchBytes: number;
  /** The options that were set explicitly rather than from the budget. */
  explicit: ReadonlyArray<'limits.maxInFlightBytes' | 'pipeline.workerHeapMb' | 'query.maxMemoryBytes'>;
}

const mib = (bytes: number) => `${Math.round(bytes / MiB)} MiB`;
const clamp = (value: number, min: number, max: number) => Math.min(max, Math.max(min, value));

/**
 * Divides the budget for a process running `parts`; throws ConfigError naming every problem
 * when it does not fit. Options left at 0 get a share:
 *   in flight     an eighth of what the base leaves, at least two bodies, at most 256 MiB;
 *   worker heaps  a quarter of it across the threads, 32–512 MiB each;
 *   chDB          the rest (at least MIN_CHDB_SHARE_BYTES), its max_server_memory_usage, caches
 *                 and merges inside that; inserts of a 32nd of it at most (4–64 MiB);
 *   query limit   a quarter of chDB's limit per statement.
 * chDB's tracker counts what ClickHouse allocates, not what the allocator holds around it: in our
 * runs its resident memory went to 1.6–2.0 times the tracked peak. Telling it half its share
 * left it too little to insert at the default budget, so it is told its share, and the guard
 * (core/memory-guard.ts) holds the whole process to the budget.
 */
export function planMemory(config: Readonly<SluiceConfig>, parts: ProcessParts, machineBytes = machineMemoryBytes()): MemoryPlan {
  const explicit: MemoryPlan['explicit'][number][] = [];
  if (config.limits.maxInFlightBytes > 0) explicit.push('limits.maxInFlightBytes');
  if (config.pipeline.workerHeapMb > 0) explicit.push('pipeline.workerHeapMb');
  if (config.query.maxMemoryBytes > 0) explicit.push('query.maxMemoryBytes');
  const workerThreads = (parts.frontEnd ? config.pipeline.workers : 0) + parts.renderThreads;
  // The default is a starting point, not a promise made by the user: it grows to fit what they did set.
  const givenMb = config.memory.budgetMb;
  const defaultMb = defaultBudgetMb(machineBytes);
  const budgetMb = givenMb ?? leastBudgetMb(config, parts, defaultMb) ?? defaultMb;
  const grownFromMb = givenMb === undefined && budgetMb > defaultMb ? defaultMb : undefined;
  const budgetBytes = budgetMb * MiB;

  if (budgetBytes === 0) {
    return {
      budgetBytes: 0,
      baseBytes: 0,
      inFlightBytes: config.limits.maxInFlightBytes || UNBUDGETED.maxInFlightBytes,
      workerThreads,
      workerHeapBytes: (config.pipeline.workerHeapMb || UNBUDGETED.workerHeapMb) * MiB,
      chdbBytes: 0,
      chdb: undefined,
      queryMaxMemoryBytes: config.query.maxMemoryBytes || UNBUDGETED.queryMaxMemoryBytes,
      insertBatchBytes: UNBUDGETED.insertBatchBytes,
      explicit,
    };
  }

  const { baseBytes, inFlightBytes, workerHeapBytes, chdbBytes, fits } = split(config, parts, budgetBytes);
  const problems: string[] = [];
  if (!fits) {
    const spent = [`the base of the process (${mib(baseBytes)})`];
    if (inFlightBytes > 0) spent.push(`requests in flight (SLUICE_MAX_INFLIGHT_BYTES, ${mib(inFlightBytes)})`);
    if (workerThreads > 0) spent.push(`${workerThreads} worker threads × ${mib(workerHeapBytes)} of heap (SLUICE_WORKER_HEAP_MB)`);
    const why = parts.chdb
      ? `leaves the embedded engine (chDB) ${mib(Math.max(0, chdbBytes))} after ${spent.join(', ')}: it needs at least ${mib(MIN_CHDB_SHARE_BYTES)}`
      : `is less than ${spent.join(' + ')}`;
    const least = leastBudgetMb(config, parts);
    const remedy = least === undefined
      ? 'no budget fits the options set explicitly: lower them'
      : `this process needs at least ${least} MiB with these options`;
    problems.push(`memory.budgetMb (SLUICE_MEMORY_BUDGET_MB): ${budgetMb} MiB ${why}; ${remedy} (or 0 for no budget)`);
  }

  let chdb: ChdbMemoryLimits | undefined;
  let queryMaxMemoryBytes = config.query.maxMemoryBytes || UNBUDGETED.queryMaxMemoryBytes;
  let insertBatchBytes = UNBUDGETED.insertBatchBytes;
  if (parts.chdb && problems.length === 0) {
    const maxServerMemoryBytes = Math.floor(chdbBytes / MiB) * MiB;
    chdb = {
      maxServerMemoryBytes,
      mergesSoftLimitBytes: Math.floor(maxServerMemoryBytes / 2),
      markCacheBytes: Math.floor(maxServerMemoryBytes / 8),
      indexMarkCacheBytes: Math.floor(maxServerMemoryBytes / 16),
      primaryIndexCacheBytes: Math.floor(maxServerMemoryBytes / 16),
      queryConditionCacheBytes: Math.floor(maxServerMemoryBytes / 32),
    };
    queryMaxMemoryBytes = config.query.maxMemoryBytes || Math.max(QUERY_MIN_MEMORY_BYTES, Math.floor(maxServerMemoryBytes / 4 / MiB) * MiB);
    if (queryMaxMemoryBytes > maxServerMemoryBytes) {
      problems.push(`query.maxMemoryBytes (SLUICE_QUERY_MAX_MEMORY_BYTES): ${mib(queryMaxMemoryBytes)} per statement is more than the embedded engine may take in all under SLUICE_MEMORY_BUDGET_MB=${budgetMb} (${mib(maxServerMemoryBytes)})`);
    }
    // An insert's tracked peak was 38 MiB for 4 MiB of rows, 55 for 8.8 (storage/chdb-engine.ts): a 32nd leaves room for a merge beside it.
    insertBatchBytes = clamp(Math.floor(maxServerMemoryBytes / 32 / MiB) * MiB, MIN_INSERT_BATCH_BYTES, MAX_INSERT_BATCH_BYTES);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { budgetBytes, ...(grownFromMb ? { grownFromMb } : {}), baseBytes, inFlightBytes, workerThreads, workerHeapBytes, chdbBytes, chdb, queryMaxMemoryBytes, insertBatchBytes, explicit };
}

/** The configuration with the options the plan decided (those left at 0) filled in, frozen. */
export function withMemoryPlan(config: Readonly<SluiceConfig>, plan: MemoryPlan): Readonly<SluiceConfig> {
  const resolved: SluiceConfig = structuredClone(config) as SluiceConfig;
  resolved.limits.maxInFlightBytes = plan.inFlightBytes || config.limits.maxInFlightBytes || UNBUDGETED.maxInFlightBytes;
  resolved.pipeline.workerHeapMb = plan.workerHeapBytes / MiB;
  resolved.query.maxMemoryBytes = plan.queryMaxMemoryBytes;
  return deepFreeze(resolved);
}

/** The split as one object for the start-up log line, in MiB. */
export function describeMemoryPlan(plan: MemoryPlan): Record<string, number | string> {
  if (plan.budgetBytes === 0) return { budgetMb: 0 };
  const figures: Record<string, number | string> = {
    budgetMb: plan.budgetBytes / MiB,
    baseMb: plan.baseBytes / MiB,
  };
  if (plan.grownFromMb) figures.grownFromDefaultMb = plan.grownFromMb;
  if (plan.inFlightBytes > 0) figures.inFlightMb = Math.round(plan.inFlightBytes / MiB);
  if (plan.workerThreads > 0) figures.workers = `${plan.workerThreads} × ${plan.workerHeapBytes / MiB} MiB`;
  if (plan.chdb) {
    figures.chdbMb = Math.round(plan.chdbBytes / MiB);
    figures.chdbMaxServerMemoryMb = plan.chdb.maxServerMemoryBytes / MiB;
    figures.queryMaxMemoryMb = plan.queryMaxMemoryBytes / MiB;
    figures.insertBatchMb = plan.insertBatchBytes / MiB;
  }
  if (plan.explicit.length > 0) figures.explicit = plan.explicit.join(', ');
  return figures;
}

/** The split in one line for a person: `768 MiB: base 464, chDB 146 (its limit 73), in flight 40, 4 worker threads × 32`. */
export function memorySummary(plan: MemoryPlan): string {
  if (plan.budgetBytes === 0) return 'no budget (SLUICE_MEMORY_BUDGET_MB=0)';
  const parts = [`base ${Math.round(plan.baseBytes / MiB)}`];
  if (plan.chdb) parts.push(`chDB ${Math.round(plan.chdbBytes / MiB)} (its limit ${plan.chdb.maxServerMemoryBytes / MiB}, a query ${plan.queryMaxMemoryBytes / MiB})`);
  if (plan.inFlightBytes > 0) parts.push(`in flight ${Math.round(plan.inFlightBytes / MiB)}`);
  if (plan.workerThreads > 0) parts.push(`${plan.workerThreads} worker threads × ${plan.workerHeapBytes / MiB}`);
  return `${plan.budgetBytes / MiB} MiB: ${parts.join(', ')}`;
}

interface Split {
  baseBytes: number;
  inFlightBytes: number;
  workerHeapBytes: number;
  /** What is left for chDB (0 where it does not run; negative when the rest took more than the budget). */
  chdbBytes: number;
  fits: boolean;
  /** A per-query limit set explicitly is within chDB's share. */
  queryFits: boolean;
}

/** The shares of `budgetBytes` (see planMemory), explicit options as they are. */
function split(config: Readonly<SluiceConfig>, parts: ProcessParts, budgetBytes: number): Split {
  const workerThreads = (parts.frontEnd ? config.pipeline.workers : 0) + parts.renderThreads;
  const baseBytes = PROCESS_BASE_BYTES + (parts.chdb ? CHDB_BASE_BYTES : 0);
  const working = budgetBytes - baseBytes;
  const inFlightBytes = parts.frontEnd
    ? config.limits.maxInFlightBytes || clamp(Math.floor(working / 8 / MiB) * MiB, 2 * config.limits.maxBodyBytes, IN_FLIGHT_MAX_BYTES)
    : 0;
  const workerHeapMb = config.pipeline.workerHeapMb
    || (workerThreads === 0 ? WORKER_HEAP_MIN_MB : clamp(Math.floor(working / 4 / workerThreads / MiB), WORKER_HEAP_MIN_MB, WORKER_HEAP_MAX_MB));
  const workerHeapBytes = workerHeapMb * MiB;
  const left = working - inFlightBytes - workerThreads * workerHeapBytes;
  const chdbBytes = parts.chdb ? left : 0;
  const fits = parts.chdb ? chdbBytes >= MIN_CHDB_SHARE_BYTES : left >= 0;
  return { baseBytes, inFlightBytes, workerHeapBytes, chdbBytes, fits, queryFits: !parts.chdb || config.query.maxMemoryBytes <= chdbBytes };
}

/** The smallest budget (MiB) from `fromMb` on whose split fits, explicit options as they are; undefined if none does (up to 64 GiB). */
function leastBudgetMb(config: Readonly<SluiceConfig>, parts: ProcessParts, fromMb = 1): number | undefined {
  for (let mb = fromMb; mb <= 65_536; mb++) {
    const { fits, queryFits } = split(config, parts, mb * MiB);
    if (fits && queryFits) return mb;
  }
  return undefined;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
