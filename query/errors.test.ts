import { describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { createLogger } from '../core/log.ts';
import { ClickHouseException, exceptionResponse, statusOfCode, toException } from './errors.ts';

const log = createLogger('silent', 'stderr');

describe('ClickHouse exceptions', () => {
  it('gives the codes ClickHouse\'s statuses (exceptionCodeToHTTPStatus)', () => {
    expect([516, 497, 62, 60, 81, 159, 229, 48, 164, 396, 1001].map(statusOfCode)).toEqual([403, 403, 400, 404, 404, 408, 413, 501, 500, 500, 500]);
  });

  it('answers with the text, code header and status clients parse', () => {
    const response = exceptionResponse(ClickHouseException.of('READONLY', 'Cannot execute query in readonly mode'), log);
    expect(response).toEqual({
      status: 500,
      headers: { 'content-type': 'text/plain; charset=UTF-8', 'x-clickhouse-exception-code': '164' },
      body: 'Code: 164. DB::Exception: Cannot execute query in readonly mode. (READONLY)\n',
    });
  });

  it('takes the engine\'s errors as they are, the inner one of a doubled one', () => {
    const doubled = new Error("Code: 164. DB::Exception: Code: 164. DB::Exception: Cannot modify 'readonly' setting in readonly mode. (READONLY) (version 26.7.2.1). (READONLY)");
    expect(toException(doubled)?.text).toBe("DB::Exception: Cannot modify 'readonly' setting in readonly mode. (READONLY)");
    expect(toException(new Error('Code: 60. DB::Exception: Unknown table. (UNKNOWN_TABLE)'))).toMatchObject({ code: 60, status: 404 });
  });

  it('maps the HTTP layer\'s refusals, and answers anything else as an internal error', () => {
    expect(toException(new SluiceError('payload_too_large', 'body over 1 MiB'))).toMatchObject({ code: 229, status: 413 });
    const internal = exceptionResponse(new TypeError('bug'), log);
    expect(internal.status).toBe(500);
    expect(internal.body).toBe('Code: 1001. DB::Exception: internal error. (STD_EXCEPTION)\n');
  });
});
