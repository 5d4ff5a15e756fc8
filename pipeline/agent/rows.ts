/**
 * Agent API payloads → RowBinary rows of the agent tables (storage/schema.ts, TABLE_COLUMNS
 * order). Runs in a pipeline worker: decode the body as strict UTF-8 JSON, validate it against
 * its schema (the whole request is refused at the first bad field, so nothing of a bad batch
 * is stored), then write one row per entry.
 */
import { badRequest } from '../../core/errors.ts';
import { nestedDeeperThan } from '../../core/json-depth.ts';
import type { RowBinaryWriter } from '../otlp/rowbinary.ts';
import { TranscodeOutput, type TranscodeResult } from '../otlp/output.ts';
import { validateAgentPayload, type AgentKind, type Attributes, type DeployMarker, type Heartbeat, type LogBatch, type MetricBatch } from './schemas.ts';
import { parseTimestamp } from './time.ts';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Known level names (any case) → the stored level and its OpenTelemetry severity number. */
const LEVELS: Record<string, [string, number]> = {
  trace: ['trace', 1],
  debug: ['debug', 5],
  info: ['info', 9],
  information: ['info', 9],
  notice: ['info', 10],
  warn: ['warn', 13],
  warning: ['warn', 13],
  error: ['error', 17],
  err: ['error', 17],
  fatal: ['fatal', 21],
  critical: ['fatal', 21],
  crit: ['fatal', 21],
  alert: ['fatal', 22],
  emergency: ['fatal', 23],
  emerg: ['fatal', 23],
};

/** Parses and validates the body, then writes its rows. `receivedAt`: epoch nanoseconds. */
export function transcodeAgent(kind: AgentKind, body: Uint8Array, sourceId: string, maxChunkBytes: number, receivedAt: bigint): TranscodeResult {
  const value = validateAgentPayload(kind, parseJson(body));
  const out = new TranscodeOutput(maxChunkBytes);
  try {
    switch (kind) {
      case 'logs': writeLogs(out, value as LogBatch, sourceId, receivedAt); break;
      case 'metrics': writeMetrics(out, value as MetricBatch, sourceId, receivedAt); break;
      case 'heartbeat': writeHeartbeat(out, value as Heartbeat, sourceId, receivedAt); break;
      case 'deploy': writeDeploy(out, value as DeployMarker, sourceId, receivedAt); break;
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

function writeLogs(out: TranscodeOutput, batch: LogBatch, sourceId: string, receivedAt: bigint): void {
  const table = out.table('agent_logs');
  const w = table.writer;
  for (const entry of batch.entries) {
    const level = entry.level ?? '';
    const [levelName, severity] = LEVELS[level.toLowerCase()] ?? [level, 0];
    w.string(sourceId);
    dateTime64(w, time(entry.timestamp, receivedAt));
    dateTime64(w, receivedAt);
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

function writeMetrics(out: TranscodeOutput, batch: MetricBatch, sourceId: string, receivedAt: bigint): void {
  const table = out.table('agent_metrics');
  const w = table.writer;
  for (const point of batch.metrics) {
    w.string(sourceId);
    dateTime64(w, time(point.timestamp, receivedAt));
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

function writeHeartbeat(out: TranscodeOutput, beat: Heartbeat, sourceId: string, receivedAt: bigint): void {
  const table = out.table('agent_heartbeats');
  const w = table.writer;
  w.string(sourceId);
  w.string(beat.agentId);
  // Last seen is the server's clock: an agent's own clock may be off.
  dateTime64(w, receivedAt);
  w.string(beat.host ?? '');
  w.string(beat.version);
  w.string(beat.os ?? '');
  w.string(beat.arch ?? '');
  w.string(beat.status ?? '');
  if (beat.startedAt === undefined) {
    w.u8(1); // Nullable: null
  } else {
    w.u8(0);
    dateTime64(w, time(beat.startedAt, receivedAt));
  }
  attributeMap(w, undefined, beat.attributes);
  table.endRow();
  out.accepted++;
}

function writeDeploy(out: TranscodeOutput, marker: DeployMarker, sourceId: string, receivedAt: bigint): void {
  const table = out.table('deploy_markers');
  const w = table.writer;
  w.string(sourceId);
  dateTime64(w, time(marker.timestamp, receivedAt));
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

/** A validated timestamp (or the receive time when absent) in epoch nanoseconds. */
function time(value: string | number | undefined, receivedAt: bigint): bigint {
  if (value === undefined) return receivedAt;
  // The schema checked the format; a number past 2^53 may still round below the floor.
  const nanos = parseTimestamp(value);
  if (nanos === undefined) throw badRequest(`timestamp ${String(value)}: must be RFC 3339 or epoch nanoseconds`);
  return nanos;
}

/** DateTime64(9) in RowBinary: Int64 nanoseconds, little-endian. */
function dateTime64(w: RowBinaryWriter, nanos: bigint): void {
  w.u64(Number(nanos & 0xffffffffn), Number(nanos >> 32n));
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
    w.string(String(merged[key]));
  }
}
