import { ClickHouseError } from '@clickhouse/client';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../core/errors.ts';
import { clickhouseException, insertError } from './errors.ts';

/** An error as chDB throws it. */
function chdbError(code: number, text: string, name: string): Error {
  return Object.assign(new Error(`Code: ${code}. DB::Exception: ${text} (${name}) (version 26.7.2.1). (${name})`), { clickhouseCode: code, code: 'CHDB_QUERY' });
}

const classify = (err: unknown) => insertError(err, 'otel_traces', (e) => (e as NodeJS.ErrnoException).code === 'ECONNREFUSED');

describe('storage errors', () => {
  it('reads the exception of chDB, of the HTTP client and of old servers the same way', () => {
    expect(clickhouseException(chdbError(60, "Table otel.x doesn't exist.", 'UNKNOWN_TABLE'))).toEqual({ code: 60, name: 'UNKNOWN_TABLE', text: "Table otel.x doesn't exist." });
    expect(clickhouseException(new ClickHouseError({ message: 'Cannot read all data', code: '33', type: 'CANNOT_READ_ALL_DATA' }))).toEqual({ code: 33, name: 'CANNOT_READ_ALL_DATA', text: 'Cannot read all data' });
    expect(clickhouseException(new Error('Code: 33, e.displayText() = DB::Exception: Cannot read all data, e.what() = DB::Exception'))).toEqual({ code: 33, name: undefined, text: 'Cannot read all data' });
    expect(clickhouseException(new TypeError('x is undefined'))).toBeUndefined();
  });

  it('blames the rows only for errors the same bytes would hit again', () => {
    const partitions = classify(chdbError(252, 'Too many partitions for single INSERT block (more than 100). The limit is ...', 'TOO_MANY_PARTS'));
    expect([partitions.code, partitions.retryable]).toEqual(['bad_request', false]);
    expect(partitions.message).toBe(
      'storage refused the rows for otel_traces: they span more partitions (days) than ClickHouse takes in one insert (max_partitions_per_insert_block): Too many partitions for single INSERT block (more than 100)',
    );
    // The documentation's wording of the same refusal, from a server over HTTP.
    const documented = classify(new ClickHouseError({ message: 'Too many partitions for a single INSERT block (142 partitions, limit is 100). The limit is controlled by ...', code: '252', type: 'TOO_MANY_PARTS' }));
    expect([documented.code, documented.retryable]).toEqual(['bad_request', false]);
    expect(classify(chdbError(27, 'Cannot parse input: expected', 'CANNOT_PARSE_INPUT_ASSERTION_FAILED')).code).toBe('bad_request');
    // The same code 252 when merges are behind: storage must recover, the rows are fine.
    const parts = classify(chdbError(252, 'Too many parts (3000). Merges are processing significantly slower than inserts', 'TOO_MANY_PARTS'));
    expect([parts.code, parts.retryable]).toEqual(['unavailable', true]);
    expect(classify(chdbError(241, 'Memory limit exceeded', 'MEMORY_LIMIT_EXCEEDED')).code).toBe('unavailable');
    expect(classify(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })).code).toBe('unavailable');
  });

  it('keeps an unknown failure a bug: internal, not retried as an outage', () => {
    const bug = classify(new TypeError("Cannot read properties of undefined (reading 'length')"));
    expect([bug.code, bug.retryable]).toEqual(['internal', false]);
    const classified = new SluiceError('unavailable', 'already classified');
    expect(classify(classified)).toBe(classified);
  });
});
