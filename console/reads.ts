/**
 * What the console reads from storage, behind one interface (console/queries/ implements it on
 * chDB and on a ClickHouse server). Every method takes the caller's tenant's SourceIds first:
 * nothing outside them is ever read. The query objects come from the browser as they are: the
 * reads check them first (a 400 naming the field otherwise).
 */
import type {
  AgentView, DeployMarker, DeployVerdictView, LogPage, LogSummary, OperationHealth, ServicesHealth, LogQuery, MetricInfo, MetricQuery, MetricResult, Overview, TimeRange, TraceQuery, TraceSummary, TraceView,
} from './api.ts';

export type Scope = readonly string[];

export interface ConsoleReads {
  overview(sources: Scope, range: TimeRange): Promise<Overview>;
  services(sources: Scope, range: TimeRange): Promise<string[]>;
  servicesHealth(sources: Scope, query: TimeRange & { services?: string[] }): Promise<ServicesHealth>;
  serviceOperations(sources: Scope, query: TimeRange & { service: string }): Promise<{ operations: OperationHealth[] }>;
  logs(sources: Scope, query: LogQuery): Promise<LogPage>;
  logCount(sources: Scope, query: LogQuery): Promise<number>;
  logSummary(sources: Scope, query: LogQuery): Promise<LogSummary>;
  traces(sources: Scope, query: TraceQuery): Promise<TraceSummary[]>;
  trace(sources: Scope, traceId: string): Promise<TraceView | undefined>;
  metricNames(sources: Scope, range: TimeRange): Promise<MetricInfo[]>;
  metric(sources: Scope, query: MetricQuery): Promise<MetricResult>;
  deploys(sources: Scope, query: TimeRange & { services?: string[] }): Promise<DeployMarker[]>;
  /** The newest deploy markers in the range, each judged against the service's requests before and after it. */
  deployVerdicts(sources: Scope, query: TimeRange & { services?: string[] }): Promise<DeployVerdictView[]>;
  agents(sources: Scope): Promise<AgentView[]>;
}
