/**
 * The limits every console query runs under, so that one user cannot starve storage: the engine
 * enforces them itself (ClickHouse settings in each statement's SETTINGS clause), and a query
 * that reaches one stops with a QueryLimitError the console shows as is (errors.ts).
 *
 * Besides the limits here, the queries bound themselves: time ranges of at most MAX_RANGE_DAYS,
 * LIMITs on every answer (schemas.ts), at most MAX_SERIES series per chart.
 */
import { DEFAULT_STATEMENT_LIMITS, resolveStatementLimits, statementLimitSettings, type StatementLimits } from '../../storage/statement-limits.ts';

/** The limits of one statement (storage/statement-limits.ts), shared with the relay's listings. */
export type ConsoleQueryLimits = StatementLimits;

export const DEFAULT_LIMITS: Readonly<ConsoleQueryLimits> = DEFAULT_STATEMENT_LIMITS;
export const resolveLimits: (limits?: Partial<ConsoleQueryLimits>) => Readonly<ConsoleQueryLimits> = resolveStatementLimits;

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

/**
 * The SETTINGS clause (without the keyword) of every statement: the limits, and 64-bit integers
 * quoted in JSON so that nanosecond times and durations stay exact.
 */
export function settingsClause(limits: Readonly<ConsoleQueryLimits>): string {
  return `${statementLimitSettings(limits)}, output_format_json_quote_64bit_integers = 1`;
}
