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
  /** The data dir has sources already: next steps read what is there rather than make a first source. */
  hasSources?: boolean;
  /** The OTLP transcoder the worker threads run, and the setting that chose it; absent in a role without them. */
  transcoder?: { setting: string; transcoder: 'wasm' | 'js'; problem?: string | undefined } | undefined;
  /** SLUICE_DELIVERY_INBOX: nothing is sent, every message is kept in the development inbox. */
  deliveryInbox?: boolean;
  /** How the memory budget was divided, one line (core/memory-budget.ts#memorySummary). */
  memory?: string;
}

/** The listening address as a URL's host: a wildcard address is not one to type into a browser or an exporter. */
export function reachableHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

const QUERY_SERVICES = '  npx sluice query "SELECT ServiceName, count() FROM otel.otel_traces GROUP BY ServiceName"';
/** On a new data dir: a first source, sample data, a first query. */
const NEXT_FIRST = [
  '  npx sluice sources create --name my-app   # a source and its API key',
  '  npx sluice demo                           # sample traces, logs and metrics',
  QUERY_SERVICES,
];
/** On a data dir with sources: what is there. */
const NEXT_WITH_SOURCES = [
  '  npx sluice sources list                   # the sources and their keys',
  '  npx sluice agents list                    # agents and their last heartbeat',
  QUERY_SERVICES,
];

/** Never a silent sink: a server that sends nothing says so where it says what it serves. */
const INBOX_WARNING = [
  '!! DEVELOPMENT INBOX ON (SLUICE_DELIVERY_INBOX=true): nothing is sent. Emails,',
  '!! WhatsApp messages and webhooks are kept, as they would have been sent, for',
  '!! `npx sluice relay inbox list` and the console\'s Inbox page. Never in production.',
];

/** Where there is no terminal: the first-run link as a line of its own on stderr, not only inside a JSON log line. */
export function firstRunNotice(link: string): string {
  return `Sign in to the console the first time with this one-time link (24 hours; it makes you its owner): ${link}\n`;
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
  if (s.deliveryInbox) rows.push(['Inbox', s.consoleUrl ? `${s.consoleUrl}/inbox` : 'npx sluice relay inbox list', 'development inbox: deliveries kept, not sent']);
  if (s.queryPort) rows.push(['ClickHouse', `http://${host}:${s.queryPort}`, 'read-only SQL for Grafana (docs/guides/querying.md)']);
  if (s.httpPort) {
    rows.push(['API docs', `${http}/api/v1/docs`, '']);
    rows.push(['Metrics', `${http}/metrics`, 'Prometheus']);
  }
  if (s.transcoder) {
    const { setting, transcoder, problem } = s.transcoder;
    rows.push(['Transcoder', transcoder === 'wasm' ? 'WebAssembly' : 'JavaScript', `SLUICE_TRANSCODER=${setting}${problem ? ` (${problem})` : ''}`]);
  }
  const width = (i: 0 | 1) => Math.max(...rows.map((row) => row[i].length));
  const table = rows.map(([what, url, note]) => `  ${what.padEnd(width(0))}  ${url.padEnd(width(1))}  ${note}`.trimEnd());
  const next = s.httpPort && !s.cluster ? ['', 'Next, in another terminal:', ...(s.hasSources ? NEXT_WITH_SOURCES : NEXT_FIRST)] : [];
  const inbox = s.deliveryInbox ? ['', ...INBOX_WARNING] : [];
  const memory = s.memory ? ['', `Memory budget ${s.memory} (SLUICE_MEMORY_BUDGET_MB; docs/guides/operating.md)`] : [];
  const firstRun = s.firstRunLink ? ['', 'Sign in to the console the first time with this one-time link (24 hours; it makes you its owner):', `  ${s.firstRunLink}`] : [];
  return [`Sluice ${s.role} is serving (${where})`, '', ...table, ...memory, ...inbox, ...firstRun, ...next, '', 'Ctrl-C stops it. Logs follow.', ''].join('\n');
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
