/** The console's query layer: structured filters in, tenant-restricted, parameterised, limited statements out. */
export { ConsoleQueries } from './queries.ts';
export { DEFAULT_LIMITS, MAX_POINTS, MAX_RANGE_DAYS, MAX_SERIES, MAX_TRACE_SPANS, STALE_AFTER_MS, type ConsoleQueryLimits } from './config.ts';
export { ConsoleQueryError, QueryLimitError, QueryValidationError, type QueryLimit } from './errors.ts';
export {
  AGGREGATIONS, deployQuerySchema, logQuerySchema, metricQuerySchema, timeRangeSchema, traceQuerySchema,
  validateDeployQuery, validateLogQuery, validateMetricQuery, validateTimeRange, validateTraceId, validateTraceQuery,
} from './schemas.ts';
