/**
 * overview() on chDB, through the read connections the console uses, over ingest_counts rows
 * of known values: the series, their points per second, the steps, and that nothing of a source
 * outside the given ones (or of no source) is ever read.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatementRunner } from '../../storage/chdb-reader.ts';
import { openTestEngine, type TestEngine } from '../../test/chdb-engine.ts';
import { MAX_POINTS, overviewSteps } from './overview.ts';
import { ConsoleQueries } from './queries.ts';

/** ConsoleQueries.overview on `runner`: the statement as the console runs it, limits and all. */
const overviewOf = (runner: StatementRunner, sources: readonly string[], range: { from: number; to: number }) =>
  new ConsoleQueries(runner, 'otel').overview(sources, range);

let engine: TestEngine;

/** 2026-08-03 10:00:00 UTC, in seconds. */
const T0 = Date.UTC(2026, 7, 3, 10, 0, 0) / 1000;
const HOUR = { from: T0 * 1000, to: (T0 + 3600) * 1000 };

beforeAll(async () => {
  engine = await openTestEngine();
  const row = (source: string, offset: number, signal: string, outcome: string, reason: string, requests: number, items: number) =>
    `(${quote(source)}, toDateTime(${T0 + offset}), '${signal}', '${outcome}', '${reason}', ${requests}, ${items})`;
  await engine.storage.query(`INSERT INTO otel.ingest_counts (SourceId, Timestamp, Signal, Outcome, Reason, Requests, Items) VALUES ${[
    // src_a's traces: two gateways' rows in the first bucket, one more in the second (same 60 s point).
    row('src_a', 0, 'traces', 'accepted', '', 10, 600),
    row('src_a', 0, 'traces', 'accepted', '', 5, 300),
    row('src_a', 10, 'traces', 'accepted', '', 3, 300),
    row('src_a', 10, 'traces', 'refused', 'unavailable', 2, 120),
    row('src_a', 20, 'traces', 'refused', 'payload_too_large', 6, 6),
    // Ten minutes in: its logs.
    row('src_a', 600, 'logs', 'accepted', '', 1, 60),
    // Outside the hour: before and after.
    row('src_a', -60, 'traces', 'accepted', '', 1, 1_000),
    row('src_a', 3600, 'traces', 'accepted', '', 1, 1_000),
    // Another tenant's source, one with a quote in its id, and refusals of no source.
    row('src_b', 0, 'traces', 'accepted', '', 1, 42),
    row("it's", 0, 'metrics', 'accepted', '', 1, 60),
    row('back\\slash\ttab', 0, 'logs', 'accepted', '', 1, 30),
    row('', 0, 'traces', 'refused', 'unauthorized', 50, 50),
  ].join(', ')}`);
});
afterAll(() => engine?.close());

