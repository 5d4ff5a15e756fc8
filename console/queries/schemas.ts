/**
 * The query bodies of the console's API (console/api.ts) as JSON Schemas, and their validators.
 * The HTTP layer validates with them to answer 400 naming the field; ConsoleQueries validates
 * again, so that no statement is ever built from an unchecked body (a list of a million
 * services would be a statement of a million parameters).
 *
 * Bounds: ranges of at most MAX_RANGE_DAYS days between 2000 and 2100; lists of at most 100
 * services and 20 attribute filters; names up to 256 characters, values and text up to 1024.
 * Unknown fields are refused: a misspelt filter must not silently match everything.
 */
import { Ajv } from 'ajv';
import { firstProblem, lazyValidators } from '../../core/validation.ts';
import type { Aggregation, LogQuery, MetricKind, MetricQuery, TimeRange, TraceQuery } from '../api.ts';
import { MAX_RANGE_DAYS } from './config.ts';
import { QueryValidationError } from './errors.ts';

/** 2000-01-01 and 2100-01-01 in Unix milliseconds: anything outside is a unit mistake (seconds, nanoseconds). */
const EARLIEST = 946_684_800_000;
const LATEST = 4_102_444_800_000;
const DAY_MS = 86_400_000;

const time = { type: 'integer', minimum: EARLIEST, maximum: LATEST, description: 'Unix milliseconds.' } as const;
const name = { type: 'string', minLength: 1, maxLength: 256 } as const;
const names = { type: 'array', maxItems: 100, items: name } as const;
const attributes = {
  type: 'array',
  maxItems: 20,
  items: {
    type: 'object',
    required: ['key', 'value'],
    additionalProperties: false,
    properties: { key: name, value: { type: 'string', maxLength: 1024 } },
  },
} as const;
/** A body of a time range and more: `from` and `to` required, no field but those named. */
const rangeBody = <P extends object>($id: string, properties: P, required: readonly string[] = []) => ({
  $id,
  type: 'object',
  required: ['from', 'to', ...required],
  additionalProperties: false,
  properties: { from: time, to: time, ...properties },
}) as const;

export const timeRangeSchema = rangeBody('ConsoleTimeRange', {});

export const deployQuerySchema = rangeBody('ConsoleDeployQuery', { services: names });

export const serviceQuerySchema = rangeBody('ConsoleServiceQuery', { service: name }, ['service']);

export const logQuerySchema = rangeBody('ConsoleLogQuery', {
  services: names,
  minSeverity: { type: 'integer', minimum: 0, maximum: 24 },
  text: { type: 'string', minLength: 1, maxLength: 1024 },
  traceId: { type: 'string', pattern: '^[0-9a-f]{32}$' },
  attributes,
  cursor: { type: 'string', minLength: 1, maxLength: 256 },
  limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
});

export const traceQuerySchema = rangeBody('ConsoleTraceQuery', {
  services: names,
  operation: name,
  minDurationMs: { type: 'number', minimum: 0, maximum: 1e9 },
  maxDurationMs: { type: 'number', minimum: 0, maximum: 1e9 },
  status: { enum: ['ok', 'error', 'unset'] },
  attributes,
  limit: { type: 'integer', minimum: 1, maximum: 200, default: 20 },
});

/** The aggregations each kind of metric has (percentiles need buckets; rate a running total). */
export const AGGREGATIONS: Readonly<Record<MetricKind, readonly Aggregation[]>> = {
  gauge: ['avg', 'sum', 'min', 'max', 'count'],
  sum: ['avg', 'sum', 'min', 'max', 'count', 'rate'],
  histogram: ['avg', 'sum', 'min', 'max', 'count', 'rate', 'p50', 'p95', 'p99'],
  exp_histogram: ['avg', 'sum', 'min', 'max', 'count', 'rate'],
  summary: ['avg', 'sum', 'count', 'rate'],
  agent: ['avg', 'sum', 'min', 'max', 'count', 'rate'],
};

export const metricQuerySchema = rangeBody('ConsoleMetricQuery', {
  name,
  kind: { enum: Object.keys(AGGREGATIONS) },
  aggregation: { enum: ['avg', 'sum', 'min', 'max', 'rate', 'p50', 'p95', 'p99', 'count'] },
  services: names,
  groupBy: name,
  attributes,
  stepSeconds: { type: 'integer', minimum: 1, maximum: MAX_RANGE_DAYS * 86_400 },
}, ['name', 'kind', 'aggregation']);

type Kind = 'timeRange' | 'deploys' | 'service' | 'logs' | 'traces' | 'metric';
const SCHEMAS = { timeRange: timeRangeSchema, deploys: deployQuerySchema, service: serviceQuerySchema, logs: logQuerySchema, traces: traceQuerySchema, metric: metricQuerySchema };
// allErrors off: the first problem is the one the answer names. Defaults (limit) are filled in.
const validator = lazyValidators(SCHEMAS, () => new Ajv({ allErrors: false, useDefaults: true, strict: true, strictTypes: false }));

function validate<T extends TimeRange>(kind: Kind, body: unknown): T {
  const check = validator(kind);
  // A copy: the defaults (limit) go into it, not into the caller's object.
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) body = { ...body };
  if (!check(body)) {
    const { field, message } = firstProblem(check.errors!);
    throw new QueryValidationError(field, message);
  }
  const range = body as T;
  if (range.to <= range.from) throw new QueryValidationError('to', 'must be after from');
  if (range.to - range.from > MAX_RANGE_DAYS * DAY_MS) throw new QueryValidationError('to', `must be at most ${MAX_RANGE_DAYS} days after from`);
  return range;
}

/** A TimeRange body (services, metric names), checked; throws QueryValidationError. */
export function validateTimeRange(body: unknown): TimeRange {
  return validate<TimeRange>('timeRange', body);
}

export function validateDeployQuery(body: unknown): TimeRange & { services?: string[] } {
  return validate<TimeRange & { services?: string[] }>('deploys', body);
}

/** A range and one service (the service page). */
export function validateServiceQuery(body: unknown): TimeRange & { service: string } {
  return validate<TimeRange & { service: string }>('service', body);
}

/** A LogQuery, checked, with `limit` filled in. (The cursor is read by the logs query itself.) */
export function validateLogQuery(body: unknown): LogQuery & { limit: number } {
  return validate<LogQuery & { limit: number }>('logs', body);
}

export function validateTraceQuery(body: unknown): TraceQuery & { limit: number } {
  const query = validate<TraceQuery & { limit: number }>('traces', body);
  if (query.minDurationMs !== undefined && query.maxDurationMs !== undefined && query.maxDurationMs < query.minDurationMs) {
    throw new QueryValidationError('maxDurationMs', 'must be at least minDurationMs');
  }
  return query;
}

export function validateMetricQuery(body: unknown): MetricQuery {
  const query = validate<MetricQuery>('metric', body);
  if (!AGGREGATIONS[query.kind].includes(query.aggregation)) {
    throw new QueryValidationError('aggregation', `must be one of ${AGGREGATIONS[query.kind].join(', ')} for a ${query.kind} metric`);
  }
  return query;
}

/** A trace id as OTLP writes it, 32 hex digits; the lowercase form the tables hold. */
export function validateTraceId(traceId: unknown): string {
  if (typeof traceId !== 'string' || !/^[0-9a-fA-F]{32}$/.test(traceId)) throw new QueryValidationError('traceId', 'must be 32 hexadecimal digits');
  return traceId.toLowerCase();
}
