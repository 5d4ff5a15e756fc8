/**
 * Agent API payloads → RowBinary rows of the agent tables (storage/schema.ts, TABLE_COLUMNS
 * order). Runs in a pipeline worker: decode the body as strict UTF-8 JSON, validate it against
 * its schema (the whole request is refused at the first bad field, so nothing of a bad batch
 * is stored), then write one row per entry.
 */
import { badRequest } from '../../core/errors.ts';
import { nestedDeeperThan } from '../../core/json-depth.ts';
import type { RowBinaryWriter } from '../../storage/rowbinary.ts';
import { TranscodeOutput, type TranscodeResult } from '../../storage/table-rows.ts';
import { validateAgentPayload, type AgentKind, type Attributes, type DeployMarker, type Heartbeat, type LogBatch, type MetricBatch } from './schemas.ts';
import { readTimestamp, type EpochTime } from './time.ts';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Known level names (any case) → the stored level and its OpenTelemetry severity number. A
 * Map, not an object: a level named `constructor` must not find Object's.
 */
const LEVELS = new Map<string, [string, number]>([
  ['trace', ['trace', 1]],
  ['debug', ['debug', 5]],
  ['info', ['info', 9]],
  ['information', ['info', 9]],
  ['notice', ['info', 10]],
  ['warn', ['warn', 13]],
  ['warning', ['warn', 13]],
  ['error', ['error', 17]],
  ['err', ['error', 17]],
  ['fatal', ['fatal', 21]],
  ['critical', ['fatal', 21]],
  ['crit', ['fatal', 21]],
  ['alert', ['fatal', 22]],
  ['emergency', ['fatal', 23]],
  ['emerg', ['fatal', 23]],
]);

const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');

/** Parses and validates the body, then writes its rows. `receivedAt`: epoch nanoseconds. */
export function transcodeAgent(kind: AgentKind, body: Uint8Array, sourceId: string, maxChunkBytes: number, receivedAt: bigint): TranscodeResult {
  const value = validateAgentPayload(kind, parseJson(body));
  const out = new TranscodeOutput(maxChunkBytes);
  const request = new RequestColumns(sourceId, receivedAt);
  try {
    switch (kind) {
      case 'logs': writeLogs(out, value as LogBatch, request); break;
      case 'metrics': writeMetrics(out, value as MetricBatch, request); break;
      case 'heartbeat': writeHeartbeat(out, value as Heartbeat, request); break;
      case 'deploy': writeDeploy(out, value as DeployMarker, request); break;
    }
  } catch (err) {
    out.discard();
    throw err;
  }
  return out.finish();
}

