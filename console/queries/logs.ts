/**
 * Logs: otel_logs and agent_logs as one list, newest first, a page at a time.
 *
 * One statement per page, in two steps the engine runs in order:
 *   1. the boundary: the time of the (skip + limit + 1)-th newest matching entry, found by
 *      reading only the time column (and the filters' columns) of both tables;
 *   2. the page: the entries at or after the boundary, every column, in a total order (time,
 *      then kind, source, service and a hash of the rest), `LIMIT limit + 1 OFFSET skip`.
 * Step 2 reads whole rows only inside that narrow window, however many entries the range holds.
 *
 * The cursor is the time of the page's last entry and how many entries at exactly that time
 * were already shown (`skip`): entries sharing one timestamp are common (an agent batch without
 * timestamps is stamped with its receive time), and the total order pages through them without
 * losing or repeating any.
 */
import type { FacetValue, LogEntry, LogPage, LogQuery, LogSummary, SeverityBand } from '../api.ts';
import { QueryValidationError } from './errors.ts';
import { mapEquals, nanosToMillis, Params, type StatementExecutor } from './statement.ts';

interface Cursor {
  /** Unix nanoseconds of the last entry shown. */
  timeNs: string;
  /** Entries at exactly that time already shown. */
  skip: number;
}

const CURSOR = /^(\d{1,19})\.(\d{1,7})$/;

export function encodeCursor({ timeNs, skip }: Cursor): string {
  return Buffer.from(`${timeNs}.${skip}`).toString('base64url');
}

export function decodeCursor(cursor: string): Cursor {
  const match = CURSOR.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  if (!match || BigInt(match[1]!) > 9_223_372_036_854_775_807n) throw new QueryValidationError('cursor', 'is not a cursor of this query (start from the first page)');
  return { timeNs: match[1]!, skip: Number(match[2]) };
}

/** An entry as the statement gives it: all but `time`, made from `timeNs`. */
type LogRow = Omit<LogEntry, 'time'>;

/** A page of log entries; `query` is validated (schemas.ts), `limit` filled in. */
export async function logs(db: StatementExecutor, sources: readonly string[], query: LogQuery & { limit: number }): Promise<LogPage> {
  const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
  const params = new Params();
  const { otel, agent } = conditions(params, sources, query, cursor);
  const skip = cursor?.skip ?? 0;
  const window = params.bind(skip + query.limit + 1, 'UInt32');
  const rows = await db.rows<LogRow>(
    `WITH (
       SELECT min(ts) FROM (
         SELECT ts FROM (
           SELECT Timestamp AS ts FROM otel_logs WHERE ${otel} ORDER BY ts DESC LIMIT ${window}
           UNION ALL
           SELECT Timestamp AS ts FROM agent_logs WHERE ${agent} ORDER BY ts DESC LIMIT ${window}
         ) ORDER BY ts DESC LIMIT ${window}
       )
     ) AS boundary
     SELECT kind, toString(toUnixTimestamp64Nano(ts)) AS timeNs, sourceId, service, severityText, severityNumber, body,
       traceId, spanId, attributes, resource
     FROM (
       SELECT 'otlp' AS kind, Timestamp AS ts, SourceId AS sourceId, toString(ServiceName) AS service,
         toString(SeverityText) AS severityText, SeverityNumber AS severityNumber, Body AS body, TraceId AS traceId,
         SpanId AS spanId, CAST(LogAttributes, 'Map(String, String)') AS attributes, CAST(ResourceAttributes, 'Map(String, String)') AS resource
       FROM otel_logs WHERE ${otel} AND Timestamp >= boundary
       UNION ALL
       SELECT 'agent', Timestamp, SourceId, toString(Service), toString(Level), SeverityNumber, Message, '', '',
         if(Host = '', CAST(Attributes, 'Map(String, String)'), mapUpdate(CAST(Attributes, 'Map(String, String)'), map('host.name', toString(Host)))),
         CAST(map(), 'Map(String, String)')
       FROM agent_logs WHERE ${agent} AND Timestamp >= boundary
     )
     ORDER BY ts DESC, kind, sourceId, service, cityHash64(body, severityNumber, severityText, traceId, spanId, attributes, resource)
     LIMIT ${params.bind(query.limit + 1, 'UInt32')} OFFSET ${params.bind(skip, 'UInt32')}`,
    params,
  );
  const more = rows.length > query.limit;
  const page = more ? rows.slice(0, query.limit) : rows;
  const entries = page.map((row): LogEntry => ({ ...row, time: nanosToMillis(row.timeNs) }));
  if (!more) return { logs: entries };
  // Entries of the page at the last entry's time, plus those of earlier pages at that same time.
  const last = page[page.length - 1]!.timeNs;
  let atLast = 0;
  for (let i = page.length - 1; i >= 0 && page[i]!.timeNs === last; i--) atLast++;
  const before = cursor?.timeNs === last ? skip : 0;
  return { logs: entries, cursor: encodeCursor({ timeNs: last, skip: before + atLast }) };
}