function quote(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/** Runs on the reader, remembering the statements (a scope without sources needs none). */
function recording(): StatementRunner & { statements: number } {
  const runner = {
    statements: 0,
    run: (...args: Parameters<StatementRunner['run']>) => {
      runner.statements++;
      return engine.reader.run(...args);
    },
  };
  return runner;
}

/** The points of a series that are not zero, as [seconds after T0, items per second]. */
const nonZero = (points: Array<[number, number]>) => points.filter(([, value]) => value !== 0).map(([time, value]) => [time / 1000 - T0, value]);

describe('overview', () => {
  it('gives received, accepted and refused-by-reason items per second for each source and signal', async () => {
    const result = await overviewOf(engine.reader, ['src_a'], HOUR);
    expect(result.stepSeconds).toBe(30);
    expect(result.series.map((s) => [s.sourceId, s.signal, s.outcome, s.reason])).toEqual([
      ['src_a', 'logs', 'received', undefined],
      ['src_a', 'logs', 'accepted', undefined],
      ['src_a', 'traces', 'received', undefined],
      ['src_a', 'traces', 'accepted', undefined],
      ['src_a', 'traces', 'refused', 'payload_too_large'],
      ['src_a', 'traces', 'refused', 'unavailable'],
    ]);
    for (const series of result.series) {
      expect(series.points).toHaveLength(120);
      expect(series.points[0]![0]).toBe(T0 * 1000);
      expect(series.points[1]![0] - series.points[0]![0]).toBe(30_000);
    }
    const [logsReceived, logsAccepted, received, accepted, tooLarge, unavailable] = result.series.map((s) => nonZero(s.points));
    expect(logsReceived).toEqual([[600, 2]]);
    expect(logsAccepted).toEqual([[600, 2]]);
    // 1,200 accepted and 126 refused items in the first 30 s.
    expect(accepted).toEqual([[0, 40]]);
    expect(unavailable).toEqual([[0, 4]]);
    expect(tooLarge).toEqual([[0, 0.2]]);
    expect(received).toEqual([[0, 44.2]]);
  });

  it('reads only the sources it is given, never the refusals of no source', async () => {
    const b = await overviewOf(engine.reader, ['src_b'], HOUR);
    expect(b.series.map((s) => [s.sourceId, s.outcome, nonZero(s.points)])).toEqual([
      ['src_b', 'received', [[0, 1.4]]],
      ['src_b', 'accepted', [[0, 1.4]]],
    ]);
    // Ids are matched exactly as they are, whatever characters they hold.
    const quoted = await overviewOf(engine.reader, ["it's", 'back\\slash\ttab', 'src_unknown', 'back'], HOUR);
    expect(quoted.series.map((s) => [s.sourceId, s.signal, s.outcome])).toEqual([
      ['back\\slash\ttab', 'logs', 'received'], ['back\\slash\ttab', 'logs', 'accepted'], ["it's", 'metrics', 'received'], ["it's", 'metrics', 'accepted'],
    ]);
    // Text that would change the statement if it were spliced in is only a name that matches nothing.
    expect((await overviewOf(engine.reader, ["src_a') OR 1=1 OR SourceId IN ('"], HOUR)).series).toEqual([]);
    const runner = recording();
    expect(await overviewOf(runner, ['', ''], HOUR)).toEqual({ stepSeconds: 30, series: [] });
    expect(await overviewOf(runner, [], HOUR)).toEqual({ stepSeconds: 30, series: [] });
    expect(runner.statements).toBe(0);
    const both = await overviewOf(runner, ['src_b', '', 'src_a'], HOUR);
    expect(runner.statements).toBe(1);
    expect([...new Set(both.series.map((s) => s.sourceId))]).toEqual(['src_a', 'src_b']);
  });

  it('counts the rows of the range only, the first step from its start', async () => {
    // From 5 s before T0: the first step starts at T0 - 10 s (the row of T0 - 60 s is before it).
    const result = await overviewOf(engine.reader, ['src_a'], { from: (T0 - 5) * 1000, to: (T0 + 55) * 1000 });
    expect(result.stepSeconds).toBe(10);
    const accepted = result.series.find((s) => s.signal === 'traces' && s.outcome === 'accepted')!;
    expect(accepted.points.map(([time]) => time / 1000 - T0)).toEqual([-10, 0, 10, 20, 30, 40, 50]);
    expect(nonZero(accepted.points)).toEqual([[0, 90], [10, 30]]);
    const late = await overviewOf(engine.reader, ['src_a'], { from: (T0 + 3600) * 1000, to: (T0 + 3610) * 1000 });
    expect(late.series.map((s) => [s.outcome, nonZero(s.points)])).toEqual([['received', [[3600, 100]]], ['accepted', [[3600, 100]]]]);
  });
});

describe('overviewSteps', () => {
  it('keeps every range within MAX_POINTS points of whole buckets, as short as that allows', () => {
    const at = (seconds: number) => ({ from: (T0 + 7) * 1000, to: (T0 + 7 + seconds) * 1000 });
    expect(overviewSteps(at(300)).stepSeconds).toBe(10);
    expect(overviewSteps(at(3600)).stepSeconds).toBe(60); // 30 s would need 121 points from an unaligned start
    expect(overviewSteps(HOUR).stepSeconds).toBe(30);
    expect(overviewSteps(at(86_400)).stepSeconds).toBe(900);
    expect(overviewSteps(at(30 * 86_400)).stepSeconds).toBe(43_200); // 21,600 s would need 121 points from 10:00
    expect(overviewSteps(at(400 * 86_400)).stepSeconds % 86_400).toBe(0);
    for (const seconds of [1, 59, 600, 3601, 7 * 86_400, 90 * 86_400, 400 * 86_400, 5000 * 86_400]) {
      const steps = overviewSteps(at(seconds));
      expect(steps.count, `${seconds} s`).toBeLessThanOrEqual(MAX_POINTS);
      expect(steps.stepSeconds % 10).toBe(0);
      expect(steps.first % steps.stepSeconds).toBe(0);
      expect(steps.first + steps.count * steps.stepSeconds).toBeGreaterThanOrEqual(T0 + 7 + seconds);
    }
  });
});
