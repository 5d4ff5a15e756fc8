/**
 * The limits every console query runs under, so that one user cannot starve storage: the engine
 * enforces them itself (ClickHouse settings in each statement's SETTINGS clause), and a query
 * that reaches one stops with a QueryLimitError the console shows as is (errors.ts).
 *
 * Besides the limits here, the queries bound themselves: time ranges of at most MAX_RANGE_DAYS,
 * LIMITs on every answer (schemas.ts), at most MAX_SERIES series per chart.
 */

export interface ConsoleQueryLimits {
  /** max_execution_time: seconds a statement may run. Default 15. */
  maxExecutionSeconds: number;
  /** max_rows_to_read: rows a statement may read from tables, subqueries included. Default 500 million. */
  maxRowsToRead: number;
  /** max_bytes_to_read: uncompressed bytes a statement may read. Default 64 GiB. */
  maxBytesToRead: number;
  /** max_result_rows: rows of an answer (ours stay far below it: at most 10,001). Default 100,000. */
  maxResultRows: number;
  /** max_result_bytes: uncompressed bytes of an answer. Default 256 MiB. */
  maxResultBytes: number;
  /** max_memory_usage: bytes of memory a statement may use. Default 4 GiB. */
  maxMemoryBytes: number;
  /** max_threads: threads a statement may use; 0 leaves the engine's default (the cores). Default 0. */
  maxThreads: number;
}

export const DEFAULT_LIMITS: Readonly<ConsoleQueryLimits> = Object.freeze({
  maxExecutionSeconds: 15,
  maxRowsToRead: 500_000_000,
  maxBytesToRead: 64 * 1024 ** 3,
  maxResultRows: 100_000,
  maxResultBytes: 256 * 1024 ** 2,
  maxMemoryBytes: 4 * 1024 ** 3,
  maxThreads: 0,
});

/** The longest time range of one query, in days. */
export const MAX_RANGE_DAYS = 31;
/** The most series a metric query answers (the busiest ones); MetricResult.truncated says when more matched. */
export const MAX_SERIES = 50;
/** The most points of one series. */
export const MAX_POINTS = 500;
/** The most spans of one trace view; TraceView.truncated says when the trace has more. */
export const MAX_TRACE_SPANS = 10_000;
/** How long an agent may go without a heartbeat before it is shown as stale. */
export const STALE_AFTER_MS = 5 * 60_000;

/** The limits with defaults filled in; refuses values the engine would read as "no limit" or cannot take. */
export function resolveLimits(limits: Partial<ConsoleQueryLimits> = {}): Readonly<ConsoleQueryLimits> {
  const resolved = { ...DEFAULT_LIMITS, ...limits };
  const problems: string[] = [];
  for (const [name, value] of Object.entries(resolved) as Array<[keyof ConsoleQueryLimits, number]>) {
    // 0 means "unlimited" to ClickHouse: only max_threads may be 0 (the engine's default).
    const least = name === 'maxThreads' ? 0 : name === 'maxExecutionSeconds' ? 0.001 : 1;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < least) problems.push(`${name}: must be a number >= ${least}`);
    else if (name !== 'maxExecutionSeconds' && !Number.isSafeInteger(value)) problems.push(`${name}: must be a whole number`);
  }
  if (problems.length > 0) throw new Error(`invalid console query limits: ${problems.join('; ')}`);
  return Object.freeze(resolved);
}

/**
 * The SETTINGS clause (without the keyword) of every statement. readonly = 1 first: the engine
 * then refuses anything but reading, whatever the statement says. Every overflow mode is
 * `throw`: a cut answer would look complete. 64-bit integers are quoted in JSON so that
 * nanosecond times and durations stay exact.
 */
export function settingsClause(limits: Readonly<ConsoleQueryLimits>): string {
  const settings: Array<[string, string | number]> = [
    ['readonly', 1],
    ['max_execution_time', limits.maxExecutionSeconds],
    ['timeout_overflow_mode', "'throw'"],
    ['max_rows_to_read', limits.maxRowsToRead],
    ['max_bytes_to_read', limits.maxBytesToRead],
    ['read_overflow_mode', "'throw'"],
    ['max_result_rows', limits.maxResultRows],
    ['max_result_bytes', limits.maxResultBytes],
    ['result_overflow_mode', "'throw'"],
    ['max_memory_usage', limits.maxMemoryBytes],
    ['output_format_json_quote_64bit_integers', 1],
  ];
  if (limits.maxThreads > 0) settings.push(['max_threads', limits.maxThreads]);
  return settings.map(([name, value]) => `${name} = ${value}`).join(', ');
}
