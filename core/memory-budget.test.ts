/**
 * The memory budget's split: what each part gets from SLUICE_MEMORY_BUDGET_MB by role, explicit
 * options keeping their value, and a budget too small refused with every reason.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';
import { CHDB_BASE_BYTES, defaultBudgetMb, machineMemoryBytes, memorySummary, MIN_CHDB_SHARE_BYTES, planMemory, PROCESS_BASE_BYTES, UNBUDGETED, withMemoryPlan, type ProcessParts } from './memory-budget.ts';

const MiB = 1024 * 1024;
/** `sluice serve` on the embedded default with two pool threads: chDB, the front end, the relay's two render threads. */
const SERVE: ProcessParts = { chdb: true, frontEnd: true, renderThreads: 2 };
const GATEWAY: ProcessParts = { chdb: false, frontEnd: true, renderThreads: 0 };

const config = (env: Record<string, string> = {}) => loadConfig({ SLUICE_WORKERS: '2', ...env });
/** The split on a machine of 1 GiB, where the default budget is its least, 768 MiB. */
const planAt1GiB = (given: ReturnType<typeof config>, parts: ProcessParts) => planMemory(given, parts, 1024 * MiB);

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('no ConfigError');
}

describe('planMemory', () => {
  it('divides the default budget of `sluice serve` among in-flight bytes, worker heaps and chDB, nothing left over', () => {
    const plan = planAt1GiB(config(), SERVE);
    expect(plan.budgetBytes).toBe(768 * MiB);
    expect(plan.baseBytes).toBe(PROCESS_BASE_BYTES + CHDB_BASE_BYTES);
    expect(plan.workerThreads).toBe(4);
    expect(plan.baseBytes + plan.inFlightBytes + plan.workerThreads * plan.workerHeapBytes + plan.chdbBytes).toBe(plan.budgetBytes);
    // An eighth of what the base leaves, and at least two 10 MiB bodies.
    expect(plan.inFlightBytes).toBe(Math.floor((768 * MiB - plan.baseBytes) / 8 / MiB) * MiB);
    expect(plan.inFlightBytes).toBeGreaterThanOrEqual(20 * MiB);
    expect(plan.workerHeapBytes).toBe(32 * MiB);
    expect(plan.chdbBytes).toBeGreaterThanOrEqual(MIN_CHDB_SHARE_BYTES);
    // chDB is told its share; its caches and merges are parts of it, a query a quarter.
    const chdb = plan.chdb!;
    expect(chdb.maxServerMemoryBytes).toBe(plan.chdbBytes);
    expect(chdb.markCacheBytes + chdb.indexMarkCacheBytes + chdb.primaryIndexCacheBytes + chdb.queryConditionCacheBytes).toBeLessThan(chdb.maxServerMemoryBytes / 2);
    expect(chdb.mergesSoftLimitBytes).toBe(Math.floor(chdb.maxServerMemoryBytes / 2));
    expect(plan.queryMaxMemoryBytes).toBe(Math.floor(chdb.maxServerMemoryBytes / 4 / MiB) * MiB);
    expect(plan.insertBatchBytes).toBeGreaterThanOrEqual(4 * MiB);
    expect(plan.insertBatchBytes).toBeLessThanOrEqual(chdb.maxServerMemoryBytes / 16);
    expect(plan.explicit).toEqual([]);
  });

  it('grows the default budget to the least that fits the process, never one set explicitly', () => {
    // A serve of test/fatal-processes: 2 pool and 2 render threads of 64 MiB each leave chDB too little of 768.
    const heavy = { SLUICE_WORKER_HEAP_MB: '64' };
    const grown = planAt1GiB(config(heavy), SERVE);
    expect(grown.grownFromMb).toBe(768);
    expect(grown.budgetBytes).toBeGreaterThan(768 * MiB);
    expect(grown.chdbBytes).toBe(MIN_CHDB_SHARE_BYTES);
    expect(grown.baseBytes + grown.inFlightBytes + 4 * 64 * MiB + grown.chdbBytes).toBe(grown.budgetBytes);
    expect(memorySummary(grown)).toMatch(/^\d+ MiB: /);
    // Many cores: one thread each.
    expect(planAt1GiB(config({ SLUICE_WORKERS: '32' }), SERVE).grownFromMb).toBe(768);
    // A per-query limit over what the default leaves chDB grows it too.
    const query = planAt1GiB(config({ SLUICE_QUERY_MAX_MEMORY_BYTES: String(1024 * MiB) }), SERVE);
    expect(query.chdb!.maxServerMemoryBytes).toBeGreaterThanOrEqual(1024 * MiB);
    // The default where it fits; an explicit budget is the user's and is refused instead.
    expect(planAt1GiB(config(), SERVE).grownFromMb).toBeUndefined();
    expect(problemsOf(() => planAt1GiB(config({ ...heavy, SLUICE_MEMORY_BUDGET_MB: '768' }), SERVE))[0]).toMatch(/^memory\.budgetMb \(SLUICE_MEMORY_BUDGET_MB\): 768 MiB leaves the embedded engine/);
  });

  it('gives a larger budget to chDB mostly, the in-flight bytes up to 256 MiB and the heaps up to 512 MiB', () => {
    const small = planAt1GiB(config(), SERVE);
    const large = planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: '8192' }), SERVE);
    expect(large.inFlightBytes).toBe(256 * MiB);
    expect(large.workerHeapBytes).toBe(Math.floor((8192 * MiB - large.baseBytes) / 4 / 4 / MiB) * MiB);
    expect(large.chdb!.maxServerMemoryBytes).toBeGreaterThan(10 * small.chdb!.maxServerMemoryBytes);
    expect(large.insertBatchBytes).toBe(64 * MiB);
  });

  it('keeps options set explicitly; chDB gets what they leave', () => {
    const plan = planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: '1024', SLUICE_MAX_INFLIGHT_BYTES: String(100 * MiB), SLUICE_WORKER_HEAP_MB: '40' }), SERVE);
    expect(plan.inFlightBytes).toBe(100 * MiB);
    expect(plan.workerHeapBytes).toBe(40 * MiB);
    expect(plan.chdbBytes).toBe(1024 * MiB - plan.baseBytes - 100 * MiB - 4 * 40 * MiB);
    expect(plan.explicit).toEqual(['limits.maxInFlightBytes', 'pipeline.workerHeapMb']);
    const query = planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: '1024', SLUICE_QUERY_MAX_MEMORY_BYTES: String(20 * MiB) }), SERVE);
    expect(query.queryMaxMemoryBytes).toBe(20 * MiB);
  });

  it('writes the shares into the configuration the process is built from, and the explicit values unchanged', () => {
    const given = config({ SLUICE_MEMORY_BUDGET_MB: '1024', SLUICE_WORKER_HEAP_MB: '48' });
    const plan = planAt1GiB(given, SERVE);
    const resolved = withMemoryPlan(given, plan);
    expect(resolved.limits.maxInFlightBytes).toBe(plan.inFlightBytes);
    expect(resolved.pipeline.workerHeapMb).toBe(48);
    expect(resolved.query.maxMemoryBytes).toBe(plan.queryMaxMemoryBytes);
    expect(Object.isFrozen(resolved.limits)).toBe(true);
    expect(given.limits.maxInFlightBytes).toBe(0);
  });

  it('refuses a budget too small to run, saying what took it and the least that runs', () => {
    const problems = problemsOf(() => planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: '600' }), SERVE));
    expect(problems).toHaveLength(1);
    const [, least] = /this process needs at least (\d+) MiB with these options \(or 0 for no budget\)$/.exec(problems[0]!) ?? [];
    expect(problems[0]).toMatch(/^memory\.budgetMb \(SLUICE_MEMORY_BUDGET_MB\): 600 MiB leaves the embedded engine \(chDB\) \d+ MiB after the base of the process \(448 MiB\), requests in flight \(SLUICE_MAX_INFLIGHT_BYTES, 20 MiB\), 4 worker threads × 32 MiB of heap \(SLUICE_WORKER_HEAP_MB\): it needs at least 128 MiB; /);
    // The least it names runs, and one MiB less does not.
    expect(() => planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: least! }), SERVE)).not.toThrow();
    expect(() => planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: String(Number(least) - 1) }), SERVE)).toThrow(ConfigError);
    expect(Number(least)).toBeGreaterThan(600);
    expect(Number(least)).toBeLessThanOrEqual(768);
  });

  it('refuses explicit options that leave chDB too little of a budget set explicitly, naming them', () => {
    const problems = problemsOf(() => planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: '768', SLUICE_MAX_INFLIGHT_BYTES: String(256 * MiB) }), SERVE));
    expect(problems[0]).toContain('requests in flight (SLUICE_MAX_INFLIGHT_BYTES, 256 MiB)');
    expect(problems[0]).toMatch(/this process needs at least \d+ MiB with these options/);
    const heaps = problemsOf(() => planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: '768', SLUICE_WORKER_HEAP_MB: '512' }), SERVE));
    expect(heaps[0]).toContain('4 worker threads × 512 MiB of heap (SLUICE_WORKER_HEAP_MB)');
  });

  it('refuses a per-query limit more than the engine may take in all of a budget set explicitly', () => {
    const problems = problemsOf(() => planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: '768', SLUICE_QUERY_MAX_MEMORY_BYTES: String(512 * MiB) }), SERVE));
    expect(problems).toEqual([expect.stringMatching(/^query\.maxMemoryBytes \(SLUICE_QUERY_MAX_MEMORY_BYTES\): 512 MiB per statement is more than the embedded engine may take in all under SLUICE_MEMORY_BUDGET_MB=768 \(\d+ MiB\)$/)]);
  });

  it('gives a process without chDB no engine share, and checks only what it runs', () => {
    const plan = planAt1GiB(config(), GATEWAY);
    expect(plan.baseBytes).toBe(PROCESS_BASE_BYTES);
    expect(plan.workerThreads).toBe(2);
    expect(plan.chdb).toBeUndefined();
    expect(plan.chdbBytes).toBe(0);
    // Too small even for a gateway.
    const problems = problemsOf(() => planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: '200' }), GATEWAY));
    expect(problems[0]).toBe('memory.budgetMb (SLUICE_MEMORY_BUDGET_MB): 200 MiB is less than the base of the process (192 MiB) + requests in flight (SLUICE_MAX_INFLIGHT_BYTES, 20 MiB) + 2 worker threads × 32 MiB of heap (SLUICE_WORKER_HEAP_MB); this process needs at least 276 MiB with these options (or 0 for no budget)');
  });

  it('without a budget keeps the options\' own defaults and leaves chDB its own', () => {
    const plan = planAt1GiB(config({ SLUICE_MEMORY_BUDGET_MB: '0' }), SERVE);
    expect(plan).toMatchObject({ budgetBytes: 0, chdb: undefined, inFlightBytes: UNBUDGETED.maxInFlightBytes, workerHeapBytes: UNBUDGETED.workerHeapMb * MiB, queryMaxMemoryBytes: UNBUDGETED.queryMaxMemoryBytes, insertBatchBytes: 64 * MiB });
    expect(memorySummary(plan)).toBe('no budget (SLUICE_MEMORY_BUDGET_MB=0)');
  });

  it('says the split in one line', () => {
    const plan = planAt1GiB(config(), SERVE);
    expect(memorySummary(plan)).toBe(
      `768 MiB: base 448, chDB ${plan.chdbBytes / MiB} (its limit ${plan.chdb!.maxServerMemoryBytes / MiB}, a query ${plan.queryMaxMemoryBytes / MiB}), in flight ${plan.inFlightBytes / MiB}, 4 worker threads × 32`,
    );
  });
});

