/**
 * The embedded engine's memory settings: chDB reads them from a configuration file of ClickHouse's
 * (`--config-file`, given to the Session that starts the engine), written into the engine dir at
 * each start from the memory budget's split (core/memory-budget.ts). Every Session on the engine
 * dir is opened with the same argument, though only the first one's counts: chDB starts the
 * engine once per process (again only after every Session was closed) and ignores the
 * arguments of later Sessions (tried with chDB 3.4: a second Session with another
 * max_server_memory_usage saw the first one's).
 *
 * What chDB 3.4 honours, tried here (system.server_settings and system.merge_tree_settings show it):
 *   - max_server_memory_usage, on the command line or in the file: past it every allocation of
 *     the engine fails with MEMORY_LIMIT_EXCEEDED (241): an insert (retried by the local log), a
 *     query, a merge. It counts what ClickHouse allocates, not the resident set: chDB's memory
 *     worker cannot read it here (no jemalloc in libchdb, no cgroup), so
 *     memory_worker_correct_memory_tracker changes nothing.
 *   - cache sizes (mark, index mark, primary index, query condition caches are 5 GiB, 5 GiB,
 *     5 GiB and 100 MiB by default) and merges_mutations_memory_usage_soft_limit.
 *   - MergeTree settings only from the file (<merge_tree>): the command line's
 *     --merge_tree.x and a query's SETTINGS do not reach inserts and merges.
 *
 * Measured with the bench's spans (100 spans of 20 attributes a request): an insert's tracked
 * peak was 38 MiB for 4 MiB of rows, 170 for 8.8 MiB, 252 for 33 and 366 for 64. The step at
 * ~10 MiB is the wide part (min_bytes_for_wide_part): a write buffer of max_compress_block_size
 * (1 MiB) for each of otel_traces' ~100 column streams. At 128 KiB the 8.8 MiB insert took
 * 55 MiB and the 64 MiB one 251. merge_max_block_size 1024 (8192 by default) took a merge of ten
 * 15,000-span parts from 107–116 MiB to 84–86 (two runs each), in no more time.
 */
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ChdbMemoryLimits } from '../core/memory-budget.ts';

/** The file in the engine dir (Sluice's own, rewritten at each start). */
export const ENGINE_CONFIG_FILE = 'sluice-engine.xml';

/** Bytes per compressed block of a column written by inserts and merges (ClickHouse: 1 MiB). */
const MAX_COMPRESS_BLOCK_BYTES = 128 * 1024;
/** Merges at once (chDB: 2 threads here, each taking two merges), so their memory stays that of one. */
const MERGE_THREADS = 1;
/** Rows per block a merge reads from each part (ClickHouse: 8192). */
const MERGE_MAX_BLOCK_ROWS = 1024;

/** ClickHouse's configuration file for these limits. */
export function engineConfigXml(limits: ChdbMemoryLimits): string {
  return [
    '<!-- Written by Sluice at each start from SLUICE_MEMORY_BUDGET_MB (storage/chdb-engine.ts); changes here are overwritten. -->',
    '<clickhouse>',
    `  <max_server_memory_usage>${limits.maxServerMemoryBytes}</max_server_memory_usage>`,
    `  <merges_mutations_memory_usage_soft_limit>${limits.mergesSoftLimitBytes}</merges_mutations_memory_usage_soft_limit>`,
    `  <mark_cache_size>${limits.markCacheBytes}</mark_cache_size>`,
    `  <index_mark_cache_size>${limits.indexMarkCacheBytes}</index_mark_cache_size>`,
    `  <primary_index_cache_size>${limits.primaryIndexCacheBytes}</primary_index_cache_size>`,
    `  <query_condition_cache_size>${limits.queryConditionCacheBytes}</query_condition_cache_size>`,
    '  <uncompressed_cache_size>0</uncompressed_cache_size>',
    `  <background_pool_size>${MERGE_THREADS}</background_pool_size>`,
    '  <background_merges_mutations_concurrency_ratio>1</background_merges_mutations_concurrency_ratio>',
    '  <merge_tree>',
    `    <max_compress_block_size>${MAX_COMPRESS_BLOCK_BYTES}</max_compress_block_size>`,
    `    <merge_max_block_size>${MERGE_MAX_BLOCK_ROWS}</merge_max_block_size>`,
    '  </merge_tree>',
    '</clickhouse>',
    '',
  ].join('\n');
}

/** The Session arguments that give the engine these limits (none without limits: chDB's defaults). */
export function engineArgs(engineDir: string, limits: ChdbMemoryLimits | undefined): string[] {
  return limits ? [`--config-file=${join(engineDir, ENGINE_CONFIG_FILE)}`] : [];
}

/** Writes the file engineArgs() names (whole or not at all: a rename), before the first Session. */
export async function writeEngineConfig(engineDir: string, limits: ChdbMemoryLimits | undefined): Promise<void> {
  if (!limits) return;
  const file = join(engineDir, ENGINE_CONFIG_FILE);
  await writeFile(`${file}.tmp`, engineConfigXml(limits), { mode: 0o600 });
  await rename(`${file}.tmp`, file);
}
