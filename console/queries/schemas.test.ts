import { describe, expect, it } from 'vitest';
import { resolveLimits } from './config.ts';
import { QueryValidationError } from './errors.ts';
import { chooseStep } from './metrics.ts';
import { ConsoleQueries } from './queries.ts';
import { validateLogQuery, validateMetricQuery, validateTimeRange, validateTraceId, validateTraceQuery } from './schemas.ts';

const HOUR = 3_600_000;
const to = Date.UTC(2026, 10, 24, 12);
const range = { from: to - HOUR, to };

/** The 400 a body gets: its field and message. */
function refusal(validate: (body: unknown) => unknown, body: unknown): { field: string; message: string; statusCode: number } {
  try {
    validate(body);
  } catch (err) {
    expect(err).toBeInstanceOf(QueryValidationError);
    const { field, message, statusCode } = err as QueryValidationError;
    return { field, message, statusCode };
  }
  throw new Error(`accepted: ${JSON.stringify(body)}`);
}

describe('query body validation', () => {
  it('accepts valid bodies and fills in the default limits', () => {
    expect(validateTimeRange({ ...range })).toEqual(range);
    expect(validateLogQuery({ ...range, services: ['a'], minSeverity: 9, text: 'x', attributes: [{ key: 'k', value: '' }] }).limit).toBe(100);
    expect(validateTraceQuery({ ...range, status: 'error', minDurationMs: 1.5, maxDurationMs: 1.5 }).limit).toBe(20);
    expect(validateMetricQuery({ ...range, name: 'm', kind: 'histogram', aggregation: 'p99', groupBy: 'service.name', stepSeconds: 60 })).toMatchObject({ aggregation: 'p99' });
  });

  it("fills defaults into a copy, never into the caller's object (one range serves several queries)", () => {
    const body = { ...range };
    expect(validateTraceQuery(body).limit).toBe(20);
    expect(body).toEqual(range);
    expect(validateTimeRange(body)).toEqual(range);
  });

  it('refuses ranges that are not sane, naming the field', () => {
    expect(refusal(validateTimeRange, { from: to, to })).toEqual({ field: 'to', message: 'to must be after from', statusCode: 400 });
    expect(refusal(validateTimeRange, { from: to - 32 * 24 * HOUR, to })).toMatchObject({ field: 'to', message: 'to must be at most 31 days after from' });
    // Seconds instead of milliseconds, and a fraction of a millisecond.
    expect(refusal(validateTimeRange, { from: 1_700_000_000, to })).toMatchObject({ field: 'from', message: 'from must be >= 946684800000' });
    expect(refusal(validateTimeRange, { from: range.from + 0.5, to })).toMatchObject({ field: 'from', message: 'from must be integer' });
    expect(refusal(validateTimeRange, { from: range.from })).toMatchObject({ field: 'to', message: 'to is required' });
    expect(refusal(validateTimeRange, { from: String(range.from), to })).toMatchObject({ field: 'from', message: 'from must be integer' });
    expect(refusal(validateTimeRange, null)).toMatchObject({ field: 'body', message: 'body must be object' });
  });

  it('refuses unknown fields (a misspelt filter must not match everything), long lists and long strings', () => {
    expect(refusal(validateLogQuery, { ...range, service: ['a'] })).toMatchObject({ field: 'service', message: 'service is not a known field' });
    expect(refusal(validateLogQuery, { ...range, services: Array.from({ length: 101 }, (_, i) => `s${i}`) })).toMatchObject({ field: 'services', message: 'services must NOT have more than 100 items' });
    expect(refusal(validateLogQuery, { ...range, text: 'x'.repeat(1025) })).toMatchObject({ field: 'text', message: 'text must NOT have more than 1024 characters' });
    expect(refusal(validateLogQuery, { ...range, services: [''] })).toMatchObject({ field: 'services[0]' });
    expect(refusal(validateLogQuery, { ...range, attributes: [{ key: 'k' }] })).toMatchObject({ field: 'attributes[0].value', message: 'attributes[0].value is required' });
    expect(refusal(validateLogQuery, { ...range, limit: 1001 })).toMatchObject({ field: 'limit', message: 'limit must be <= 1000' });
    expect(refusal(validateTraceQuery, { ...range, attributes: Array.from({ length: 21 }, () => ({ key: 'k', value: 'v' })) })).toMatchObject({ field: 'attributes' });
  });

  it('refuses filters that contradict each other or do not apply to the metric kind', () => {
    expect(refusal(validateTraceQuery, { ...range, minDurationMs: 10, maxDurationMs: 5 })).toMatchObject({ field: 'maxDurationMs', message: 'maxDurationMs must be at least minDurationMs' });
    expect(refusal(validateTraceQuery, { ...range, status: 'failed' })).toMatchObject({ field: 'status', message: 'status must be one of ok, error, unset' });
    expect(refusal(validateMetricQuery, { ...range, name: 'm', kind: 'gauge', aggregation: 'p95' })).toEqual({
      field: 'aggregation', message: 'aggregation must be one of avg, sum, min, max, count for a gauge metric', statusCode: 400,
    });
    expect(refusal(validateMetricQuery, { ...range, name: 'm', kind: 'gauge', aggregation: 'rate' })).toMatchObject({ field: 'aggregation' });
    expect(refusal(validateMetricQuery, { ...range, name: 'm', kind: 'counter', aggregation: 'sum' })).toMatchObject({ field: 'kind' });
  });

  it('takes a trace id of 32 hex digits, in either case, as the tables hold it', () => {
    expect(validateTraceId('0AF7651916CD43DD8448EB211C80319C')).toBe('0af7651916cd43dd8448eb211c80319c');
    for (const bad of ['', '0af7651916cd43dd8448eb211c80319', "0af7651916cd43dd8448eb211c8031'", 42]) {
      expect(refusal(validateTraceId, bad)).toMatchObject({ field: 'traceId', message: 'traceId must be 32 hexadecimal digits' });
    }
  });
});