describe('the default budget', () => {
  it('is a quarter of the machine\'s memory, at least 768 MiB and at most 4 GiB', () => {
    expect([1, 2, 4, 8, 24, 64].map((gib) => defaultBudgetMb(gib * 1024 * MiB))).toEqual([768, 768, 1024, 2048, 4096, 4096]);
    expect(planMemory(config(), SERVE, 24 * 1024 * MiB).budgetBytes).toBe(4096 * MiB);
    expect(planMemory(config(), SERVE, 4 * 1024 * MiB).budgetBytes).toBe(1024 * MiB);
    // A budget set explicitly is the one used, whatever the machine.
    expect(planMemory(config({ SLUICE_MEMORY_BUDGET_MB: '900' }), SERVE, 24 * 1024 * MiB).budgetBytes).toBe(900 * MiB);
  });

  it('takes the machine\'s memory, or the container\'s limit where that is less', () => {
    const GiB = 1024 * MiB;
    expect(machineMemoryBytes(24 * GiB, 1 * GiB)).toBe(1 * GiB);
    expect(machineMemoryBytes(24 * GiB, 2 ** 64 - 1)).toBe(24 * GiB); // cgroup v2 "max"
    expect(machineMemoryBytes(24 * GiB, 0)).toBe(24 * GiB);
    expect(defaultBudgetMb(machineMemoryBytes(64 * GiB, 1 * GiB))).toBe(768);
  });
});

