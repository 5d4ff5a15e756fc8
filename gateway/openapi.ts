/**
 * The ingest API's OpenAPI 3.1 document, served at GET /api/v1/openapi.json. The agent payload
 * schemas are the very objects the workers validate with (pipeline/agent/schemas.ts); OTLP
 * bodies are described by reference to the OTLP specification. Each operation lists the error
 * statuses its handler can answer (gateway/otlp-http.ts, gateway/agent-http.ts), no others.
 */
import { DOCS_ASSET_PARAMETER, DOCS_OPERATIONS, OPENAPI_INFO, type OpenApiDocument } from '../core/api-docs.ts';
import { ERROR_CODES, type ErrorCode } from '../core/errors.ts';
import type { Signal } from '../core/metrics.ts';
import {
  agentConfigSchema,
  deployMarkerSchema,
  heartbeatSchema,
  logBatchSchema,
  MAX_BATCH_ENTRIES,
  metricBatchSchema,
} from '../pipeline/agent/schemas.ts';
import { MANIFEST_FORMATS } from './agent-manifest.ts';
import { REJECTED_FIELD } from './otlp-response.ts';

type Json = Record<string, unknown>;

/** A component schema: the validator's schema without its ajv `$id`. */
function component(schema: Json): Json {
  const { $id: _id, ...rest } = schema;
  return rest;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const RETRY_AFTER = { 'Retry-After': { description: 'Seconds to wait before sending again.', schema: { type: 'integer' } } };
/** The refusals that say when to come back. */
const WITH_RETRY_AFTER: readonly ErrorCode[] = ['rate_limited', 'unavailable'];

/** Refusals with a body of `content`, one per code, described by the registry's line. */
function refusals(content: Json, ...codes: ErrorCode[]): Json {
  return Object.fromEntries(
    codes.map((code) => [
      String(ERROR_CODES[code].http),
      { description: `${code}: ${withoutLinks(ERROR_CODES[code].doc)}`, ...(WITH_RETRY_AFTER.includes(code) ? { headers: RETRY_AFTER } : {}), content },
    ]),
  );
}

/** The registry's lines are docs/reference/http-api.md's: their links lead nowhere here. */
const withoutLinks = (markdown: string) => markdown.replace(/\[([^\]]+)\]\([^)]*\)/g, '$1');

/** The agent API's refusals: `{ error, message, statusCode }`. */
const agentRefusals = (...codes: ErrorCode[]) => refusals({ 'application/json': { schema: ref('Error') } }, ...codes);

const KEYED = [{ apiKey: [] }, { bearer: [] }];
/** What a POST of the ingest port can be refused with: the door, the body and the bus. */
const INGEST_ERRORS: ErrorCode[] = ['bad_request', 'unauthorized', 'request_timeout', 'payload_too_large', 'unsupported_media_type', 'rate_limited', 'unavailable'];
const CONTENT_ENCODING = {
  name: 'Content-Encoding',
  in: 'header',
  required: false,
  schema: { type: 'string', enum: ['identity', 'gzip', 'zstd'] },
  description: 'Body compression. The 10 MiB cap applies to the compressed and the decompressed body.',
};
const BINARY = { type: 'string', contentMediaType: 'application/x-protobuf' };

const OTLP_REQUESTS: Record<Signal, string> = { traces: 'ExportTraceServiceRequest', metrics: 'ExportMetricsServiceRequest', logs: 'ExportLogsServiceRequest' };
const exportResponse = (signal: Signal) => OTLP_REQUESTS[signal].replace('Request', 'Response');

function otlpPath(signal: Signal): Json {
  const request = OTLP_REQUESTS[signal];
  return {
    post: {
      operationId: `export${signal[0]!.toUpperCase()}${signal.slice(1)}`,
      tags: ['OTLP'],
      summary: `Export ${signal} (OTLP/HTTP)`,
      description: `An ${request} (opentelemetry-proto), as protobuf or OTLP/JSON. The answer is in the request's content type. Also on gRPC port 4317.`,
      security: KEYED,
      parameters: [CONTENT_ENCODING],
      requestBody: {
        required: true,
        content: {
          'application/x-protobuf': { schema: BINARY },
          'application/protobuf': { schema: BINARY },
          'application/json': { schema: { type: 'object', description: `OTLP/JSON ${request}` } },
        },
      },
      responses: {
        200: {
          description: `Stored durably. The ${exportResponse(signal)}: empty, or with partialSuccess when some items were invalid and skipped.`,
          content: { 'application/x-protobuf': { schema: BINARY }, 'application/json': { schema: ref(exportResponse(signal)) } },
        },
        ...refusals({ 'application/x-protobuf': { schema: BINARY }, 'application/json': { schema: ref('RpcStatus') } }, ...INGEST_ERRORS),
      },
    },
  };
}

