/**
 * OTLP/JSON → OTLP protobuf bytes, so JSON requests go through the same transcoder as
 * protobuf ones (one code path for rows). The JSON is normalised per the OTLP JSON mapping,
 * guided by the message types of our proto/ files, then encoded with protobufjs:
 *   - keys in lowerCamelCase or in the proto's snake_case; unknown keys and nulls ignored
 *   - traceId, spanId, parentSpanId: hex strings (not base64, unlike other bytes)
 *   - enums as integers or as their names (an unknown name is left unset)
 *   - 64-bit integers as decimal strings or as numbers (a number above 2^53 has already lost
 *     precision in JSON.parse; senders use strings for that reason), within their type's range:
 *     [0, 2^64) for uint64 and fixed64 (every *_time_unix_nano), [-2^63, 2^63) for the signed
 *     ones; anything else is refused rather than wrapped (2^64 would be stored as 0)
 * The protobufjs root is loaded once per thread, on the first JSON request.
 */
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { nestedDeeperThan } from '../../core/json-depth.ts';
import { badRequest } from '../../core/errors.ts';
import { MAX_ANYVALUE_DEPTH, tooDeep } from './anyvalue-json.ts';
import type { Signal } from './signal.ts';

const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

const PROTO_FILES = [
  'opentelemetry/proto/collector/trace/v1/trace_service.proto',
  'opentelemetry/proto/collector/logs/v1/logs_service.proto',
  'opentelemetry/proto/collector/metrics/v1/metrics_service.proto',
];

const REQUEST_TYPES: Record<Signal, string> = {
  traces: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
  logs: 'opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest',
  metrics: 'opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest',
};

/** The bytes fields that OTLP/JSON carries as hex rather than base64. */
const HEX_ID_FIELDS = new Set(['traceId', 'spanId', 'parentSpanId']);
const INT64_TYPES = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
const UNSIGNED_TYPES = new Set(['uint64', 'fixed64']);
const DECIMAL = /^(-?)0*(\d*)$/;
/** The largest values, as decimal digits: uint64, int64, and the magnitude of int64's smallest. */
const MAX_UINT64 = '18446744073709551615';
const MAX_INT64 = '9223372036854775807';
const MIN_INT64_MAGNITUDE = '9223372036854775808';
const HEX = /^(?:[0-9a-fA-F]{2})*$/;

let root: protobuf.Root | undefined;
let anyValueType: protobuf.Type | undefined;

function requestType(signal: Signal): protobuf.Type {
  if (!root) {
    const loaded = new protobuf.Root();
    loaded.resolvePath = (_origin, target) => join(PROTO_DIR, target);
    loaded.loadSync(PROTO_FILES);
    loaded.resolveAll();
    anyValueType = loaded.lookupType('opentelemetry.proto.common.v1.AnyValue');
    // protobufjs stops at 100 nested messages; a kvlist value takes 3 per level, so values
    // MAX_ANYVALUE_DEPTH deep (refused past that by normalizeMessage, as on the protobuf path)
    // need room for 3 per level and the envelope.
    protobuf.util.recursionLimit = Math.max(protobuf.util.recursionLimit, 3 * MAX_ANYVALUE_DEPTH + 20);
    root = loaded;
  }
  return root.lookupType(REQUEST_TYPES[signal]);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const MAX_JSON_DEPTH = 512;

/** Parses an OTLP/JSON request body and returns the same request as protobuf bytes. */
export function otlpJsonToProtobuf(signal: Signal, body: Uint8Array): Uint8Array {
  if (body.length === 0) return new Uint8Array(0);
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw badRequest('invalid UTF-8 in the JSON body');
  }
  // OTLP's own structure is ~10 levels; each nested AnyValue adds 4 (the binary path allows 100).
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) throw badRequest(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw badRequest(`malformed JSON: ${(err as Error).message}`);
  }
  const type = requestType(signal);
  const normalized = normalizeMessage(type, parsed, '', 0);
  try {
    return type.encode(type.fromObject(normalized)).finish();
  } catch (err) {
    throw badRequest(`invalid OTLP/JSON: ${(err as Error).message}`);
  }
}

/** snake_case → lowerCamelCase, the way protobufjs names fields. */
function camelCase(key: string): string {
  return key.includes('_') ? key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()) : key;
}

/** `values`: how many AnyValues enclose this message (their nesting is limited as on the protobuf path). */
function normalizeMessage(type: protobuf.Type, value: unknown, path: string, values: number): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw badRequest(`invalid OTLP/JSON: ${path || 'the request'} must be an object`);
  }
  if (type === anyValueType && values++ > MAX_ANYVALUE_DEPTH) throw tooDeep();
  const out: Record<string, unknown> = {};
  for (const [key, raw] of Object.entries(value)) {
    const name = camelCase(key);
    const field = type.fields[name];
    if (!field || raw === null) continue;
    const fieldPath = path ? `${path}.${name}` : name;
    if (field.repeated) {
      if (!Array.isArray(raw)) throw badRequest(`invalid OTLP/JSON: ${fieldPath} must be an array`);
      out[name] = raw.map((item, i) => normalizeValue(field, item, `${fieldPath}[${i}]`, values));
    } else {
      out[name] = normalizeValue(field, raw, fieldPath, values);
    }
  }
  return out;
}

function normalizeValue(field: protobuf.Field, value: unknown, path: string, values: number): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) return normalizeMessage(resolved, value, path, values);
  if (field.type === 'bytes' && HEX_ID_FIELDS.has(field.name)) {
    if (typeof value !== 'string' || !HEX.test(value)) throw badRequest(`invalid OTLP/JSON: ${path} must be a hex string`);
    return Buffer.from(value, 'hex');
  }
  if (INT64_TYPES.has(field.type)) {
    const unsigned = UNSIGNED_TYPES.has(field.type);
    if (!isInt64(value, unsigned)) {
      const range = unsigned ? 'from 0 to 2^64-1' : 'from -2^63 to 2^63-1';
      throw badRequest(`invalid OTLP/JSON: ${path} must be an integer ${range}, as a decimal string or a number`);
    }
  }
  return value;
}

/** Whether a JSON value is a 64-bit integer of the signedness given, in its range. */
function isInt64(value: unknown, unsigned: boolean): boolean {
  if (typeof value === 'number') {
    // JSON.parse has already rounded it: 2^64 - 1 sent as a number arrives as 2^64.
    return Number.isInteger(value) && (unsigned ? value >= 0 && value < 2 ** 64 : value >= -(2 ** 63) && value < 2 ** 63);
  }
  if (typeof value !== 'string') return false;
  const match = DECIMAL.exec(value);
  if (!match || value === '-' || value === '') return false;
  const [, sign, digits] = match as unknown as [string, string, string];
  if (sign && unsigned) return digits === ''; // "-0" is 0
  return atMost(digits, unsigned ? MAX_UINT64 : sign ? MIN_INT64_MAGNITUDE : MAX_INT64);
}

/** Whether the digits (no leading zeros) are at most `max`'s. */
function atMost(digits: string, max: string): boolean {
  return digits.length < max.length || (digits.length === max.length && digits <= max);
}
