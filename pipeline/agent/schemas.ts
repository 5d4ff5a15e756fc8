/**
 * The agent API's payloads, as JSON Schemas. The same objects validate requests (ajv, in the
 * worker threads) and are published in the OpenAPI document (gateway/openapi.ts), so the
 * documentation cannot drift from what is enforced.
 *
 * Shape rules an agent author can rely on: every timestamp is RFC 3339 or epoch nanoseconds;
 * `host`, `service` and `attributes` given on a batch apply to each of its entries unless the
 * entry sets its own; unknown fields are refused (free-form data goes in `attributes`), so a
 * misspelt field is caught, not silently dropped.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { badRequest } from '../../core/errors.ts';
import { firstProblem } from '../../core/validation.ts';
import { readTimestamp, type EpochTime } from './time.ts';

/** Most entries in one log (or metric) batch; a larger batch is refused whole. */
export const MAX_BATCH_ENTRIES = 10_000;
/** Largest pushed agent configuration, serialized. */
export const MAX_AGENT_CONFIG_BYTES = 64 * 1024;

/** The custom format of every timestamp field. */
export const TIMESTAMP_FORMAT = 'rfc3339-or-epoch-nanos';

const timestamp = {
  type: ['string', 'integer'],
  format: TIMESTAMP_FORMAT,
  minimum: 1e17,
  maximum: 9.2e18,
  description:
    'RFC 3339 with up to 9 fractional digits (2026-11-22T10:00:00.123Z), or epoch nanoseconds as an integer or a ' +
    'string of digits (a string keeps full precision; JSON numbers above 2^53 do not). Epoch values below 1e17 ' +
    '(seconds, milliseconds, microseconds) are refused.',
} as const;

const shortText = (maxLength: number, description: string) => ({ type: 'string', maxLength, description }) as const;

const attributes = {
  type: 'object',
  description: 'Free attributes: up to 128 keys, values string, number or boolean (stored as strings).',
  maxProperties: 128,
  propertyNames: { minLength: 1, maxLength: 256 },
  additionalProperties: { type: ['string', 'number', 'boolean'] },
} as const;

/** Fields a batch may set once for all its entries. */
const batchDefaults = {
  host: shortText(255, 'Default host of every entry.'),
  service: shortText(255, 'Default service of every entry.'),
  attributes,
} as const;

export const logEntrySchema = {
  type: 'object',
  required: ['message'],
  additionalProperties: false,
  properties: {
    timestamp: { ...timestamp, description: `${timestamp.description} Default: the time the batch was received.` },
    level: shortText(32, 'trace, debug, info, warn (warning), error or fatal (critical), any case; other values are kept as text with severity 0.'),
    message: { type: 'string', description: 'The log line.' },
    service: shortText(255, 'Service that wrote the entry.'),
    host: shortText(255, 'Host the entry comes from.'),
    attributes,
  },
} as const;

export const logBatchSchema = {
  $id: 'AgentLogBatch',
  title: 'Agent log batch',
  type: 'object',
  required: ['entries'],
  additionalProperties: false,
  properties: {
    ...batchDefaults,
    entries: { type: 'array', maxItems: MAX_BATCH_ENTRIES, items: logEntrySchema, description: `At most ${MAX_BATCH_ENTRIES} entries.` },
  },
} as const;

export const metricPointSchema = {
  type: 'object',
  required: ['name', 'value'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_.:/-]{0,254}$', description: 'Metric name, e.g. system.cpu.utilization.' },
    value: { type: 'number', description: 'The value.' },
    type: { enum: ['gauge', 'counter'], default: 'gauge', description: 'gauge: a reading; counter: a cumulative, monotonic total.' },
    unit: shortText(64, 'Unit, UCUM style (s, By, %, 1).'),
    timestamp: { ...timestamp, description: `${timestamp.description} Default: the time the batch was received.` },
    service: shortText(255, 'Service the value belongs to.'),
    host: shortText(255, 'Host the value was read on.'),
    attributes,
  },
} as const;

export const metricBatchSchema = {
  $id: 'AgentMetricBatch',
  title: 'Agent metric batch',
  type: 'object',
  required: ['metrics'],
  additionalProperties: false,
  properties: {
    ...batchDefaults,
    metrics: { type: 'array', maxItems: MAX_BATCH_ENTRIES, items: metricPointSchema, description: `At most ${MAX_BATCH_ENTRIES} points.` },
  },
} as const;

export const heartbeatSchema = {
  $id: 'AgentHeartbeat',
  title: 'Agent heartbeat',
  type: 'object',
  required: ['agentId', 'version'],
  additionalProperties: false,
  properties: {
    agentId: { type: 'string', minLength: 1, maxLength: 128, description: 'Stable id of the agent instance (unique within its source).' },
    version: { type: 'string', minLength: 1, maxLength: 64, description: 'Agent version.' },
    host: shortText(255, 'Host name.'),
    os: shortText(64, 'Operating system, e.g. linux.'),
    arch: shortText(32, 'CPU architecture, e.g. amd64.'),
    status: shortText(32, 'The agent\'s own health, e.g. ok or degraded.'),
    startedAt: { ...timestamp, description: `When the agent started. ${timestamp.description}` },
    attributes,
  },
} as const;

