/**
 * The limits a read of storage runs under, so that one user cannot starve storage (nor, on the
 * embedded default, the inserts beside it): the engine enforces them itself, from the SETTINGS
 * clause of each statement, and a statement that reaches one stops with an error saying which.
 * The console's queries (console/queries/) and the relay's listings (submissions, delivery
 * jobs) run under them; both answer a limit reached with 422 and what to narrow.
 */
import { ApiError } from '../core/errors.ts';
import { clickhouseException } from './errors.ts';
import { queryRows, type Storage } from './storage.ts';

export interface StatementLimits {
  /** max_execution_time: seconds a statement may run. Default 15. */
  maxExecutionSeconds: number;
  /** max_rows_to_read: rows a statement may read from tables, subqueries included. Default 500 million. */
  maxRowsToRead: number;
  /** max_bytes_to_read: uncompressed bytes a statement may read. Default 64 GiB. */
  maxBytesToRead: number;
  /** max_result_rows: rows of an answer. Default 100,000. */
  maxResultRows: number;
  /** max_result_bytes: uncompressed bytes of an answer. Default 256 MiB. */
  maxResultBytes: number;
  /** max_memory_usage: bytes of memory a statement may use. Default 4 GiB. */
  maxMemoryBytes: number;
  /** max_threads: threads a statement may use; 0 leaves the engine's default (the cores). Default 0. */
  maxThreads: number;
}

export const DEFAULT_STATEMENT_LIMITS: Readonly<StatementLimits> = Object.freeze({
  maxExecutionSeconds: 15,
  maxRowsToRead: 500_000_000,
  maxBytesToRead: 64 * 1024 ** 3,
  maxResultRows: 100_000,
  maxResultBytes: 256 * 1024 ** 2,
  maxMemoryBytes: 4 * 1024 ** 3,
  maxThreads: 0,
});

/** The limits with defaults filled in; refuses values the engine would read as "no limit" or cannot take. */
export function resolveStatementLimits(limits: Partial<StatementLimits> = {}): Readonly<StatementLimits> {
  const resolved = { ...DEFAULT_STATEMENT_LIMITS, ...limits };
  const problems: string[] = [];
  for (const [name, value] of Object.entries(resolved) as Array<[keyof StatementLimits, number]>) {
    // 0 means "unlimited" to ClickHouse: only max_threads may be 0 (the engine's default).
    const least = name === 'maxThreads' ? 0 : name === 'maxExecutionSeconds' ? 0.001 : 1;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < least) problems.push(`${name}: must be a number >= ${least}`);
    else if (name !== 'maxExecutionSeconds' && !Number.isSafeInteger(value)) problems.push(`${name}: must be a whole number`);
  }
  if (problems.length > 0) throw new Error(`invalid query limits: ${problems.join('; ')}`);
  return Object.freeze(resolved);
}

/**
 * The limits as settings of a SETTINGS clause (without the keyword). readonly = 1 first: the
 * engine then refuses anything but reading, whatever the statement says. Every overflow mode is
 * `throw`: a cut answer would look complete.
 */
export function statementLimitSettings(limits: Readonly<StatementLimits>): string {
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
  ];
  if (limits.maxThreads > 0) settings.push(['max_threads', limits.maxThreads]);
  return settings.map(([name, value]) => `${name} = ${value}`).join(', ');
}

/** Which limit a statement reached. */
export type StatementLimit = 'time' | 'rows_read' | 'bytes_read' | 'result' | 'memory';

/** ClickHouse's codes for a limit reached (src/Common/ErrorCodes.cpp), by the limit. */
const LIMIT_CODES = new Map<number, StatementLimit>([
  [159, 'time'], // TIMEOUT_EXCEEDED
  [160, 'time'], // TOO_SLOW (the estimate of min_execution_speed)
  [158, 'rows_read'], // TOO_MANY_ROWS
  [307, 'bytes_read'], // TOO_MANY_BYTES
  [396, 'result'], // TOO_MANY_ROWS_OR_BYTES
  [241, 'memory'], // MEMORY_LIMIT_EXCEEDED
]);

/** The limit a failed statement reached, or undefined when it failed for another reason. */
export function statementLimitReached(err: unknown): StatementLimit | undefined {
  const exception = clickhouseException(err);
  const limit = exception && LIMIT_CODES.get(exception.code);
  // Old servers report the result limit as TOO_MANY_ROWS too: the text tells them apart.
  return limit === 'rows_read' && /limit for result/i.test(exception!.text) ? 'result' : limit;
}

/**
 * What the person who asked reads when `limit` stopped their `what` ("query", "search"): which
 * limit, with its value, and `advice` on what to narrow.
 */
export function statementLimitMessage(limit: StatementLimit, limits: Readonly<StatementLimits>, what: string, advice: string): string {
  const count = (n: number) => n.toLocaleString('en-US');
  const messages: Record<StatementLimit, string> = {
    time: `The ${what} ran longer than ${limits.maxExecutionSeconds} s, the limit, and was stopped.`,
    rows_read: `The ${what} would read more than ${count(limits.maxRowsToRead)} rows, the limit, and was stopped.`,
    bytes_read: `The ${what} would read more than ${gib(limits.maxBytesToRead)} of data, the limit, and was stopped.`,
    result: `The answer would be larger than the limit (${count(limits.maxResultRows)} rows, ${gib(limits.maxResultBytes)}).`,
    memory: `The ${what} needed more than ${gib(limits.maxMemoryBytes)} of memory, the limit, and was stopped.`,
  };
  return `${messages[limit]} ${advice}`;
}

/** A read stopped by a limit: 422, the request was valid but asks too much of storage. */
export class StatementLimitError extends ApiError {
  constructor(readonly limit: StatementLimit, message: string, cause: unknown) {
    super(422, message);
    this.name = 'StatementLimitError';
    this.cause = cause;
  }
}

/**
 * The rows of `sql` (a statement with no SETTINGS or FORMAT clause of its own) run under
 * `limits`; a limit reached is a StatementLimitError with `what` and `advice` in its message.
 */
export async function limitedRows<T>(storage: Storage, sql: string, limits: Readonly<StatementLimits>, what: string, advice: string): Promise<T[]> {
  try {
    return await queryRows<T>(storage, `${sql}\nSETTINGS ${statementLimitSettings(limits)}`);
  } catch (err) {
    const limit = statementLimitReached(err);
    throw limit ? new StatementLimitError(limit, statementLimitMessage(limit, limits, what, advice), err) : err;
  }
}

function gib(bytes: number): string {
  if (bytes >= 1024 ** 3) return `${+(bytes / 1024 ** 3).toFixed(1)} GiB`;
  return bytes >= 1024 ** 2 ? `${+(bytes / 1024 ** 2).toFixed(1)} MiB` : `${bytes.toLocaleString('en-US')} bytes`;
}
