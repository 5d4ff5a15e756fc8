/**
 * The limits stop a query in the engine and answer a QueryLimitError the console can show; the
 * next query on the same connections answers as if nothing happened. The rows are made by the
 * engine itself (INSERT ... SELECT from numbers()): enough that no machine reads them within
 * the limits set here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueryLimitError } from './errors.ts';
import { ConsoleQueries } from './queries.ts';
import { openQueries, type QueriesFixture } from '../../test/console-queries-fixture.ts';

let fixture: QueriesFixture;
const now = Math.floor(Date.now() / 1000) * 1000;
const range = { from: now - 3_600_000, to: now };
const ROWS = 1_000_000;

beforeAll(async () => {
  fixture = await openQueries();
  const { storage } = fixture.engine;
  await storage.query(`INSERT INTO otel.otel_logs (SourceId, Timestamp, ServiceName, SeverityNumber, Body)
    SELECT 'src-a', fromUnixTimestamp64Milli(toInt64(${now} - 1 - number % 3000000)), concat('svc-', toString(number % 10)), 9,
      concat('request ', toString(number), ' served in ', toString(number % 1000), ' ms')
    FROM numbers(${ROWS})`);
  // One gauge point per series, 200,000 series.
  await storage.query(`INSERT INTO otel.otel_metrics_gauge (SourceId, ServiceName, MetricName, Attributes, TimeUnix, Value)
    SELECT 'src-a', 'api', 'wide', map('id', toString(number)), toDateTime(${now / 1000} - 60), number FROM numbers(200000)`);
});
afterAll(() => fixture?.close());

async function limitError(promise: Promise<unknown>): Promise<QueryLimitError> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(QueryLimitError);
  return err as QueryLimitError;
}

describe('limits', () => {
  it('rows read: stops a query that would read more, with a message that says which limit', async () => {
    const err = await limitError(fixture.withLimits({ maxRowsToRead: 1000 }).logs(['src-a'], { ...range, text: 'never there' }));
    expect(err).toMatchObject({ limit: 'rows_read', statusCode: 422 });
    expect(err.message).toBe('The query would read more than 1,000 rows, the limit, and was stopped. Narrow the time range or add filters, then try again.');
  });

  it('bytes read', async () => {
    const err = await limitError(fixture.withLimits({ maxBytesToRead: 100_000 }).logs(['src-a'], { ...range, text: 'never there' }));
    expect(err).toMatchObject({ limit: 'bytes_read', message: expect.stringContaining('more than 100,000 bytes of data') });
  });

  it('time: stops a query that runs longer', async () => {
    const err = await limitError(fixture.withLimits({ maxExecutionSeconds: 0.001 }).logs(['src-a'], { ...range, text: 'never there' }));
    expect(err).toMatchObject({ limit: 'time', message: expect.stringMatching(/^The query ran longer than 0.001 s, the limit, and was stopped/) });
  });

  it('answer size', async () => {
    const err = await limitError(fixture.withLimits({ maxResultRows: 10 }).logs(['src-a'], { ...range, limit: 50 }));
    expect(err).toMatchObject({ limit: 'result', message: expect.stringContaining('(10 rows, 256 MiB)') });
  });

  it('memory', async () => {
    const wide = { ...range, name: 'wide', kind: 'gauge', aggregation: 'avg', groupBy: 'id' } as const;
    const err = await limitError(fixture.withLimits({ maxMemoryBytes: 4 * 1024 * 1024 }).metric(['src-a'], wide));
    expect(err).toMatchObject({ limit: 'memory', message: expect.stringContaining('more than 4 MiB of memory') });
    // Within the default limits it answers: the 50 series with the most points of 200,000.
    const result = await fixture.queries.metric(['src-a'], wide);
    expect(result).toMatchObject({ truncated: true });
    expect(result.series).toHaveLength(50);
  });

  it("leaves the connections clean: the next query answers exactly, with nothing of the stopped one's output", async () => {
    const small = fixture.withLimits({ maxResultRows: 10 });
    for (let i = 0; i < 3; i++) {
      await limitError(small.logs(['src-a'], { ...range, limit: 50 }));
      const { logs } = await small.logs(['src-a'], { ...range, limit: 3, services: ['svc-1'] });
      expect(logs.map((entry) => entry.body)).toEqual(['request 1 served in 1 ms', 'request 11 served in 11 ms', 'request 21 served in 21 ms']);
    }
  });

  it('are not the error for anything else: a failing statement is thrown as it came', async () => {
    const broken = new ConsoleQueries(fixture.engine.reader, 'no_such_database');
    const err = await broken.agents(['src-a']).then(() => undefined, (e: unknown) => e);
    expect(err).not.toBeInstanceOf(QueryLimitError);
    expect(String(err)).toMatch(/UNKNOWN_DATABASE|does not exist/);
  });
});