describe('the options a budget shares', () => {
  it('take 0 (a share) or a value over their floor', () => {
    expect(loadConfig({}).limits.maxInFlightBytes).toBe(0);
    expect(loadConfig({}).pipeline.workerHeapMb).toBe(0);
    expect(loadConfig({}).query.maxMemoryBytes).toBe(0);
    expect(loadConfig({}).memory.budgetMb).toBeUndefined();
    const problems = problemsOf(() => loadConfig({ SLUICE_MAX_INFLIGHT_BYTES: '1000', SLUICE_WORKER_HEAP_MB: '16', SLUICE_QUERY_MAX_MEMORY_BYTES: '1024', SLUICE_MEMORY_BUDGET_MB: '-1' }));
    expect(problems).toEqual(expect.arrayContaining([
      'limits.maxInFlightBytes (SLUICE_MAX_INFLIGHT_BYTES): must be 0 (a share of the memory budget) or >= 1048576',
      'pipeline.workerHeapMb (SLUICE_WORKER_HEAP_MB): must be 0 (a share of the memory budget) or >= 32',
      'query.maxMemoryBytes (SLUICE_QUERY_MAX_MEMORY_BYTES): must be 0 (a share of the memory budget) or >= 16777216',
      'memory.budgetMb (SLUICE_MEMORY_BUDGET_MB): must be >= 0',
    ]));
  });
});
