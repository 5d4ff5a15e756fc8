/**
 * The ingest API's OpenAPI 3.1 document, served at GET /api/v1/openapi.json. The agent payload
 * schemas are the very objects the workers validate with (pipeline/agent/schemas.ts); OTLP
 * bodies are described by reference to the OTLP specification.
 */
import { ERROR_CODES } from '../core/errors.ts';
import {
  agentConfigSchema,
  deployMarkerSchema,
  heartbeatSchema,
  logBatchSchema,
  MAX_BATCH_ENTRIES,
  metricBatchSchema,
} from '../pipeline/agent/schemas.ts';
import { MANIFEST_FORMATS } from './agent-manifest.ts';

type Json = Record<string, unknown>;

/** A component schema: the validator's schema without its ajv `$id`. */
function component(schema: Json): Json {
  const { $id: _id, ...rest } = schema;
  return rest;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

function errorResponses(...codes: Array<keyof typeof ERROR_CODES>): Json {
  return Object.fromEntries(
    codes.map((code) => [String(ERROR_CODES[code].http), { description: `${code}: ${ERROR_CODES[code].doc}`, content: { 'application/json': { schema: ref('Error') } } }]),
  );
}

const KEYED = [{ apiKey: [] }, { bearer: [] }];
const INGEST_ERRORS = ['bad_request', 'unauthorized', 'request_timeout', 'payload_too_large', 'unsupported_media_type', 'rate_limited', 'unavailable'] as const;
const CONTENT_ENCODING = {
  name: 'Content-Encoding',
  in: 'header',
  required: false,
  schema: { enum: ['identity', 'gzip', 'zstd'] },
  description: 'Body compression. The 10 MiB cap applies to the compressed and the decompressed body.',
};

function otlpPath(signal: string, request: string): Json {
  return {
    post: {
      tags: ['OTLP'],
      summary: `OTLP/HTTP ${signal}`,
      description: `An ${request} (opentelemetry-proto), as protobuf or OTLP/JSON. Also on gRPC port 4317.`,
      security: KEYED,
      parameters: [CONTENT_ENCODING],
      requestBody: {
        required: true,
        content: {
          'application/x-protobuf': { schema: { type: 'string', format: 'binary' } },
          'application/json': { schema: { type: 'object', description: `OTLP/JSON ${request}` } },
        },
      },
      responses: {
        200: { description: `Stored durably. The Export${request.replace('Export', '').replace('Request', 'Response')} with partial_success when some items were skipped.` },
        ...Object.fromEntries(INGEST_ERRORS.map((code) => [String(ERROR_CODES[code].http), { description: `${code}: a google.rpc.Status in the request's content type.` }])),
      },
    },
  };
}

function agentIngestPath(summary: string, schema: string, description: string): Json {
  return {
    post: {
      tags: ['Agent'],
      summary,
      description,
      security: KEYED,
      parameters: [CONTENT_ENCODING],
      requestBody: { required: true, content: { 'application/json': { schema: ref(schema) } } },
      responses: {
        200: { description: 'Stored durably.', content: { 'application/json': { schema: ref('Accepted') } } },
        ...errorResponses(...INGEST_ERRORS),
      },
    },
  };
}

export function openApiDocument(): Json {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Sluice ingest API',
      version: '1.0.0',
      description: 'OTLP and agent ingestion. API keys authorize ingestion into their own source only; they cannot read data.',
    },
    tags: [{ name: 'OTLP' }, { name: 'Agent' }, { name: 'Operations' }],
    paths: {
      '/v1/traces': otlpPath('traces', 'ExportTraceServiceRequest'),
      '/v1/metrics': otlpPath('metrics', 'ExportMetricsServiceRequest'),
      '/v1/logs': otlpPath('logs', 'ExportLogsServiceRequest'),
      '/api/v1/ingest': agentIngestPath(
        'Agent log batch',
        'AgentLogBatch',
        `At most ${MAX_BATCH_ENTRIES} entries; a larger batch, or one with any invalid entry, is refused whole (400) and nothing of it is stored.`,
      ),
      '/api/v1/metrics/ingest': agentIngestPath('Agent metric batch', 'AgentMetricBatch', `At most ${MAX_BATCH_ENTRIES} points, refused whole like log batches.`),
      '/api/v1/heartbeat': agentIngestPath(
        'Agent heartbeat and version report',
        'AgentHeartbeat',
        'Records the agent\'s latest state. The answer carries `configEtag`: when it differs from the ETag of the config the agent holds, fetch /api/v1/agent/config.',
      ),
      '/api/v1/webhooks/deploy': agentIngestPath('Record a deployment marker', 'DeployMarker', 'For CI pipelines: the marker is stored and shown next to the metrics and errors of its time.'),
      '/api/v1/agent/config': {
        get: {
          tags: ['Agent'],
          summary: 'The configuration pushed to this agent\'s source',
          description: 'The source is the API key\'s; no parameter can name another. Send If-None-Match with the last ETag to get 304 when nothing changed.',
          security: KEYED,
          parameters: [{ name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' } }],
          responses: {
            200: {
              description: 'The current config (version 0 and an empty config when none was set).',
              headers: { ETag: { schema: { type: 'string' } } },
              content: { 'application/json': { schema: ref('AgentConfigResponse') } },
            },
            304: { description: 'Not modified.' },
            ...errorResponses('unauthorized', 'rate_limited'),
          },
        },
      },
      '/install/{token}': {
        get: {
          tags: ['Agent'],
          summary: 'Render the agent manifest of an install token',
          description: 'Tokens are valid 24 hours. The manifest runs the OpenTelemetry Collector with one ingestion key of the token\'s source.',
          parameters: [
            { name: 'token', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'format', in: 'query', required: false, schema: { enum: [...MANIFEST_FORMATS], default: 'kubernetes' } },
          ],
          responses: {
            200: {
              description: 'kubernetes: a manifest for kubectl apply; otelcol: a collector config file; env: SLUICE_ENDPOINT and SLUICE_API_KEY.',
              content: { 'application/yaml': { schema: { type: 'string' } }, 'text/plain': { schema: { type: 'string' } } },
            },
            ...errorResponses('bad_request', 'not_found', 'rate_limited'),
          },
        },
      },
      '/api/v1/health': {
        get: {
          tags: ['Operations'],
          summary: 'Liveness probe',
          responses: {
            200: {
              description: 'Alive.',
              content: { 'application/json': { schema: { type: 'object', properties: { status: { const: 'ok' }, service: { const: 'sluice-ingest' } } } } },
            },
          },
        },
      },
      '/api/v1/openapi.json': { get: { tags: ['Operations'], summary: 'This document', responses: { 200: { description: 'OpenAPI 3.1.' } } } },
      '/api/v1/docs': { get: { tags: ['Operations'], summary: 'This document as a web page', responses: { 200: { description: 'HTML.' } } } },
    },
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
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