function agentIngestPath(operationId: string, summary: string, schema: string, description: string): Json {
  return {
    post: {
      operationId,
      tags: ['Agent'],
      summary,
      description,
      security: KEYED,
      parameters: [CONTENT_ENCODING],
      requestBody: { required: true, content: { 'application/json': { schema: ref(schema) } } },
      responses: {
        200: { description: 'Stored durably.', content: { 'application/json': { schema: ref('Accepted') } } },
        ...agentRefusals(...INGEST_ERRORS),
      },
    },
  };
}

/** This document, its page and the page's files. */
function docsPaths(): Record<string, Json> {
  return Object.fromEntries(
    Object.entries(DOCS_OPERATIONS).map(([path, { id, summary, description, content }]) => {
      const asset = path.endsWith('{file}');
      const responses = { 200: { description: 'OK.', content }, ...(asset ? agentRefusals('not_found') : {}) };
      return [path, { get: { operationId: id, tags: ['Operations'], summary, description, security: [], ...(asset ? { parameters: [DOCS_ASSET_PARAMETER] } : {}), responses } }];
    }),
  );
}

export function openApiDocument(): OpenApiDocument {
  return {
    openapi: '3.1.0',
    info: {
      ...OPENAPI_INFO,
      title: 'Sluice ingest API',
      description: 'OTLP and agent ingestion. API keys authorize ingestion into their own source only; they cannot read data.',
    },
    servers: [{ url: '/', description: 'This ingest port (4318 by default).' }],
    tags: [
      { name: 'OTLP', description: 'OpenTelemetry over HTTP: traces, metrics and logs.' },
      { name: 'Agent', description: 'Agents on hosts and CI pipelines: batches, heartbeats, deployment markers, pushed configs, install manifests.' },
      { name: 'Operations', description: 'Liveness and this documentation.' },
    ],
    paths: {
      '/v1/traces': otlpPath('traces'),
      '/v1/metrics': otlpPath('metrics'),
      '/v1/logs': otlpPath('logs'),
      '/api/v1/ingest': agentIngestPath(
        'ingestAgentLogs',
        'Agent log batch',
        'AgentLogBatch',
        `At most ${MAX_BATCH_ENTRIES} entries; a larger batch, or one with any invalid entry, is refused whole (400) and nothing of it is stored.`,
      ),
      '/api/v1/metrics/ingest': agentIngestPath('ingestAgentMetrics', 'Agent metric batch', 'AgentMetricBatch', `At most ${MAX_BATCH_ENTRIES} points, refused whole like log batches.`),
      '/api/v1/heartbeat': agentIngestPath(
        'sendHeartbeat',
        'Agent heartbeat and version report',
        'AgentHeartbeat',
        'Records the agent\'s latest state. The answer carries `configEtag`: when it differs from the ETag of the config the agent holds, fetch /api/v1/agent/config.',
      ),
      '/api/v1/webhooks/deploy': agentIngestPath('recordDeployment', 'Record a deployment marker', 'DeployMarker', 'For CI pipelines: the marker is stored and shown next to the metrics and errors of its time.'),
      '/api/v1/agent/config': {
        get: {
          operationId: 'getAgentConfig',
          tags: ['Agent'],
          summary: 'The configuration pushed to this agent\'s source',
          description: 'The source is the API key\'s; no parameter can name another. Send If-None-Match with the last ETag to get 304 when nothing changed.',
          security: KEYED,
          parameters: [{ name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' }, description: 'The ETag of the config the agent holds.' }],
          responses: {
            200: {
              description: 'The current config (version 0 and an empty config when none was set).',
              headers: { ETag: { schema: { type: 'string' }, description: 'Changes whenever the config does.' } },
              content: { 'application/json': { schema: ref('AgentConfigResponse') } },
            },
            304: { description: 'Not modified: the agent holds the current config.' },
            ...agentRefusals('unauthorized', 'rate_limited'),
          },
        },
      },
      '/install/{token}': {
        get: {
          operationId: 'getInstallManifest',
          tags: ['Agent'],
          summary: 'Render the agent manifest of an install token',
          description: 'Tokens are valid 24 hours. The manifest runs the OpenTelemetry Collector with one ingestion key of the token\'s source.',
          // The install token in the path is the credential.
          security: [],
          parameters: [
            { name: 'token', in: 'path', required: true, schema: { type: 'string' }, description: 'From `sluice install-tokens create`.' },
            { name: 'format', in: 'query', required: false, schema: { type: 'string', enum: [...MANIFEST_FORMATS], default: 'kubernetes' } },
          ],
          responses: {
            200: {
              description: 'kubernetes: a manifest for kubectl apply; otelcol: a collector config file; env: SLUICE_ENDPOINT and SLUICE_API_KEY.',
              content: { 'application/yaml': { schema: { type: 'string' } }, 'text/plain': { schema: { type: 'string' } } },
            },
            ...agentRefusals('bad_request', 'not_found', 'rate_limited'),
          },
        },
      },
      '/api/v1/health': {
        get: {
          operationId: 'getHealth',
          tags: ['Operations'],
          summary: 'Liveness probe',
          security: [],
          responses: {
            200: {
              description: 'Alive.',
              content: { 'application/json': { schema: { type: 'object', required: ['status', 'service'], properties: { status: { const: 'ok' }, service: { const: 'sluice-ingest' } } } } },
            },
          },
        },
      },
      ...docsPaths(),
    },
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'A source API key (slk_...).' },
        bearer: { type: 'http', scheme: 'bearer', description: 'The same source API key as a bearer token.' },
      },
      schemas: {
        AgentLogBatch: component(logBatchSchema),
        AgentMetricBatch: component(metricBatchSchema),
        AgentHeartbeat: component(heartbeatSchema),
        DeployMarker: component(deployMarkerSchema),
        AgentConfig: component(agentConfigSchema),
        AgentConfigResponse: {
          type: 'object',
          required: ['sourceId', 'version', 'updatedAt', 'config'],
          properties: {
            sourceId: { type: 'string' },
            version: { type: 'integer', description: '0 when no config was ever set.' },
            updatedAt: { type: ['string', 'null'], format: 'date-time' },
            config: ref('AgentConfig'),
          },
        },
        Accepted: {
          type: 'object',
          required: ['accepted'],
          properties: {
            accepted: { type: 'integer', description: 'Entries, points, heartbeats or markers stored.' },
            configEtag: { type: 'string', description: 'Heartbeats only: the ETag of the source\'s current agent config.' },
          },
        },
        ...Object.fromEntries((['traces', 'metrics', 'logs'] as const).map((signal) => [exportResponse(signal), exportResponseSchema(signal)])),
        RpcStatus: {
          type: 'object',
          description: 'google.rpc.Status in the protobuf JSON mapping.',
          required: ['code', 'message', 'details'],
          properties: {
            code: { type: 'integer', description: 'The gRPC status code (google.rpc.Code).' },
            message: { type: 'string' },
            details: {
              type: 'array',
              description: 'A google.rpc.RetryInfo on 429 and 503.',
              items: { type: 'object', properties: { '@type': { type: 'string' }, retryDelay: { type: 'string', examples: ['5s'] } } },
            },
          },
        },
        Error: {
          type: 'object',
          required: ['error', 'message', 'statusCode'],
          properties: {
            error: { enum: Object.keys(ERROR_CODES) },
            message: { type: 'string', description: 'What was wrong; for a bad field, its path first, e.g. `entries[42].timestamp: ...`.' },
            statusCode: { type: 'integer' },
          },
        },
      },
    },
  };
}

/** Export*ServiceResponse in OTLP/JSON: `{}`, or partialSuccess with the count it skipped. */
function exportResponseSchema(signal: Signal): Json {
  return {
    type: 'object',
    properties: {
      partialSuccess: {
        type: 'object',
        required: [REJECTED_FIELD[signal], 'errorMessage'],
        properties: {
          [REJECTED_FIELD[signal]]: { type: 'string', description: 'Items skipped (int64, as a string).' },
          errorMessage: { type: 'string', description: 'Why.' },
        },
      },
    },
  };
}
