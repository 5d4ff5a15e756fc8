/**
 * What the console reads from storage, behind one interface (console/queries/ implements it on
 * chDB and on a ClickHouse server). Every method takes the caller's tenant's SourceIds first:
 * nothing outside them is ever read.
 */
import type {
  AgentView, DeployMarker, LogPage, LogQuery, MetricInfo, MetricQuery, MetricResult, Overview, TimeRange, TraceQuery, TraceSummary, TraceView,
} from './api.ts';

export type Scope = readonly string[];

export interface ConsoleReads {
  overview(sources: Scope, range: TimeRange): Promise<Overview>;
  services(sources: Scope, range: TimeRange): Promise<string[]>;
  logs(sources: Scope, query: LogQuery): Promise<LogPage>;
  traces(sources: Scope, query: TraceQuery): Promise<TraceSummary[]>;
  trace(sources: Scope, traceId: string): Promise<TraceView | undefined>;
  metricNames(sources: Scope, range: TimeRange): Promise<MetricInfo[]>;
  metric(sources: Scope, query: MetricQuery): Promise<MetricResult>;
  deploys(sources: Scope, query: TimeRange & { services?: string[] }): Promise<DeployMarker[]>;
  agents(sources: Scope): Promise<AgentView[]>;
}

/** The query bodies, checked before a read runs (400 naming the problem otherwise). */
export interface QueryBodies {
  range: TimeRange;
  logs: LogQuery;
  traces: TraceQuery;
  metric: MetricQuery;
  deploys: TimeRange & { services?: string[] };
}
export type QueryKind = keyof QueryBodies;
export type QueryValidator = <K extends QueryKind>(kind: K, body: unknown) => QueryBodies[K];