/** How many entries match the filters in the range (`cursor` and `limit` do not apply): an alert rule's log count. */
export async function logCount(db: StatementExecutor, sources: readonly string[], query: LogQuery): Promise<number> {
  const params = new Params();
  const { otel, agent } = conditions(params, sources, query, undefined);
  const [row] = await db.rows<{ n: string | number }>(
    `SELECT (SELECT count() FROM otel_logs WHERE ${otel}) + (SELECT count() FROM agent_logs WHERE ${agent}) AS n`,
    params,
  );
  return Number(row?.n ?? 0);
}

/** Bucket widths of the volume chart, seconds: the least that gives at most VOLUME_BUCKETS bars. */
const VOLUME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400];
const VOLUME_BUCKETS = 80;
const TOP_SERVICES = 10;
const TOP_KEYS = 5;
const TOP_VALUES = 5;

export function volumeStepMs({ from, to }: { from: number; to: number }): number {
  const least = (to - from) / 1000 / VOLUME_BUCKETS;
  return 1000 * (VOLUME_STEPS.find((step) => step >= least) ?? Math.ceil(least / 86_400) * 86_400);
}

/** OTLP severity numbers in bands, as severity.ts names them (0: unset). */
const BAND = `multiIf(sev = 0, 'unset', sev < 5, 'trace', sev < 9, 'debug', sev < 13, 'info', sev < 17, 'warn', sev < 21, 'error', 'fatal')`;
/** Most severe first, as the facet lists them. */
const BANDS: SeverityBand[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'unset'];

/**
 * The volume by severity band and the facets of the entries a LogQuery matches (its cursor and
 * limit do not apply). Three statements over the same filters; each reads only the columns it
 * counts, and the attribute facet's keys and values are grouped in the engine, never listed.
 */
