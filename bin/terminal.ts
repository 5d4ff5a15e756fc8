/**
 * For a person at a terminal (stdout is a TTY): what `sluice serve` offers where and what to do
 * next, and log lines as short text. Anywhere else (a pipe, a container's log driver) the logs
 * stay one JSON object per line.
 */
import type { Writable } from 'node:stream';

export interface Serving {
  role: string;
  host: string;
  httpPort: number;
  grpcPort: number;
  /** 0: this role serves no relay. */
  relayPort: number;
  /** 0: the query endpoint is off (SLUICE_QUERY_PORT). */
  queryPort: number;
  /** The web console's URL; '' when this role serves none. */
  consoleUrl: string;
  /** The first owner's one-time sign-in link, while there is none. */
  firstRunLink?: string | undefined;
  dataDir: string;
  cluster: boolean;
  /** How the memory budget was divided, one line (core/memory-budget.ts#memorySummary). */
  memory?: string;
}

/** The listening address as a URL's host: a wildcard address is not one to type into a browser or an exporter. */
export function reachableHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/** The block printed once a role is serving. */
export function servingSummary(s: Serving): string {
  const host = reachableHost(s.host);
  const http = `http://${host}:${s.httpPort}`;
  const where = s.cluster ? 'cluster mode (NATS, ClickHouse server)' : `embedded: chDB and state under ${s.dataDir}`;
  const rows: [string, string, string][] = [];
  if (s.httpPort) {
    rows.push(['OTLP/HTTP', http, 'OTEL_EXPORTER_OTLP_ENDPOINT for http/protobuf and http/json; agent API']);
  }
  if (s.grpcPort) rows.push(['OTLP/gRPC', `http://${host}:${s.grpcPort}`, 'OTEL_EXPORTER_OTLP_ENDPOINT with OTEL_EXPORTER_OTLP_PROTOCOL=grpc']);
  if (s.consoleUrl) rows.push(['Console', s.consoleUrl, 'web UI: sources, logs, traces, metrics']);
  if (s.relayPort) rows.push(['Relay', `http://${host}:${s.relayPort}`, 'forms and notifications']);
  if (s.queryPort) rows.push(['ClickHouse', `http://${host}:${s.queryPort}`, 'read-only SQL for Grafana (README: Grafana)']);
  if (s.httpPort) {
    rows.push(['API docs', `${http}/api/v1/docs`, '']);
    rows.push(['Metrics', `${http}/metrics`, 'Prometheus']);
  }
  const width = (i: 0 | 1) => Math.max(...rows.map((row) => row[i].length));
  const table = rows.map(([what, url, note]) => `  ${what.padEnd(width(0))}  ${url.padEnd(width(1))}  ${note}`.trimEnd());
  const next = s.httpPort && !s.cluster
    ? [
        '',
        'Next, in another terminal:',
        '  npx sluice sources create --name my-app   # a source and its API key',
        '  npx sluice demo                           # sample traces, logs and metrics',
        '  npx sluice query "SELECT ServiceName, count() FROM otel.otel_traces GROUP BY ServiceName"',
      ]
    : [];
  const memory = s.memory ? ['', `Memory budget ${s.memory} (SLUICE_MEMORY_BUDGET_MB; README: Memory)`] : [];
  const firstRun = s.firstRunLink ? ['', 'Sign in to the console the first time with this one-time link (24 hours; it makes you its owner):', `  ${s.firstRunLink}`] : [];
  return [`Sluice ${s.role} is serving (${where})`, '', ...table, ...memory, ...firstRun, ...next, '', 'Ctrl-C stops it. Logs follow.', ''].join('\n');
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every line has, shown in their own way or not at all. */
const OWN_FIELDS = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service']);

/** One pino JSON line as `HH:MM:SS LEVEL message key=value …`; a line that is not JSON as it is. */
export function humanLogLine(line: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  const time = typeof entry.time === 'number' ? new Date(entry.time).toTimeString().slice(0, 8) : '';
  const level = LEVELS[entry.level as number] ?? String(entry.level);
  const fields = Object.entries(entry)
    .filter(([key]) => !OWN_FIELDS.has(key))
    .map(([key, value]) => {
      const err = value as { message?: string } | null;
      const text = key === 'err' && err && typeof err === 'object' && err.message ? err.message : typeof value === 'string' ? value : JSON.stringify(value);
      return `${key}=${/\s/.test(text) ? JSON.stringify(text) : text}`;
    });
  return [time, level.padEnd(5), entry.msg ?? '', ...fields].filter(Boolean).join(' ');
}

/** A pino destination that writes human lines to `out` (a TTY). */
export function humanLogStream(out: Writable = process.stdout): { write(chunk: string): void } {
  return {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line) out.write(humanLogLine(line) + '\n');
    },
  };
}