export const deployMarkerSchema = {
  $id: 'DeployMarker',
  title: 'Deployment marker',
  type: 'object',
  required: ['service', 'version'],
  additionalProperties: false,
  properties: {
    service: { type: 'string', minLength: 1, maxLength: 255, description: 'Service deployed.' },
    version: { type: 'string', minLength: 1, maxLength: 128, description: 'Version deployed.' },
    environment: shortText(64, 'e.g. production.'),
    commit: shortText(64, 'VCS revision.'),
    deployedBy: shortText(255, 'Who or what deployed (a person, a CI job).'),
    description: shortText(4096, 'Free text.'),
    url: { type: 'string', maxLength: 2048, pattern: '^https?://', description: 'Link to the pipeline run or release (http or https).' },
    timestamp: { ...timestamp, description: `When the deployment happened. ${timestamp.description} Default: the time received.` },
    attributes,
  },
} as const;

/** What `sluice agent-config set` accepts: any JSON object; the agent defines its meaning. */
export const agentConfigSchema = {
  $id: 'AgentConfig',
  title: 'Agent configuration',
  type: 'object',
  description: `Any JSON object, at most ${MAX_AGENT_CONFIG_BYTES / 1024} KiB serialized.`,
} as const;

export interface Attributes {
  [key: string]: string | number | boolean;
}

interface BatchDefaults {
  host?: string;
  service?: string;
  attributes?: Attributes;
}

export interface LogEntry {
  timestamp?: string | number;
  level?: string;
  message: string;
  service?: string;
  host?: string;
  attributes?: Attributes;
}

export interface LogBatch extends BatchDefaults {
  entries: LogEntry[];
}

export interface MetricPoint {
  name: string;
  value: number;
  type?: 'gauge' | 'counter';
  unit?: string;
  timestamp?: string | number;
  service?: string;
  host?: string;
  attributes?: Attributes;
}

export interface MetricBatch extends BatchDefaults {
  metrics: MetricPoint[];
}

export interface Heartbeat {
  agentId: string;
  version: string;
  host?: string;
  os?: string;
  arch?: string;
  status?: string;
  startedAt?: string | number;
  attributes?: Attributes;
}

export interface DeployMarker {
  service: string;
  version: string;
  environment?: string;
  commit?: string;
  deployedBy?: string;
  description?: string;
  url?: string;
  timestamp?: string | number;
  attributes?: Attributes;
}

/** Each agent endpoint's payload, by kind. */
export interface AgentPayloads {
  logs: LogBatch;
  metrics: MetricBatch;
  heartbeat: Heartbeat;
  deploy: DeployMarker;
}

export type AgentKind = keyof AgentPayloads;

export const AGENT_SCHEMAS = {
  logs: logBatchSchema,
  metrics: metricBatchSchema,
  heartbeat: heartbeatSchema,
  deploy: deployMarkerSchema,
} as const;

/** Every refusal of a timestamp (bad format, epoch digits out of range) reads the same; unknown fields point to attributes. */
const AGENT_MESSAGES = {
  format: 'must be RFC 3339 or epoch nanoseconds',
  minimum: 'must be RFC 3339 or epoch nanoseconds',
  maximum: 'must be RFC 3339 or epoch nanoseconds',
  additionalProperties: 'is not a known field (put free-form data in attributes)',
};

let validators: Record<AgentKind, ValidateFunction> | undefined;
/** Where the format check reads a timestamp into (the value itself is read again per row). */
const scratchTime: EpochTime = { seconds: 0, nanos: 0 };

function compile(): Record<AgentKind, ValidateFunction> {
  // allErrors off: stop at the first bad field, which is the one the error names.
  const ajv = new Ajv({ allErrors: false, useDefaults: true, strict: true, strictTypes: false });
  ajv.addFormat(TIMESTAMP_FORMAT, { type: 'string', validate: (value: string) => readTimestamp(value, scratchTime) });
  return {
    logs: ajv.compile(logBatchSchema),
    metrics: ajv.compile(metricBatchSchema),
    heartbeat: ajv.compile(heartbeatSchema),
    deploy: ajv.compile(deployMarkerSchema),
  };
}

/**
 * Checks a parsed body against its schema; throws bad_request naming the first bad field by
 * its path, e.g. `entries[42].timestamp: must be RFC 3339 or epoch nanoseconds`. A batch over
 * the entry cap is refused before anything of it is looked at.
 */
export function validateAgentPayload<K extends AgentKind>(kind: K, body: unknown): AgentPayloads[K] {
  const list = kind === 'logs' ? 'entries' : kind === 'metrics' ? 'metrics' : undefined;
  const items = list && isObject(body) ? body[list] : undefined;
  if (Array.isArray(items) && items.length > MAX_BATCH_ENTRIES) {
    throw badRequest(`batch has ${items.length} ${list}; the limit is ${MAX_BATCH_ENTRIES} per request (nothing was stored)`);
  }
  validators ??= compile();
  const validate = validators[kind];
  if (!validate(body)) {
    const { field, message } = firstProblem(validate.errors!, AGENT_MESSAGES);
    throw badRequest(`${field}: ${message}`);
  }
  return body as AgentPayloads[K];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