export async function logSummary(db: StatementExecutor, sources: readonly string[], query: LogQuery): Promise<LogSummary> {
  const params = new Params();
  const { otel, agent } = conditions(params, sources, query, undefined);
  const stepMs = volumeStepMs(query);
  const step = params.bind(stepMs, 'Int64');
  const volumeRows = await db.rows<{ t: string | number; band: SeverityBand; n: string | number }>(
    `SELECT intDiv(toUnixTimestamp64Milli(ts), ${step}) * ${step} AS t, ${BAND} AS band, count() AS n FROM (
       SELECT Timestamp AS ts, SeverityNumber AS sev FROM otel_logs WHERE ${otel}
       UNION ALL
       SELECT Timestamp, SeverityNumber FROM agent_logs WHERE ${agent}
     ) GROUP BY t, band ORDER BY t`,
    params,
  );
  const volume: LogSummary['volume'] = [];
  const bands = new Map<SeverityBand, number>();
  for (const row of volumeRows) {
    const time = Number(row.t);
    const count = Number(row.n);
    if (volume[volume.length - 1]?.time !== time) volume.push({ time, counts: {} });
    volume[volume.length - 1]!.counts[row.band] = count;
    bands.set(row.band, (bands.get(row.band) ?? 0) + count);
  }
  const total = [...bands.values()].reduce((sum, n) => sum + n, 0);
  if (total === 0) return { total, stepMs, volume, facets: { services: [], severities: [], attributes: [] } };

  const serviceRows = await db.rows<{ value: string; n: string | number }>(
    `SELECT service AS value, count() AS n FROM (
       SELECT toString(ServiceName) AS service FROM otel_logs WHERE ${otel}
       UNION ALL
       SELECT toString(Service) FROM agent_logs WHERE ${agent}
     ) GROUP BY value ORDER BY n DESC, value LIMIT ${TOP_SERVICES}`,
    params,
  );
  // The attributes as the page shows them: an agent entry's host is its host.name.
  const attributeRows = await db.rows<{ key: string; value: string; n: string | number; keyCount: string | number }>(
    `SELECT key, value, n, keyCount FROM (
       SELECT key, value, n, sum(n) OVER (PARTITION BY key) AS keyCount FROM (
         SELECT pair.1 AS key, pair.2 AS value, count() AS n FROM (
           SELECT arrayJoin(arrayZip(mapKeys(LogAttributes), mapValues(LogAttributes))) AS pair FROM otel_logs WHERE ${otel}
           UNION ALL
           SELECT arrayJoin(arrayZip(mapKeys(m), mapValues(m))) FROM (
             SELECT if(Host = '', CAST(Attributes, 'Map(String, String)'), mapUpdate(CAST(Attributes, 'Map(String, String)'), map('host.name', toString(Host)))) AS m
             FROM agent_logs WHERE ${agent}
           )
         ) GROUP BY key, value
       )
     ) ORDER BY keyCount DESC, key, n DESC, value LIMIT ${TOP_VALUES} BY key LIMIT ${TOP_KEYS * TOP_VALUES}`,
    params,
  );
  const attributes: LogSummary['facets']['attributes'] = [];
  for (const row of attributeRows) {
    const value: FacetValue = { value: row.value, count: Number(row.n) };
    const last = attributes[attributes.length - 1];
    if (last?.key === row.key) last.values.push(value);
    else attributes.push({ key: row.key, count: Number(row.keyCount), values: [value] });
  }
  return {
    total,
    stepMs,
    volume,
    facets: {
      services: serviceRows.map((row) => ({ value: row.value, count: Number(row.n) })),
      severities: BANDS.filter((band) => bands.has(band)).map((band) => ({ value: band, count: bands.get(band)! })),
      attributes,
    },
  };
}

/** The WHERE of each table: the tenant's sources, the range (up to the cursor), the filters. */
function conditions(params: Params, sources: readonly string[], query: LogQuery, cursor: Cursor | undefined): { otel: string; agent: string } {
  const source = params.sources('SourceId', sources);
  const from = params.millis(query.from);
  const to = params.millis(query.to);
  const common = [source, `Timestamp >= ${from}`, `Timestamp < ${to}`];
  if (cursor) common.push(`Timestamp <= fromUnixTimestamp64Nano(${params.bind(cursor.timeNs, 'Int64')})`);
  const otel = [...common];
  const agent = [...common];
  if (query.services?.length) {
    const services = params.list(query.services);
    otel.push(`ServiceName IN ${services}`);
    agent.push(`Service IN ${services}`);
  }
  if (query.minSeverity !== undefined) {
    const least = params.bind(query.minSeverity, 'UInt32');
    otel.push(`SeverityNumber >= ${least}`);
    agent.push(`SeverityNumber >= ${least}`);
  }
  if (query.text !== undefined) {
    const text = params.bind(query.text, 'String');
    otel.push(`positionCaseInsensitiveUTF8(Body, ${text}) > 0`);
    agent.push(`positionCaseInsensitiveUTF8(Message, ${text}) > 0`);
  }
  if (query.traceId !== undefined) {
    otel.push(`TraceId = ${params.bind(query.traceId, 'String')}`);
    agent.push('0'); // agent logs belong to no trace
  }
  for (const { key, value } of query.attributes ?? []) {
    const k = params.bind(key, 'String');
    const v = params.bind(value, 'String');
    const empty = value === '';
    // A resource attribute (host.name, k8s.pod.name...) filters as well as a log attribute.
    otel.push(`(${mapEquals('LogAttributes', k, v, empty)} OR ${mapEquals('ResourceAttributes', k, v, empty)})`);
    // The agent's host and service are columns of their own; the console shows them as these keys.
    agent.push(`(${mapEquals('Attributes', k, v, empty)} OR (${k} = 'host.name' AND Host = ${v}) OR (${k} = 'service.name' AND Service = ${v}))`);
  }
  return { otel: otel.join(' AND '), agent: agent.join(' AND ') };
}
