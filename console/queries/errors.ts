/**
 * Errors of the console's queries. Each carries the HTTP status the console answers with and a
 * message written for the person at the console (ApiError: `{message, statusCode}`):
 *
 *   QueryValidationError  400: the query body breaks a rule (schemas.ts), naming the field;
 *   QueryLimitError       422: the query was valid but reached a limit of config.ts (time,
 *                         rows or bytes read, answer size, memory) and was stopped.
 *
 * Anything else the engine reports is not the user's to fix (storage down, or a bug in our SQL)
 * and is thrown as it came: the console answers it as a server error.
 */
import { ApiError, type HttpStatus } from '../../core/errors.ts';
import { clickhouseException } from '../../storage/errors.ts';
import type { ConsoleQueryLimits } from './config.ts';

export class ConsoleQueryError extends ApiError {
  constructor(statusCode: HttpStatus, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(statusCode, message, options?.details);
    this.name = 'ConsoleQueryError';
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

export class QueryValidationError extends ConsoleQueryError {
  /** The field at fault, as a JSON author reads it (`attributes[2].key`), or `body`. */
  readonly field: string;

  constructor(field: string, problem: string) {
    super(400, `${field} ${problem}`, { details: { field } });
    this.name = 'QueryValidationError';
    this.field = field;
  }
}

/** Which limit a query reached. */
export type QueryLimit = 'time' | 'rows_read' | 'bytes_read' | 'result' | 'memory';

export class QueryLimitError extends ConsoleQueryError {
  constructor(readonly limit: QueryLimit, message: string, cause: unknown) {
    super(422, message, { cause });
    this.name = 'QueryLimitError';
  }
}

/** ClickHouse's codes for a limit reached (src/Common/ErrorCodes.cpp), by the limit. */
const LIMIT_CODES = new Map<number, QueryLimit>([
  [159, 'time'], // TIMEOUT_EXCEEDED
  [160, 'time'], // TOO_SLOW (the estimate of min_execution_speed)
  [158, 'rows_read'], // TOO_MANY_ROWS
  [307, 'bytes_read'], // TOO_MANY_BYTES
  [396, 'result'], // TOO_MANY_ROWS_OR_BYTES
  [241, 'memory'], // MEMORY_LIMIT_EXCEEDED
]);

const NARROW = 'Narrow the time range or add filters, then try again.';

/**
 * A failed statement as a QueryLimitError when it reached one of the limits, else the error as
 * it came. The message says which limit, with its value, and what to do.
 */
export function queryError(err: unknown, limits: Readonly<ConsoleQueryLimits>): unknown {
  const exception = clickhouseException(err);
  const limit = exception && LIMIT_CODES.get(exception.code);
  if (!limit) return err;
  // Old servers report the result limit as TOO_MANY_ROWS too: the text tells them apart.
  const kind = limit === 'rows_read' && /limit for result/i.test(exception.text) ? 'result' : limit;
  const count = (n: number) => n.toLocaleString('en-US');
  const messages: Record<QueryLimit, string> = {
    time: `The query ran longer than ${limits.maxExecutionSeconds} s, the limit, and was stopped. ${NARROW}`,
    rows_read: `The query would read more than ${count(limits.maxRowsToRead)} rows, the limit, and was stopped. ${NARROW}`,
    bytes_read: `The query would read more than ${gib(limits.maxBytesToRead)} of data, the limit, and was stopped. ${NARROW}`,
    result: `The answer would be larger than the limit (${count(limits.maxResultRows)} rows, ${gib(limits.maxResultBytes)}). ${NARROW}`,
    memory: `The query needed more than ${gib(limits.maxMemoryBytes)} of memory, the limit, and was stopped. ${NARROW}`,
  };
  return new QueryLimitError(kind, messages[kind], err);
}

function gib(bytes: number): string {
  if (bytes >= 1024 ** 3) return `${+(bytes / 1024 ** 3).toFixed(1)} GiB`;
  return bytes >= 1024 ** 2 ? `${+(bytes / 1024 ** 2).toFixed(1)} MiB` : `${bytes.toLocaleString('en-US')} bytes`;
}