function parseJson(body: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw badRequest('body is not valid UTF-8');
  }
  if (text.trim() === '') throw badRequest('body is empty: send a JSON object');
  // The payloads are 4 levels deep at most; a deeper body is refused before anything walks it.
  if (nestedDeeperThan(text, 32)) throw badRequest('body is nested deeper than 32 levels');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest(`body is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * What every row of one request shares, encoded once: the source id's bytes and the receive
 * time; and the entries' own timestamps, written without a bigint.
 */
class RequestColumns {
  private readonly source: Uint8Array;
  private readonly received: EpochTime;
  private readonly parsed: EpochTime = { seconds: 0, nanos: 0 };

  constructor(sourceId: string, receivedAt: bigint) {
    this.source = Buffer.from(sourceId);
    this.received = { seconds: Number(receivedAt / 1_000_000_000n), nanos: Number(receivedAt % 1_000_000_000n) };
  }

  sourceId(w: RowBinaryWriter): void {
    w.encoded(this.source);
  }

  /** Writes the receive time; returns its day (since 1970-01-01, UTC). */
  receivedAt(w: RowBinaryWriter): number {
    w.dateTime64Parts(this.received.seconds, this.received.nanos);
    return Math.floor(this.received.seconds / 86400);
  }

  /** Writes a validated timestamp, or the receive time when absent; returns its day (the row's partition). */
  time(w: RowBinaryWriter, value: string | number | undefined): number {
    if (value === undefined) return this.receivedAt(w);
    // The schema checked the format; a number past 2^53 may still round below the floor.
    if (!readTimestamp(value, this.parsed)) throw badRequest(`timestamp ${String(value)}: must be RFC 3339 or epoch nanoseconds`);
    w.dateTime64Parts(this.parsed.seconds, this.parsed.nanos);
    return Math.floor(this.parsed.seconds / 86400);
  }
}

function writeLogs(out: TranscodeOutput, batch: LogBatch, request: RequestColumns): void {
  const table = out.table('agent_logs');
  const w = table.writer;
  for (const entry of batch.entries) {
    const level = entry.level ?? '';
    const [levelName, severity] = LEVELS.get(level) ?? LEVELS.get(level.toLowerCase()) ?? [level, 0];
    request.sourceId(w);
    table.rowDay(request.time(w, entry.timestamp));
    request.receivedAt(w);
    w.string(entry.host ?? batch.host ?? '');
    w.string(entry.service ?? batch.service ?? '');
    w.string(levelName);
    w.u8(severity);
    w.string(entry.message);
    attributeMap(w, batch.attributes, entry.attributes);
    table.endRow();
    out.accepted++;
  }
}

function writeMetrics(out: TranscodeOutput, batch: MetricBatch, request: RequestColumns): void {
  const table = out.table('agent_metrics');
  const w = table.writer;
  for (const point of batch.metrics) {
    request.sourceId(w);
    table.rowDay(request.time(w, point.timestamp));
    w.string(point.host ?? batch.host ?? '');
    w.string(point.service ?? batch.service ?? '');
    w.string(point.name);
    w.string(point.type ?? 'gauge');
    w.string(point.unit ?? '');
    w.f64(point.value);
    attributeMap(w, batch.attributes, point.attributes);
    table.endRow();
    out.accepted++;
  }
}

function writeHeartbeat(out: TranscodeOutput, beat: Heartbeat, request: RequestColumns): void {
  const table = out.table('agent_heartbeats');
  const w = table.writer;
  request.sourceId(w);
  w.string(beat.agentId);
  // Last seen is the server's clock: an agent's own clock may be off.
  request.receivedAt(w);
  w.string(beat.host ?? '');
  w.string(beat.version);
  w.string(beat.os ?? '');
  w.string(beat.arch ?? '');
  w.string(beat.status ?? '');
  if (beat.startedAt === undefined) {
    w.u8(1); // Nullable: null
  } else {
    w.u8(0);
    request.time(w, beat.startedAt);
  }
  attributeMap(w, undefined, beat.attributes);
  table.endRow();
  out.accepted++;
}

function writeDeploy(out: TranscodeOutput, marker: DeployMarker, request: RequestColumns): void {
  const table = out.table('deploy_markers');
  const w = table.writer;
  request.sourceId(w);
  table.rowDay(request.time(w, marker.timestamp));
  w.string(marker.service);
  w.string(marker.version);
  w.string(marker.environment ?? '');
  w.string(marker.commit ?? '');
  w.string(marker.deployedBy ?? '');
  w.string(marker.description ?? '');
  w.string(marker.url ?? '');
  attributeMap(w, undefined, marker.attributes);
  table.endRow();
  out.accepted++;
}

/** Map(String, String): the batch's attributes overlaid by the entry's own. */
function attributeMap(w: RowBinaryWriter, defaults: Attributes | undefined, own: Attributes | undefined): void {
  const merged = defaults && own ? { ...defaults, ...own } : (own ?? defaults);
  if (!merged) {
    w.varUInt(0);
    return;
  }
  const keys = Object.keys(merged);
  w.varUInt(keys.length);
  for (const key of keys) {
    w.string(key);
    attributeValue(w, merged[key]!);
  }
}

/** A value as String() writes it, without making the string for the common kinds. */
function attributeValue(w: RowBinaryWriter, value: string | number | boolean): void {
  if (typeof value === 'string') w.string(value);
  else if (typeof value === 'boolean') w.encoded(value ? TRUE : FALSE);
  else if (Number.isSafeInteger(value) && value >= 0) w.decimal(value); // -0 too: String(-0) is "0"
  else w.ascii(String(value));
}
