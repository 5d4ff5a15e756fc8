/**
 * ConsoleQueries: what the console's pages read, built on the server from structured filters
 * (console/api.ts), never from SQL of the browser's. Every method takes the tenant's SourceIds
 * first and every statement is restricted to them; an empty list answers empty without a
 * statement. Bodies are validated here too (schemas.ts: QueryValidationError, 400), values are
 * bound as query parameters (statement.ts), and every statement runs read-only under the limits
 * (config.ts: QueryLimitError, 422).
 *
 * The same statements run on chDB (ChdbReader) and on a ClickHouse server
 * (storage/clickhouse-reader.ts): the StatementRunner given decides.
 */
import type { StatementRunner } from '../../storage/chdb-reader.ts';
import type {
  AgentView, DeployMarker, DeployVerdictView, LogPage, LogSummary, OperationHealth, ServicesHealth, LogQuery, MetricInfo, MetricQuery, MetricResult, Overview, TimeRange, TraceQuery, TraceSummary, TraceView,
} from '../api.ts';
import { agents, deploys, services } from './catalog.ts';
import { resolveLimits, type ConsoleQueryLimits } from './config.ts';
import { logCount, logs, logSummary, volumeStepMs } from './logs.ts';
import { overview } from './overview.ts';
import { chooseStep, metric, metricNames } from './metrics.ts';
import {
  validateDeployQuery, validateLogQuery, validateServiceQuery, validateMetricQuery, validateTimeRange, validateTraceId, validateTraceQuery,
} from './schemas.ts';
import { StatementExecutor } from './statement.ts';
import { trace, traces } from './traces.ts';
import { deployVerdicts } from './verdicts.ts';
import { serviceOperations, servicesHealth } from './service-health.ts';

export class ConsoleQueries {
  private readonly db: StatementExecutor;

  /**
   * `database`: the one holding Sluice's tables (storage's, e.g. `otel`). `limits`: defaults in
   * config.ts; refused at once when one cannot be a limit.
   */
  constructor(runner: StatementRunner, database: string, limits?: Partial<ConsoleQueryLimits>) {
    this.db = new StatementExecutor(runner, database, resolveLimits(limits));
  }

  /** Items received, accepted and refused per second, per source and signal (ingest_counts). */
  async overview(sources: readonly string[], range: TimeRange): Promise<Overview> {
    return overview(this.db, sources, validateTimeRange(range));
  }

  /** Services that sent anything (spans, logs, metrics, agent data) or were deployed in the range. */
  async services(sources: readonly string[], range: TimeRange): Promise<string[]> {
    const valid = validateTimeRange(range);
    return sources.length === 0 ? [] : services(this.db, sources, valid);
  }

  /** Each service's requests over the range: rate, errors, latency, and per step (server and consumer spans). */
  async servicesHealth(sources: readonly string[], query: TimeRange & { services?: string[] }): Promise<ServicesHealth> {
    const valid = validateDeployQuery(query);
    return sources.length === 0 ? { stepSeconds: 0, services: [] } : servicesHealth(this.db, sources, valid);
  }

  /** One service's operations over the range, busiest first. */
  async serviceOperations(sources: readonly string[], query: TimeRange & { service: string }): Promise<{ operations: OperationHealth[] }> {
    const valid = validateServiceQuery(query);
    return sources.length === 0 ? { operations: [] } : serviceOperations(this.db, sources, valid);
  }

  /** OTLP and agent log entries, newest first, a page at a time (`cursor`). */
  async logs(sources: readonly string[], query: LogQuery): Promise<LogPage> {
    const valid = validateLogQuery(query);
    return sources.length === 0 ? { logs: [] } : logs(this.db, sources, valid);
  }

  /** How many OTLP and agent log entries match the filters in the range. */
  async logCount(sources: readonly string[], query: LogQuery): Promise<number> {
    const valid = validateLogQuery(query);
    return sources.length === 0 ? 0 : logCount(this.db, sources, valid);
  }

  /** The volume by severity and the facets of the log entries matching the filters in the range. */
  async logSummary(sources: readonly string[], query: LogQuery): Promise<LogSummary> {
    const valid = validateLogQuery(query);
    return sources.length === 0 ? { total: 0, stepMs: volumeStepMs(valid), volume: [], facets: { services: [], severities: [], attributes: [] } } : logSummary(this.db, sources, valid);
  }

  /** Summaries of the traces with a span matching the filters, most recent first. */
  async traces(sources: readonly string[], query: TraceQuery): Promise<TraceSummary[]> {
    const valid = validateTraceQuery(query);
    return sources.length === 0 ? [] : traces(this.db, sources, valid);
  }

  /** One trace, every span with its events and links; undefined when the tenant has no such trace. */
  async trace(sources: readonly string[], traceId: string): Promise<TraceView | undefined> {
    const id = validateTraceId(traceId);
    return sources.length === 0 ? undefined : trace(this.db, sources, id);
  }

  /** Metric names in the range (OTLP metrics of every kind, and agent metrics). */
  async metricNames(sources: readonly string[], range: TimeRange): Promise<MetricInfo[]> {
    const valid = validateTimeRange(range);
    return sources.length === 0 ? [] : metricNames(this.db, sources, valid);
  }

  /** One chart: the metric aggregated per time bucket (at most 500) and group (at most 50). */
  async metric(sources: readonly string[], query: MetricQuery): Promise<MetricResult> {
    const valid = validateMetricQuery(query);
    return sources.length === 0 ? { stepSeconds: chooseStep(valid, valid.stepSeconds), series: [] } : metric(this.db, sources, valid);
  }

  /** Deploy markers in the range, newest first. */
  async deploys(sources: readonly string[], query: TimeRange & { services?: string[] }): Promise<DeployMarker[]> {
    const valid = validateDeployQuery(query);
    return sources.length === 0 ? [] : deploys(this.db, sources, valid);
  }

  /** The newest deploy markers in the range (at most MAX_VERDICTS), each with its verdict (console/deploy-verdict.ts). */
  async deployVerdicts(sources: readonly string[], query: TimeRange & { services?: string[] }, now = Date.now()): Promise<DeployVerdictView[]> {
    const valid = validateDeployQuery(query);
    return sources.length === 0 ? [] : deployVerdicts(this.db, sources, valid, now);
  }

  /** Each agent's latest heartbeat; stale when it is older than 5 minutes. */
  async agents(sources: readonly string[]): Promise<AgentView[]> {
    return sources.length === 0 ? [] : agents(this.db, sources);
  }
}
