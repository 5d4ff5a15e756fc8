/**
 * The small queries of the console: which services sent anything, deploy markers, agents. Each
 * is one statement on the sort keys' first column (SourceId), with a LIMIT.
 */
import type { AgentView, DeployMarker, TimeRange } from '../api.ts';
import { STALE_AFTER_MS } from './config.ts';
import { Params, within, type StatementExecutor } from './statement.ts';

/** The most services, deploy markers and agents one answer lists. */
export const MAX_SERVICES = 1000;
export const MAX_DEPLOYS = 1000;
export const MAX_AGENTS = 5000;

/** Every table with a service column, the column and its time column. */
const SERVICE_TABLES: ReadonlyArray<[table: string, service: string, time: string]> = [
  ['otel_traces', 'ServiceName', 'Timestamp'],
  ['otel_logs', 'ServiceName', 'Timestamp'],
  ['otel_metrics_gauge', 'ServiceName', 'TimeUnix'],
  ['otel_metrics_sum', 'ServiceName', 'TimeUnix'],
  ['otel_metrics_histogram', 'ServiceName', 'TimeUnix'],
  ['otel_metrics_exp_histogram', 'ServiceName', 'TimeUnix'],
  ['otel_metrics_summary', 'ServiceName', 'TimeUnix'],
  ['agent_logs', 'Service', 'Timestamp'],
  ['agent_metrics', 'Service', 'Timestamp'],
  ['deploy_markers', 'Service', 'Timestamp'],
];

/** Services that sent spans, logs or metrics (OTLP or agent) or were deployed in the range, sorted. */
export async function services(db: StatementExecutor, sources: readonly string[], range: TimeRange): Promise<string[]> {
  const params = new Params();
  const source = params.sources('SourceId', sources);
  const bounds = params.range(range);
  // DISTINCT per table first: each reads only its service column (LowCardinality, second in the sort keys).
  const branches = SERVICE_TABLES.map(([table, service, time]) =>
    `SELECT DISTINCT toString(${service}) AS service FROM ${table} WHERE ${source} AND ${within(time, bounds)}`);
  const rows = await db.rows<{ service: string }>(
    `SELECT DISTINCT service FROM (\n${branches.join('\nUNION ALL\n')}\n) WHERE service != '' ORDER BY service LIMIT ${MAX_SERVICES}`,
    params,
  );
  return rows.map((row) => row.service);
}

interface DeployRow {
  ms: string; sourceId: string; service: string; version: string; environment: string;
  commit: string; deployedBy: string; description: string; url: string;
}

/** Deploy markers in the range, newest first, of the services asked (all when none). */
export async function deploys(db: StatementExecutor, sources: readonly string[], query: TimeRange & { services?: string[] }): Promise<DeployMarker[]> {
  const params = new Params();
  const where = [params.sources('SourceId', sources), within('Timestamp', params.range(query))];
  if (query.services?.length) where.push(`Service IN ${params.list(query.services)}`);
  const rows = await db.rows<DeployRow>(
    `SELECT toUnixTimestamp64Milli(Timestamp) AS ms, SourceId AS sourceId, Service AS service, Version AS version,
       Environment AS environment, Commit AS commit, DeployedBy AS deployedBy, Description AS description, Url AS url
     FROM deploy_markers WHERE ${where.join(' AND ')}
     ORDER BY Timestamp DESC, sourceId, service LIMIT ${MAX_DEPLOYS}`,
    params,
  );
  return rows.map(({ ms, ...marker }) => ({ time: Number(ms), ...marker }));
}

interface AgentRow { sourceId: string; agentId: string; host: string; version: string; os: string; arch: string; status: string; lastSeen: string }

/**
 * The latest heartbeat of each agent, most recently seen first. argMax, not FINAL: the
 * ReplacingMergeTree keeps one row per agent only once its parts merged.
 */
export async function agents(db: StatementExecutor, sources: readonly string[], now = Date.now()): Promise<AgentView[]> {
  const params = new Params();
  const rows = await db.rows<AgentRow>(
    `SELECT SourceId AS sourceId, AgentId AS agentId, argMax(Host, LastSeen) AS host, argMax(Version, LastSeen) AS version,
       argMax(Os, LastSeen) AS os, argMax(Arch, LastSeen) AS arch, argMax(Status, LastSeen) AS status,
       toUnixTimestamp64Milli(max(LastSeen)) AS lastSeen
     FROM agent_heartbeats WHERE ${params.sources('SourceId', sources)}
     GROUP BY SourceId, AgentId ORDER BY lastSeen DESC, sourceId, agentId LIMIT ${MAX_AGENTS}`,
    params,
  );
  return rows.map((row) => {
    const lastSeen = Number(row.lastSeen);
    return { ...row, lastSeen, stale: now - lastSeen > STALE_AFTER_MS };
  });
}
