/**
 * How each service is doing, from its requests: its server and consumer spans (the spans that
 * receive work; client, producer and internal spans are the work it does). Per service, or per
 * operation of one service: requests per second, error rate and p50/p95/p99 latency over the
 * range, and per time step for the sparklines and charts. Two statements each, on the traces
 * table's sort key (SourceId, ServiceName, …).
 */
import type { OperationHealth, ServiceHealth, ServicesHealth, TimeRange } from '../api.ts';
import { chooseStep } from './metrics.ts';
import { Params, within, type StatementExecutor } from './statement.ts';

/** The most services the page lists (busiest first), and operations of one service. */
export const MAX_SERVICES_SHOWN = 200;
export const MAX_OPERATIONS = 100;

const REQUESTS = "SpanKind IN ('Server', 'Consumer')";

interface TotalRow { name: string; requests: string; errors: string; q: number[] }
interface StepRow { name: string; t: string; requests: string; errors: string; p95: number }

/** Every service's health over the range (or the services asked), busiest first. */
export async function servicesHealth(db: StatementExecutor, sources: readonly string[], query: TimeRange & { services?: string[] }): Promise<ServicesHealth> {
  const stepSeconds = chooseStep(query);
  const seconds = (query.to - query.from) / 1000;
  const params = new Params();
  const where = [params.sources('SourceId', sources), within('Timestamp', params.range(query)), REQUESTS];
  if (query.services?.length) where.push(`ServiceName IN ${params.list(query.services)}`);
  const totals = await db.rows<TotalRow>(
    `SELECT ServiceName AS name, count() AS requests, countIf(StatusCode = 'Error') AS errors, quantiles(0.5, 0.95, 0.99)(Duration / 1e6) AS q
     FROM otel_traces WHERE ${where.join(' AND ')}
     GROUP BY name ORDER BY count() DESC, name LIMIT ${MAX_SERVICES_SHOWN}`,
    params,
  );
  if (totals.length === 0) return { stepSeconds, services: [] };
  const steps = await serviceSteps(db, sources, query, stepSeconds, totals.map((row) => row.name));
  return { stepSeconds, services: totals.map((row) => ({ service: row.name, ...health(row, seconds), series: steps.get(row.name) ?? [] })) };
}

/** The operations (span names) of one service's requests over the range, busiest first, and the service's own health. */
export async function serviceOperations(
  db: StatementExecutor,
  sources: readonly string[],
  query: TimeRange & { service: string },
): Promise<{ operations: OperationHealth[] }> {
  const seconds = (query.to - query.from) / 1000;
  const params = new Params();
  const rows = await db.rows<TotalRow>(
    `SELECT SpanName AS name, count() AS requests, countIf(StatusCode = 'Error') AS errors, quantiles(0.5, 0.95, 0.99)(Duration / 1e6) AS q
     FROM otel_traces
     WHERE ${params.sources('SourceId', sources)} AND ServiceName = ${params.bind(query.service, 'String')} AND ${within('Timestamp', params.range(query))} AND ${REQUESTS}
     GROUP BY name ORDER BY count() DESC, name LIMIT ${MAX_OPERATIONS}`,
    params,
  );
  return { operations: rows.map((row) => ({ name: row.name, ...health(row, seconds) })) };
}

function health(row: TotalRow, seconds: number): Omit<ServiceHealth, 'service' | 'series'> {
  const requests = Number(row.requests);
  const errors = Number(row.errors);
  const [p50 = 0, p95 = 0, p99 = 0] = row.q.map(Number);
  return { requests, errors, errorRate: requests > 0 ? errors / requests : 0, perSecond: requests / seconds, p50, p95, p99 };
}

/** Per step of each service: requests per second, error rate, p95 (ms). */
async function serviceSteps(db: StatementExecutor, sources: readonly string[], range: TimeRange, stepSeconds: number, services: string[]): Promise<Map<string, ServiceHealth['series']>> {
  const params = new Params();
  const rows = await db.rows<StepRow>(
    `SELECT ServiceName AS name, toUnixTimestamp(toStartOfInterval(Timestamp, INTERVAL ${stepSeconds} SECOND)) AS t,
       count() AS requests, countIf(StatusCode = 'Error') AS errors, quantile(0.95)(Duration / 1e6) AS p95
     FROM otel_traces
     WHERE ${params.sources('SourceId', sources)} AND ${within('Timestamp', params.range(range))} AND ${REQUESTS} AND ServiceName IN ${params.list(services)}
     GROUP BY name, t ORDER BY name, t`,
    params,
  );
  const series = new Map<string, ServiceHealth['series']>();
  for (const row of rows) {
    const requests = Number(row.requests);
    let points = series.get(row.name);
    if (!points) series.set(row.name, (points = []));
    points.push([Number(row.t) * 1000, requests / stepSeconds, Number(row.errors) / requests, Number(row.p95)]);
  }
  return series;
}
