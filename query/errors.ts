/**
 * Errors of the query endpoint, sent as ClickHouse's HTTP interface sends them, so that
 * @clickhouse/client and clickhouse-go (Grafana) show them: the text
 * `Code: N. DB::Exception: message. (NAME)`, an X-ClickHouse-Exception-Code header, and the
 * status ClickHouse gives the code (src/Server/HTTP/exceptionCodeToHTTPStatus.cpp). Every
 * error of the endpoint is mapped here, in exceptionResponse().
 */
import { SluiceError, type ErrorCode } from '../core/errors.ts';
import type { Logger } from '../core/log.ts';
import type { HttpResponse } from '../gateway/http/adapter.ts';

/** ClickHouse's error codes that the endpoint raises itself (src/Common/ErrorCodes.cpp). */
export const CODES = {
  BAD_ARGUMENTS: 36,
  NOT_IMPLEMENTED: 48,
  SYNTAX_ERROR: 62,
  READONLY: 164,
  TOO_MANY_SIMULTANEOUS_QUERIES: 202,
  SOCKET_TIMEOUT: 209,
  QUERY_IS_TOO_LARGE: 229,
  SETTING_CONSTRAINT_VIOLATION: 452,
  ACCESS_DENIED: 497,
  AUTHENTICATION_FAILED: 516,
  STD_EXCEPTION: 1001,
} as const;

type CodeName = keyof typeof CODES;

/** exceptionCodeToHTTPStatus of ClickHouse 25/26: codes outside these sets are 500. */
const STATUS_OF_CODES: ReadonlyArray<[number, readonly number[]]> = [
  [401, [194]],
  [403, [192, 193, 497, 512, 516]],
  [400, [6, 8, 15, 25, 26, 27, 36, 37, 38, 41, 44, 53, 62, 72, 117, 123, 167, 168, 223, 321, 376, 427, 441, 675, 676]],
  [404, [46, 47, 50, 56, 60, 63, 73, 78, 81, 115, 152, 336, 511]],
  [408, [159]],
  [411, [381]],
  [413, [229]],
  [415, [779]],
  [501, [48]],
  [503, [76, 209, 439]],
];
const STATUS_OF_CODE = new Map(STATUS_OF_CODES.flatMap(([status, codes]) => codes.map((code) => [code, status] as const)));

export function statusOfCode(code: number): number {
  return STATUS_OF_CODE.get(code) ?? 500;
}

export interface ExceptionOptions {
  /** A status of our own where ClickHouse has no such case (a throttled address: 429). */
  status?: number;
  retryAfterSeconds?: number;
}

export class ClickHouseException extends Error {
  readonly status: number;

  constructor(
    readonly code: number,
    /** The whole text after `Code: N. `, as ClickHouse writes it. */
    readonly text: string,
    readonly options: ExceptionOptions = {},
  ) {
    super(text);
    this.name = 'ClickHouseException';
    this.status = options.status ?? statusOfCode(code);
  }

  /** An exception of the endpoint's own, worded as ClickHouse words its exceptions. */
  static of(name: CodeName, message: string, options: ExceptionOptions = {}): ClickHouseException {
    return new ClickHouseException(CODES[name], `DB::Exception: ${message}. (${name})`, options);
  }
}

/** The codes the HTTP layer's own refusals (body too large or too slow...) get here. */
const CODE_OF_SLUICE_ERROR: Partial<Record<ErrorCode, CodeName>> = {
  payload_too_large: 'QUERY_IS_TOO_LARGE',
  request_timeout: 'SOCKET_TIMEOUT',
  bad_request: 'BAD_ARGUMENTS',
  unsupported_media_type: 'NOT_IMPLEMENTED',
  unavailable: 'TOO_MANY_SIMULTANEOUS_QUERIES',
};

/** What the engine threw (chDB's errors carry clickhouseCode and ClickHouse's own text) or anything else. */
export function toException(err: unknown): ClickHouseException | undefined {
  if (err instanceof ClickHouseException) return err;
  if (err instanceof SluiceError) {
    const name = CODE_OF_SLUICE_ERROR[err.code];
    if (name) return ClickHouseException.of(name, err.message, { status: err.httpStatus, retryAfterSeconds: err.retryAfterSeconds });
    return undefined;
  }
  const message = err instanceof Error ? err.message : '';
  const match = /^Code: (\d+)\. ([\s\S]*)$/.exec(message);
  if (!match) return undefined;
  return new ClickHouseException(Number(match[1]), tidy(Number(match[1]), match[2]!));
}

/**
 * chDB wraps some exceptions in one of the same code (`DB::Exception: Code: 164. DB::Exception:
 * … (READONLY) (version 26.7.2.1). (READONLY)`): the inner one is the message.
 */
function tidy(code: number, text: string): string {
  const inner = new RegExp(`^DB::Exception: Code: ${code}\\. (DB::Exception: [\\s\\S]*?) \\(version [^)]*\\)\\. \\(\\w+\\)$`).exec(text);
  return inner ? inner[1]! : text;
}

/** The one mapping of an error to the endpoint's answer. Anything not ClickHouse's is a bug: logged, answered 500. */
export function exceptionResponse(err: unknown, log: Logger): HttpResponse {
  let exception = toException(err);
  if (!exception) {
    log.error({ err }, 'query endpoint: request failed unexpectedly');
    exception = ClickHouseException.of('STD_EXCEPTION', 'internal error');
  }
  const headers: Record<string, string> = {
    'content-type': 'text/plain; charset=UTF-8',
    'x-clickhouse-exception-code': String(exception.code),
  };
  if (exception.options.retryAfterSeconds !== undefined) headers['retry-after'] = String(exception.options.retryAfterSeconds);
  return { status: exception.status, headers, body: `Code: ${exception.code}. ${exception.text}\n` };
}