describe('chooseStep', () => {
  it('keeps the step asked for when the range has at most 500 of them, else picks the smallest round one that fits', () => {
    expect(chooseStep(range, 60)).toBe(60);
    expect(chooseStep(range, 8)).toBe(8);
    expect(chooseStep(range, 7)).toBe(10); // 515 points
    // Unasked: about 240 points, none shorter than a minute (the SDKs' export interval).
    expect(chooseStep(range)).toBe(60);
    expect(chooseStep(range, 1)).toBe(10);
    expect(chooseStep({ from: to - 24 * HOUR, to })).toBe(600); // 86,400 s / 240 = 360
    expect(chooseStep({ from: to - 31 * 24 * HOUR, to })).toBe(21_600); // 11,160
    expect(chooseStep({ from: to - 31 * 24 * HOUR, to }, 1)).toBe(7200); // asked: as fine as 500 points allow
    // A range not aligned to the step touches one more bucket: 500 steps of 10 s starting at :05 touch 501.
    expect(chooseStep({ from: to + 5000, to: to + 5000 + 5_000_000 }, 10)).toBe(15);
  });
});

describe('limits', () => {
  it('are refused at construction when the engine would read them as no limit', () => {
    expect(resolveLimits({ maxRowsToRead: 1000 }).maxRowsToRead).toBe(1000);
    expect(() => resolveLimits({ maxRowsToRead: 0 })).toThrow(/maxRowsToRead: must be a number >= 1/);
    expect(() => resolveLimits({ maxExecutionSeconds: Number.NaN })).toThrow(/maxExecutionSeconds/);
    expect(() => resolveLimits({ maxResultRows: 1.5 })).toThrow(/maxResultRows: must be a whole number/);
    const runner = { run: () => Promise.reject(new Error('not called')) };
    expect(() => new ConsoleQueries(runner, 'otel', { maxMemoryBytes: -1 })).toThrow(/maxMemoryBytes/);
  });
});
