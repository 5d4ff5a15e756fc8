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
import { statementLimitMessage, statementLimitReached, type StatementLimit } from '../../storage/statement-limits.ts';
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
export type QueryLimit = StatementLimit;

export class QueryLimitError extends ConsoleQueryError {
  constructor(readonly limit: QueryLimit, message: string, cause: unknown) {
    super(422, message, { cause });
    this.name = 'QueryLimitError';
  }
}

const NARROW = 'Narrow the time range or add filters, then try again.';

/**
 * A failed statement as a QueryLimitError when it reached one of the limits, else the error as
 * it came. The message says which limit, with its value, and what to do.
 */
export function queryError(err: unknown, limits: Readonly<ConsoleQueryLimits>): unknown {
  const limit = statementLimitReached(err);
  return limit ? new QueryLimitError(limit, statementLimitMessage(limit, limits, 'query', NARROW), err) : err;
}
